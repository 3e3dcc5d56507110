# tries: an exception traceback's tb_frame.f_back.f_globals
# expect: program_rejected
# ruff: noqa
def execute_command(scene_graph):
    try:
        1 / 0
    except ZeroDivisionError as e:
        return e.__traceback__.tb_frame.f_back.f_globals
