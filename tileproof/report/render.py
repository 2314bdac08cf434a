"""Rendering an ``AuditResult`` as ``evidence/AUDIT.md`` and one self-contained HTML page.

Both walk the same list of sections (``SECTIONS``, each a ``report.section.Section``: one view model,
rendered by a Markdown and an HTML function), so they say the same things in the same order: first the
header (which commit was audited, clean or dirty, when, against which trust root, where links point:
``report.head``), one summary table (lessons x state x what to do) and the table of contents; then the
findings with each root cause leading what follows from it (``report.causes``), notices, the trust root,
each lesson with the gate's decision per row (``report.lessons_render``), the claims matrix, the programs
per cuda-tile release, the bench charts, performance claims and history, the run grid and the
environments (``report.grid_render``) and the rules. In-page links are ``#anchors``; file links are
relative to the page's folder or absolute under a repository URL at the audited commit
(``report.page.Links``). The HTML has inline CSS (``report.style``), no script and nothing fetched;
every value is escaped. Nothing here reads a file: the audit already did.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tileproof.judge.audit.result import AuditResult
from tileproof.report import (
    bench_render,
    claims_render,
    findings_render,
    grid_render,
    head,
    history_render,
    lessons_render,
    releases_render,
)
from tileproof.report.markup import e, md
from tileproof.report.page import Audited, Context, Links
from tileproof.report.section import AnySection, Section
from tileproof.report.style import CSS

SUMMARY = Section("summary", "Summary", head.summary, head.summary_markdown, head.summary_html)
SECTIONS: tuple[AnySection, ...] = (
    SUMMARY,
    Section("findings", "Findings", findings_render.findings_view, findings_render.findings_markdown,
            findings_render.findings_html),
    Section("notices", "Notices", findings_render.notices_view, findings_render.notices_markdown,
            findings_render.notices_html),
    Section("trust", "Trust root", findings_render.trust_view, findings_render.trust_markdown,
            findings_render.trust_html),
    Section("lessons", "Lessons", lessons_render.view, lessons_render.markdown, lessons_render.html),
    Section("claims", "Claims", claims_render.view, claims_render.markdown, claims_render.html),
    Section("cuda-tile-releases", releases_render.TITLE, releases_render.view, releases_render.markdown,
            releases_render.html),
    Section("bench", "Bench", bench_render.views, bench_render.markdown, bench_render.html),
    Section("perf-claims", "Performance claims", bench_render.perf_view, bench_render.perf_markdown,
            bench_render.perf_html),
    Section("history", "Bench history", bench_render.history_view, bench_render.history_markdown,
            bench_render.history_html),
    Section("steps", "Steps in the bench history", history_render.view, history_render.markdown,
            history_render.html),
    Section("grid", grid_render.GRID_TITLE, grid_render.view, grid_render.grid_markdown, grid_render.grid_html),
    Section("environments", "Environments", grid_render.view, grid_render.environments_markdown,
            grid_render.environments_html),
    Section("rules", "Rules", findings_render.rules_view, findings_render.rules_markdown, findings_render.rules_html),
)
"""Every section of both reports, in order; the table of contents is this list (those with a view)."""

@dataclass(frozen=True)
class Format:
    """How one report writes the parts around the sections' bodies."""

    header: Callable[[head.Header, Links], list[str]]
    heading: Callable[[AnySection], list[str]]
    """The section's heading, with its anchor."""
    body: Callable[[AnySection, Any, Links], list[str]]
    """The section's renderer of its view."""
    toc: Callable[[list[tuple[str, str]]], list[str]]


MARKDOWN = Format(head.header_markdown,
                  lambda s: [f'<a id="{s.anchor}"></a>', f"## {md(s.title)}", ""],
                  lambda s, v, links: s.markdown(v, links), head.toc_markdown)
HTML = Format(head.header_html, lambda s: [f'<h2 id="{s.anchor}">{e(s.title)}</h2>'],
              lambda s, v, links: s.html(v, links), head.toc_html)


def context(result: AuditResult, base: Path | Links, audited: Audited | None = None) -> Context:
    """The page's context: ``base`` the folder it is written to (relative links) or its ``Links``."""
    links = base if isinstance(base, Links) else Links(result.root, Path(base))
    return Context(result, links, audited)


def _sections(ctx: Context) -> list[tuple[AnySection, Any]]:
    """Each section with its view, those with nothing to show left out."""
    return [(section, v) for section in SECTIONS if (v := section.view(ctx)) is not None]


def _body(ctx: Context, fmt: Format) -> list[str]:
    """The header, then each section (the first, the summary, followed by the contents)."""
    shown = _sections(ctx)
    entries = [(s.anchor, s.title) for s, _ in shown]
    out = fmt.header(head.header(ctx), ctx.links)
    for i, (s, v) in enumerate(shown):
        out += fmt.heading(s) + fmt.body(s, v, ctx.links) + (fmt.toc(entries) if i == 0 else [])
    return out


def render_markdown(result: AuditResult, base: Path | Links, audited: Audited | None = None) -> str:
    return "\n".join(_body(context(result, base, audited), MARKDOWN)).rstrip("\n") + "\n"


def render_html(result: AuditResult, base: Path | Links, audited: Audited | None = None) -> str:
    page = ['<!DOCTYPE html>', '<html lang="en"><head><meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            "<title>tileproof audit</title>", f"<style>{CSS}</style></head><body>",
            *_body(context(result, base, audited), HTML), "</body></html>"]
    return "\n".join(page) + "\n"
