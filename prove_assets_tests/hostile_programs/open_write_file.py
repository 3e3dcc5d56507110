# tries: writing a file into the working directory
# expect: program_rejected
# ruff: noqa
def execute_command(scene_graph):
    with open("pwned.txt", "w") as f:
        f.write("pwned")
    return "written"
