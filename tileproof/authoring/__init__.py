"""Writing lessons: the lesson check (``check.py``) and the scaffold for a new lesson (``scaffold.py``)."""
