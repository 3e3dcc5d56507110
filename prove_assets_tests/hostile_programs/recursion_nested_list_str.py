# tries: a million-level nested list whose str() recurses in C
# expect: program_error|program_timeout
# ruff: noqa
def execute_command(scene_graph):
    x = []
    for _ in range(1_000_000):
        x = [x]
    return x
