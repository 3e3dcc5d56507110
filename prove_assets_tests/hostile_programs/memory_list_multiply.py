# tries: a list of a billion items
# expect: program_error
# ruff: noqa
def execute_command(scene_graph):
    return len([0] * 10**9)
