# tries: str.format field that reads __class__ / __init__.__globals__
# expect: program_rejected
# ruff: noqa
def execute_command(scene_graph):
    return "{0.__init__.__globals__}".format(scene_graph)
