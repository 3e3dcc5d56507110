# tries: format_map with a nested dunder field inside a format spec
# expect: program_rejected
# ruff: noqa
def execute_command(scene_graph):
    return "{g:{g.__class__}}".format_map({"g": scene_graph})
