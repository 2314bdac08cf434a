"""One section of the audit report: its anchor, its title, its view model and the two renderers of that view.

``Section.view`` builds the section's view model from the page's ``Context`` (None: nothing to show, and no
entry in the table of contents); ``markdown`` and ``html`` each render that one view (the body under the
section's heading, which ``report.render`` writes with the anchor). Both reports walk the same list of
sections (``report.render.SECTIONS``), so they say the same things in the same order, and the table of
contents is that list.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from tileproof.report.page import Context, Links

V = TypeVar("V")


@dataclass(frozen=True)
class Section(Generic[V]):
    anchor: str
    """The heading's id in both reports (``#anchor`` links inside the page)."""
    title: str
    view: Callable[[Context], V | None]
    markdown: Callable[[V, Links], list[str]]
    html: Callable[[V, Links], list[str]]


AnySection = Section[Any]
