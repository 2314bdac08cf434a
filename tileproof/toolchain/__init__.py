"""The tile toolchain: finding nvcc/tileiras, their coherence, the one nvcc command, diagnoses.

Below the runner: nothing here imports ``tileproof.runner`` or ``subprocess``. Code here builds
argv and parses output; where it must run something (a tool's ``--version``, a build step) it
takes a runner callable as an argument (``find.VersionText``, ``build.StepRunner``).
"""
