# tries: allocating a 10 GB string
# expect: program_error
# ruff: noqa
def execute_command(scene_graph):
    return len("x" * 10**10)
