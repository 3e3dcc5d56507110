# tries: an infinite loop at import time, before execute_command is even called
# expect: program_timeout
# ruff: noqa
while True:
    pass


def execute_command(scene_graph):
    return "never"
