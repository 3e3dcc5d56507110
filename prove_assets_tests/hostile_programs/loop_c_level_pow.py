# tries: a huge big-integer power computed in C
# expect: program_timeout|program_error
# ruff: noqa
def execute_command(scene_graph):
    return pow(3, 10**12) % 7
