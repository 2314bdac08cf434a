"""The audit's rules as pure functions of data already read (``rules/``), their table (``audit_rules``), results.

The files are read by ``gather.audit`` (which also runs the rules) and the
result is rendered by ``report.render``; nothing here opens a file.
"""
