# tries: int.mro() to reach object, then call it
# expect: program_rejected
# ruff: noqa
def execute_command(scene_graph):
    base = int.mro()[-1]
    return base()
