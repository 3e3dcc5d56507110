# tries: a generator's gi_frame to walk up to the worker's frames
# expect: program_rejected
# ruff: noqa
def execute_command(scene_graph):
    g = (x for x in [1])
    frame = g.gi_frame
    while frame.f_back is not None:
        frame = frame.f_back
    return frame.f_globals
