# tries: execute_command with the wrong number of parameters
# expect: program_error
# ruff: noqa
def execute_command():
    return True
