"""claims: the shipped documents' claims, their probes and claims records."""
