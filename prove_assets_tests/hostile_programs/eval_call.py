# tries: eval of a string
# expect: program_rejected
# ruff: noqa
def execute_command(scene_graph):
    return eval("1 + 1")
