# tries: running a shell command with subprocess
# expect: program_rejected
# ruff: noqa
def execute_command(scene_graph):
    import subprocess
    return subprocess.check_output(["id"]).decode()
