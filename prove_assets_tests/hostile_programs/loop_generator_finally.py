# tries: an abandoned generator whose `finally:` loops forever when it is garbage collected
# expect: program_timeout
# ruff: noqa
def gen():
    try:
        yield 1
    finally:
        while True:
            pass


def execute_command(scene_graph):
    g = gen()
    next(g)
    return "done"
