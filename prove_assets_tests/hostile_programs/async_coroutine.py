# tries: coroutines (cr_frame walks)
# expect: program_rejected
# ruff: noqa
async def inner():
    return 1


def execute_command(scene_graph):
    return inner()
