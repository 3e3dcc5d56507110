# tries: breakpoint()/input()/exit()
# expect: program_rejected
# ruff: noqa
def execute_command(scene_graph):
    breakpoint()
    return input("? ")
