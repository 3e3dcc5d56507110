# tries: reaching __builtins__ to get the real builtins
# expect: program_rejected
# ruff: noqa
def execute_command(scene_graph):
    return __builtins__["__import__"]("os").getcwd()
