# tries: stuffing visited with junk / non-strings
# expect: ok|program_error
# ruff: noqa
def execute_command(scene_graph):
    scene_graph.visited.update(["not-an-entity", 42, ("a", "b")])
    return "ok"
