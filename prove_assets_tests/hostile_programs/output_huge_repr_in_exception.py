# tries: raising an exception whose message is enormous
# expect: program_error
# ruff: noqa
def execute_command(scene_graph):
    raise ValueError("z" * 10**7)
