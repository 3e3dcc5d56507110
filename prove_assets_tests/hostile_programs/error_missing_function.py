# tries: no execute_command at all
# expect: program_error
# ruff: noqa
def verify(scene_graph):
    return True
