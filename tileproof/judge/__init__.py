"""Judges: pure decisions over records (publish decision, staleness, audit rules, claim verdicts)."""
