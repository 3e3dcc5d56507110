# tries: doubling a string until memory runs out
# expect: program_error|program_timeout
# ruff: noqa
def execute_command(scene_graph):
    s = "ab"
    while True:
        s = s + s
