# tries: catching the timeout and returning an answer as if nothing happened
# expect: program_timeout
# ruff: noqa
def spin():
    while True:
        pass


def execute_command(scene_graph):
    try:
        spin()
    except:
        return "yes"
