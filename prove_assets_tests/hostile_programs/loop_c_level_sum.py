# tries: a loop inside C code (sum over a huge range) where no Python signal handler can run
# expect: program_timeout
# ruff: noqa
def execute_command(scene_graph):
    return sum(range(10**15))
