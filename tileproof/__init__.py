"""tileproof: build and run cuTile lesson programs, and keep the evidence."""

__version__ = "0.1.0"
