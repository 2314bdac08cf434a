"""The runner: the only code in tileproof that starts a process (the only importer of ``subprocess``).

``process`` starts one contained process (own session, deadline, capped streams, the whole
tree killed at its end, a subreaper, signal handling); ``step`` keeps one as redacted
evidence; ``environment`` is the one allowlisted child environment; ``capture`` the one
session capture (git, pip freeze, nvidia-smi, tool versions); ``execute`` runs a lesson
program; ``builds`` runs the build plan under build/'s lock; ``locate`` finds (or builds)
the attested binary. Layers below (records, toolchain) start nothing: where they need a
process they take a callable from here (``toolchain.find.VersionText``,
``toolchain.build.StepRunner``).
"""
