# tries: reading /etc/passwd
# expect: program_rejected
# ruff: noqa
def execute_command(scene_graph):
    return open("/etc/passwd").read()
