# tries: printing without end (print is a no-op in the sandbox)
# expect: program_timeout
# ruff: noqa
def execute_command(scene_graph):
    while True:
        print("spam " * 1000)
