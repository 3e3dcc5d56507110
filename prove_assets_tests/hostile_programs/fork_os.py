# tries: os.fork()
# expect: program_rejected
# ruff: noqa
import os


def execute_command(scene_graph):
    os.fork()
    return "forked"
