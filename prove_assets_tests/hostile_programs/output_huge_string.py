# tries: returning a 1 GB string
# expect: program_error
# ruff: noqa
def execute_command(scene_graph):
    return "y" * 10**9
