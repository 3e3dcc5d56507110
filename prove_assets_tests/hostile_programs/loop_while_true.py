# tries: an infinite `while True: pass` loop
# expect: program_timeout
# ruff: noqa
def execute_command(scene_graph):
    while True:
        pass
