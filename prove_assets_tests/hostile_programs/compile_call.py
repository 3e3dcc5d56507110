# tries: compiling a code object
# expect: program_rejected
# ruff: noqa
def execute_command(scene_graph):
    code = compile("1 + 1", "<x>", "eval")
    return code
