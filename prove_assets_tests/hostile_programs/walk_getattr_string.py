# tries: getattr with a dunder name built from pieces
# expect: program_rejected
# ruff: noqa
def execute_command(scene_graph):
    name = "_" + "_class__"
    return getattr(scene_graph, name)
