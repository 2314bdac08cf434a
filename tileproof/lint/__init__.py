"""lint-kernels: static checks for known cuTile mistakes."""
