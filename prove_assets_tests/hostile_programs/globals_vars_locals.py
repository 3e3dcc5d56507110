# tries: globals() / vars() to reach module state
# expect: program_rejected
# ruff: noqa
def execute_command(scene_graph):
    return globals()["__builtins__"]
