# tries: catching the sandbox's timeout with a bare except and spinning again (host must SIGKILL)
# expect: program_timeout
# ruff: noqa
def spin():
    n = 0
    while True:
        n += 1


def execute_command(scene_graph):
    while True:
        try:
            spin()
        except:
            pass
