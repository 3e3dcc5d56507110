# tries: a match class pattern that reads __class__ by keyword
# expect: program_rejected
# ruff: noqa
def execute_command(scene_graph):
    match scene_graph:
        case str(__class__=cls):
            return cls
    return None
