# tries: opening a network connection
# expect: program_rejected
# ruff: noqa
import socket


def execute_command(scene_graph):
    s = socket.create_connection(("example.com", 80), timeout=1)
    return s.recv(10)
