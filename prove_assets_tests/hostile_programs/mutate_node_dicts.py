# tries: mutating node attribute dicts, the dict returned by get_attributes and sg_dict
# expect: ok|program_error
# ruff: noqa
def execute_command(scene_graph):
    scene_graph.nodes["cat"]["color"] = "green"
    attrs = scene_graph.get_attributes("sofa")
    attrs["color"] = "purple"
    scene_graph.sg_dict["cat"]["attributes"]["color"] = "green"
    scene_graph.sg_dict.clear()
    scene_graph.graph["caption"] = "hacked"
    return scene_graph.get_attributes("cat")["color"]
