# tries: a dict with a billion entries
# expect: program_error|program_timeout
# ruff: noqa
def execute_command(scene_graph):
    return len({i: str(i) for i in range(10**9)})
