# tries: a generator kept in a reference cycle whose `finally:` spins when the cycle is collected later
# expect: program_timeout
# ruff: noqa
def gen(box):
    try:
        yield 1
    finally:
        n = 0
        while True:
            n += 1


def execute_command(scene_graph):
    box = []
    g = gen(box)
    box.append(g)
    box.append(box)
    next(g)
    return "done"
