# tries: returning a list of 10**8 integers (str() alone would be ~1 GB)
# expect: program_error|program_timeout
# ruff: noqa
def execute_command(scene_graph):
    return list(range(10**8))
