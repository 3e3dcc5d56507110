# tries: an endless iterator built from iter(callable, sentinel)
# expect: program_timeout
# ruff: noqa
def execute_command(scene_graph):
    total = 0
    for x in iter(int, 1):
        total += x
    return total
