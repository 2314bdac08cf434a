"""The runner: the only code in tileproof that starts a process.

``process`` starts one contained process (own session, deadline, capped streams, the whole
tree killed at its end: its own PID namespace or cgroup, whose first process is ``stepinit``,
else a marker and a subreaper; signal handling; scratch folders); ``query`` asks a tool a short
question (git, Slurm's clients) with a deadline; ``forked`` is the one forked helper for
byte work (tests/test_architecture.py finds any other start). ``step`` keeps a process as
redacted evidence; ``environment`` is the one allowlisted child environment; ``capture``
the one session capture (git, pip freeze, the GPU query, tool versions); ``session`` a
run session; ``execute`` runs a lesson program; ``children`` a tileproof child;
``builds`` runs the build plan under build/'s lock; ``locate`` finds (or builds) the
attested binary. Layers below (records, toolchain) start nothing: where they need a
process they take a callable from here (``toolchain.find.VersionText``,
``toolchain.build.StepRunner``).
"""
