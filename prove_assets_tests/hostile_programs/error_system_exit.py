# tries: raising SystemExit / KeyboardInterrupt to kill the worker
# expect: program_error|program_rejected
# ruff: noqa
def execute_command(scene_graph):
    raise SystemExit(3)
