# tries: str.format on a format string built at run time
# expect: program_rejected
# ruff: noqa
def execute_command(scene_graph):
    fmt = "{0._" + "_class__}"
    return fmt.format(scene_graph)
