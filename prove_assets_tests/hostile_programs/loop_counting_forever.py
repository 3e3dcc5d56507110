# tries: an infinite loop doing arithmetic
# expect: program_timeout
# ruff: noqa
def execute_command(scene_graph):
    n = 0
    while n >= 0:
        n += 1
    return n
