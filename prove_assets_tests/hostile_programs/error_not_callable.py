# tries: execute_command that is not a function
# expect: program_error
# ruff: noqa
execute_command = 42
