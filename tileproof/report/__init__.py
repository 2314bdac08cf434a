"""The audit report (Markdown and HTML)."""
