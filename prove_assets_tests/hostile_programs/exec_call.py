# tries: exec of an import hidden in a string
# expect: program_rejected
# ruff: noqa
def execute_command(scene_graph):
    exec("import os")
    return "ok"
