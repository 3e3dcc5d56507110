# tries: a class whose __str__ never returns (class definitions are rejected)
# expect: program_rejected
# ruff: noqa
class Evil:
    def __str__(self):
        while True:
            pass


def execute_command(scene_graph):
    return Evil()
