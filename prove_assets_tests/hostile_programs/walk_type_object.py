# tries: type()/object to create new classes and reach object.__subclasses__
# expect: program_rejected
# ruff: noqa
def execute_command(scene_graph):
    T = type("T", (object,), {})
    return T
