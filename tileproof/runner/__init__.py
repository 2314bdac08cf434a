"""The runner: the only code that starts processes (steps, capture of the environment)."""
