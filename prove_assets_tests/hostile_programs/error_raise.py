# tries: raising an exception
# expect: program_error
# ruff: noqa
def execute_command(scene_graph):
    raise ValueError("boom")
