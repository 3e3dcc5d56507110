# tries: frame walking with only non-underscore names (gi_frame, f_back, f_globals)
# expect: program_rejected
# ruff: noqa
def execute_command(scene_graph):
    def g():
        yield 1
    gen = g()
    return gen.gi_frame.f_back
