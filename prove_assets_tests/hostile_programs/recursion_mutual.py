# tries: unbounded mutual recursion
# expect: program_error
# ruff: noqa
def ping(n):
    return pong(n + 1)


def pong(n):
    return ping(n + 1)


def execute_command(scene_graph):
    return ping(0)
