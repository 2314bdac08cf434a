"""The packages ``gather`` carries to the node (``manifest.py`` lists them).

Which packages (``gather``): the six named in ``PACKAGES`` and, following their ``Depends:`` and
``Pre-Depends:`` one step at a time, every package that ships a shared library. Debian writes a
binary package's library dependencies from the ``NEEDED`` entries of its ELF files
(``dpkg-shlibdeps``), so that walk is the packages' library closure. Two kinds of dependency
are not carried: ``libc6`` (glibc: the node's own dynamic loader must load its own libc; glibc
keeps old symbol versions, so binaries built against Debian's 2.36 run on a newer glibc, and
``up`` checks the node's glibc against the highest ``libc6 (>= X)`` any carried package asks),
and packages with no shared library (adduser, ucf, debconf, readline-common...: their files
serve maintainer scripts and configuration, and ``dpkg-deb -x`` runs no maintainer script).
``gather`` then unpacks what it kept and checks with ``ldd`` that every ``NEEDED`` library
resolves inside the prefix or is one of libc6's; anything else fails the gather.
"""

from __future__ import annotations

import contextlib
import platform
import re
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from tileproof.records.store import sha256_file

from .common import NodeError, last_line, run
from .manifest import DEBS, GLIBC, MANIFEST, Carried, Left, Manifest
from .prefix import check_libraries, unpack

PACKAGES = ("slurmctld", "slurmd", "slurm-client", "slurm-wlm-basic-plugins", "munge", "libmunge2")
"""What is asked for; their libraries come with them (see the module's docstring)."""


_SHARED_LIB = re.compile(r"^\./(usr/)?lib/[a-z0-9_]+-linux-gnu[a-z0-9_]*/[^/]+\.so(\.[0-9]+)*$")
"""A shared library in a package's file list: directly in a multiarch library folder."""


_DEP = re.compile(r"^\s*([a-z0-9][a-z0-9+.-]*)(?::[a-z0-9]+)?\s*(?:\(\s*(<<|<=|=|>=|>>)\s*([^)\s]+)\s*\))?\s*$")


_OPS = {"<<": "lt", "<=": "le", "=": "eq", ">=": "ge", ">>": "gt"}


@dataclass(frozen=True)
class Dependency:
    """One alternative of a ``Depends:`` entry: a name and an optional version constraint."""

    name: str
    op: str | None = None
    version: str | None = None


def parse_depends(text: str) -> list[list[Dependency]]:
    """A ``Depends:`` field -> its entries, each a list of alternatives (``a | b``)."""
    entries = []
    for entry in filter(None, (e.strip() for e in text.split(","))):
        alternatives = []
        for alt in entry.split("|"):
            m = _DEP.match(alt)
            if m is None:
                raise NodeError(f"Depends entry {entry!r}: not 'name (op version)'")
            alternatives.append(Dependency(m.group(1), m.group(2), m.group(3)))
        entries.append(alternatives)
    return entries


def listed_libraries(file_list: str) -> list[str]:
    """The shared libraries (files and links) in a multiarch library folder of ``dpkg-deb -c``'s listing."""
    paths = [fields[5] for fields in (line.split() for line in file_list.splitlines()) if len(fields) >= 6]
    return [p for p in paths if _SHARED_LIB.match(p)]


def version_satisfies(have: str, dep: Dependency) -> bool:
    if dep.op is None or dep.version is None:
        return True
    return run(["dpkg", "--compare-versions", have, _OPS[dep.op], dep.version]).returncode == 0


def candidates(names: Iterable[str]) -> dict[str, str]:
    """Name -> the version ``apt-get download`` would fetch, for each name apt has a candidate of (a purely
    virtual or unknown package has none). One ``apt-cache policy`` call for all (each call reads apt's cache)."""
    names = sorted(set(names))
    if not names:
        return {}
    out: dict[str, str] = {}
    current = None
    for line in run(["apt-cache", "policy", *names]).stdout.splitlines():
        if line and not line[0].isspace() and line.endswith(":"):
            current = line[:-1].split(":")[0]
        elif current and (m := re.match(r"^\s+Candidate:\s*(\S+)", line)) and m.group(1) != "(none)":
            out[current] = m.group(1)
    return out


def download(names: list[str], into: Path) -> dict[str, Path]:
    """``apt-get download`` of every name at once; name -> its .deb."""
    proc = run(["apt-get", "download", *names], cwd=into, timeout=600)
    got = {name: sorted(into.glob(f"{name}_*.deb")) for name in names}
    missing = [name for name, debs in got.items() if not debs]
    if proc.returncode != 0 or missing:
        raise NodeError(f"apt-get download {' '.join(missing or names)}: {last_line(proc)} "
                        "(fix: apt-get update, check the network)")
    return {name: debs[-1] for name, debs in got.items()}


def deb_field(deb: Path, name: str) -> str:
    return run(["dpkg-deb", "-f", str(deb), name]).stdout.strip()


def glibc_version_asked(entries: list[list[Dependency]]) -> str | None:
    """``libc6 (>= X)`` of one package's dependencies, if it names one."""
    return next((d.version for alts in entries for d in alts if d.name == GLIBC and d.op == ">=" and d.version),
                None)


def highest(versions: Iterable[str]) -> str:
    best = "0"
    for v in versions:
        if run(["dpkg", "--compare-versions", v, "gt", best]).returncode == 0:
            best = v
    return best


def gather(out: Path) -> Manifest:
    """Download the packages and their library closure into ``out/debs``; check it; write the manifest."""
    for tool in ("apt-get", "apt-cache", "dpkg-deb", "dpkg", "ldd"):
        if shutil.which(tool) is None:
            raise NodeError(f"{tool}: not found (fix: gather on a Debian or Ubuntu machine with apt)")
    debs, probe = out / DEBS, out / ".probe"
    if debs.exists() and any(debs.iterdir()):
        raise NodeError(f"{debs}: not empty (fix: gather into a new folder)")
    shutil.rmtree(probe, ignore_errors=True)
    debs.mkdir(parents=True, exist_ok=True)
    probe.mkdir()
    carried: dict[str, Carried] = {}
    left: dict[str, Left] = {}
    asked: list[str] = []
    level: list[tuple[str, str]] = [(name, "asked for") for name in PACKAGES]
    while level:  # one dependency step at a time: one download and one apt-cache call per step
        fetched = download([name for name, _ in level], probe)
        kept: list[tuple[str, list[list[Dependency]]]] = []
        for name, why in level:
            deb = fetched[name]
            entries = parse_depends(", ".join(filter(None, (deb_field(deb, "Pre-Depends"),
                                                            deb_field(deb, "Depends")))))
            if why != "asked for" and not listed_libraries(run(["dpkg-deb", "-c", str(deb)]).stdout):
                left[name] = Left(name=name, why=f"no shared library ({why}; its files serve maintainer scripts "
                                                 "and configuration, and dpkg-deb -x runs no maintainer script)")
                deb.unlink()
                continue
            carried[name] = Carried(name=name, version=deb_field(deb, "Version"), file=deb.name,
                                    sha256=sha256_file(deb), why=why)
            deb.rename(debs / deb.name)
            asked += [v for v in [glibc_version_asked(entries)] if v]
            kept.append((name, entries))
        known = candidates(d.name for _, entries in kept for alts in entries for d in alts if d.name != GLIBC)
        level = []
        for name, entries in kept:
            for alternatives in entries:
                chosen = _choose(alternatives, name, known)
                if chosen in carried or chosen in left or any(chosen == n for n, _ in level):
                    continue
                if chosen == GLIBC:
                    left[GLIBC] = Left(name=GLIBC, why="glibc: the node's own (its dynamic loader loads its own "
                                                       "libc), at least the version the manifest names")
                    continue
                level.append((chosen, f"depended on by {name}"))
    glibc_deb = download([GLIBC], probe)[GLIBC]
    glibc_libraries = sorted({Path(p).name for p in listed_libraries(run(["dpkg-deb", "-c", str(glibc_deb)]).stdout)})
    shutil.rmtree(probe)
    manifest = Manifest(manifest_version=1, gathered_on=_os_name(), architecture=run(
        ["dpkg", "--print-architecture"]).stdout.strip(), packages=list(carried.values()),
        left_out=sorted(left.values(), key=lambda x: x.name), glibc_at_least=highest(asked),
        glibc_libraries=glibc_libraries)
    check = out / ".check"
    shutil.rmtree(check, ignore_errors=True)
    try:
        prefix = unpack(out, manifest, check)
        report = check_libraries(prefix, set(glibc_libraries))
        problems = report.missing_lines() + report.outside_lines()
        if problems:
            raise NodeError(f"gather: the packages do not carry every library: {problems[0]}"
                            + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""))
    finally:
        shutil.rmtree(check, ignore_errors=True)
    (out / MANIFEST).write_text(manifest.model_dump_json(indent=2) + "\n")
    return manifest


def _choose(alternatives: list[Dependency], of: str, known: dict[str, str]) -> str:
    """The first alternative apt can download at a version that satisfies it (``known``: the candidates);
    libc6 is chosen as is."""
    for dep in alternatives:
        if dep.name == GLIBC:
            return GLIBC
        have = known.get(dep.name)
        if have is not None and version_satisfies(have, dep):
            return dep.name
    names = " | ".join(d.name + (f" ({d.op} {d.version})" if d.op else "") for d in alternatives)
    raise NodeError(f"{of} depends on {names}: apt has no such package at such a version "
                    "(fix: apt-get update, or gather on the release the packages are from)")


def _os_name() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip().strip('"')
    return platform.platform()
