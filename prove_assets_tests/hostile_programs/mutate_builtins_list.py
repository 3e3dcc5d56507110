# tries: mutating objects reachable from the builtins the next program uses
# expect: ok|program_error|program_rejected
# ruff: noqa
def execute_command(scene_graph):
    cls = scene_graph.to_directed_class()
    cached = cls.nodes
    cached.lock.acquire()
    return "locked"
