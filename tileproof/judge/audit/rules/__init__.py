"""One module per seam of the audit's rules; every module here is loaded by ``registry.load``."""
