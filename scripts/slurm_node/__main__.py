"""``python scripts/slurm_node gather|up|down ...``: the folder run as a program (the package's docstring)."""

import sys
from pathlib import Path

if not __package__:  # run as a folder: its parent (scripts/) holds the package
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from slurm_node.cli import main  # noqa: E402

sys.exit(main())
