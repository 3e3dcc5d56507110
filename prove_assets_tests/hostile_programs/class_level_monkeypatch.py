# tries: monkeypatching the networkx DiGraph class so the NEXT program sees fake data
# expect: program_rejected
# ruff: noqa
def execute_command(scene_graph):
    cls = scene_graph.to_directed_class()
    cls.out_edges = lambda self, *a, **k: []
    return "patched"
