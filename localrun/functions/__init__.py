"""Lambda's execution environments: child processes running a handler (source or built mode),
the variables each function sees, and the recording of every AWS call a function makes.
"""
