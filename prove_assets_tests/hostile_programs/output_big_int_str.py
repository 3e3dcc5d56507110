# tries: returning an integer with 10**5 digits (str() conversion limit)
# expect: program_error
# ruff: noqa
def execute_command(scene_graph):
    return 10**100_000
