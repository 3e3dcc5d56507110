# tries: removing every node and edge
# expect: ok|program_error
# ruff: noqa
def execute_command(scene_graph):
    for e in list(scene_graph.get_entities()):
        scene_graph.remove_node(e)
    scene_graph.clear()
    return len(scene_graph.get_entities())
