# tries: growing a list without bound
# expect: program_error|program_timeout
# ruff: noqa
def execute_command(scene_graph):
    items = []
    while True:
        items.append("x" * 4096)
