# tries: appending to relation lists shared between edges and the parsed JSON
# expect: ok|program_error
# ruff: noqa
def execute_command(scene_graph):
    for src, tgt, data in scene_graph.edges(data=True):
        for values in data.values():
            values.append("inside")
            values.clear()
    rels = scene_graph.get_outgoing_relations("cat")
    for tgt in rels:
        rels[tgt]["spatial"] = ["under"]
    scene_graph.remove_edge("cat", "sofa")
    return scene_graph.get_outgoing_relations("cat")
