"""Sphinx settings for tileproof's documentation site: the Markdown pages of docs/, read by MyST.

Built by ``nox -s docs`` (and beside pytest in ``nox -s tests``) with warnings as errors.
"""

project = "tileproof"
extensions = ["myst_parser"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns: list[str] = []
myst_heading_anchors = 3
"""``page.md#a-heading`` links resolve to the page's headings down to ``###`` (GitHub's slugs)."""
html_theme = "furo"
html_title = "tileproof"
html_show_sourcelink = False
