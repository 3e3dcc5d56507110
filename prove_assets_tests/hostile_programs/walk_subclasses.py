# tries: the classic ().__class__.__mro__[1].__subclasses__() walk
# expect: program_rejected
# ruff: noqa
def execute_command(scene_graph):
    for cls in ().__class__.__mro__[1].__subclasses__():
        if cls.__name__ == "_wrap_close":
            return cls.__init__.__globals__["system"]("id")
    return "none"
