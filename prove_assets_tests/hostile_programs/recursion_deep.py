# tries: unbounded recursion
# expect: program_error
# ruff: noqa
def execute_command(scene_graph):
    def f(n):
        return f(n + 1) + 1
    return f(0)
