"""Thin commands: gather inputs, call the layers below, print, set the exit code. Nothing imports a command."""
