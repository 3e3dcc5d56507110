# tries: a syntax error
# expect: program_error
# ruff: noqa
def execute_command(scene_graph)
    return 1
