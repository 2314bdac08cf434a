"""This course's sessions: tileproof's own (``nox -l`` lists them). ``nox -s compile`` builds every program with no
GPU; ``nox -s tests`` checks the lessons and kernels; on a GPU, ``nox -s run-gpu`` writes the evidence."""

try:
    from tileproof import sessions
except ImportError as e:  # nox from an environment without tileproof
    raise SystemExit(f"noxfile.py: {e}: nox runs where tileproof is not installed "
                     "(fix: pip install tileproof in the environment nox runs from)") from None

sessions.register()
