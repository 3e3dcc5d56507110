# tries: the SceneGraph method's __func__.__globals__ to reach networkx and os
# expect: program_rejected
# ruff: noqa
def execute_command(scene_graph):
    g = scene_graph.get_entities.__func__.__globals__
    return g["nx"].utils
