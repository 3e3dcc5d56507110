# tries: __import__('os') without an import statement
# expect: program_rejected
# ruff: noqa
def execute_command(scene_graph):
    return __import__("os").getcwd()
