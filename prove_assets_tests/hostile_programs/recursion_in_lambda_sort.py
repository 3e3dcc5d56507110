# tries: recursion through a sort key
# expect: program_error
# ruff: noqa
def execute_command(scene_graph):
    key = lambda v: sorted([v], key=key)
    return sorted(scene_graph.get_entities(), key=key)
