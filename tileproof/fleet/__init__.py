"""Spreading a course's evidence over many GPU hosts through an existing engine.

``records.cluster`` reads the committed description of a cluster (GPU kinds → Slurm
``--constraint``/``--gres``); ``plan`` turns lessons x kinds into a typed job
plan; ``sbatch`` renders the job scripts; ``merge`` brings every host's records
into one tree without ever overwriting a file; ``matrix`` turns what the hosts
left into the lesson x GPU-kind matrix (a missing record is a gap, never a pass);
``slurm`` submits and waits through ``tileproof.runner.slurm``; ``devices``
plans a ``--devices all`` fan-out on one multi-GPU host. tileproof never
schedules anything itself: Slurm or the CI service does.
"""
