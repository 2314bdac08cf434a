"""Records: the on-disk models, the store, lessons, tolerances and transcript parsers (bottom layer)."""
