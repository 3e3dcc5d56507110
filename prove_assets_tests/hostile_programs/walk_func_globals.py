# tries: a function's __globals__
# expect: program_rejected
# ruff: noqa
def execute_command(scene_graph):
    return execute_command.__globals__
