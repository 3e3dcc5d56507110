# tries: starting threads
# expect: program_rejected
# ruff: noqa
from threading import Thread


def execute_command(scene_graph):
    Thread(target=lambda: None).start()
    return "ok"
