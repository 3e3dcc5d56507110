# tries: importlib.import_module
# expect: program_rejected
# ruff: noqa
import importlib


def execute_command(scene_graph):
    return importlib.import_module("os").getcwd()
