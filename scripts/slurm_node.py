"""A single-node Slurm cluster (munged, slurmctld, slurmd) on a host that has no network.

Two halves (docs/fleet-slurm-gpu.md is the walk-through):

  gather --out DIR    on a Debian/Ubuntu machine with apt and the registry: Debian's Slurm and munge
                      packages and the shared libraries they need, as .debs plus DIR/manifest.json
  up --debs DIR --state DIR [--cluster-file FILE]
                      on the node: unpack them into DIR's prefix (``dpkg-deb -x``), check that every
                      binary and plugin finds its libraries, write slurm.conf and gres.conf (the GPUs
                      nvidia-smi lists), start munged, slurmctld and slurmd, wait for the node, and
                      write the Slurm client commands and a tileproof cluster file for this node
  down --state DIR    stop the daemons ``up`` started (by their process ids)

``up --prefix /`` uses Slurm and munge as installed from the distribution's packages instead.

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

Where the libraries go on the node, and where they do not: the daemons get the prefix's
library folders on ``LD_LIBRARY_PATH`` (slurmd passes its environment to slurmstepd, which
needs them too). A job's environment is the one its submitter sent with the job (sbatch's
``--export=ALL``) plus Slurm's ``SLURM_*`` and GPU variables, never the daemons' own; so the
client commands (``STATE/bin/sbatch``...) must not carry ``LD_LIBRARY_PATH`` either: each is a
two-line shell script that starts the real binary through the dynamic loader with
``--library-path`` (an argument to ``ld.so``, which no child inherits), so a job's Python and
cupy never load Debian's libgcrypt, libstdc++ or libz. tests/test_fleet_slurm.py checks it on
a running cluster.

GPUs: ``up`` asks ``nvidia-smi --query-gpu`` (tileproof's own query and parser) for the GPUs, and
writes ``gres.conf``: ``AutoDetect=nvml`` where Slurm's gpu_nvml plugin is in PluginDir, else
one ``Name=gpu File=/dev/nvidiaN`` line per GPU (Debian's build has no NVML plugin). The node's
features name each GPU's model (``NVIDIA H200`` -> ``h200``) and its target (compute capability
9.0 -> ``sm_90``), read from that query, never typed in. Every step prints one line; a step that
fails prints one line saying what and how to fix it, and exits 1.

cgroups: slurmd loads a cgroup plugin at every start, whatever else slurm.conf says, and stops when
its init fails; Slurm's default on a cgroup2 host asks systemd over D-Bus for a scope, which a host
without systemd cannot give (the "cgroups" section below has the sources). The node needs no cgroup:
its slurm.conf names no plugin that asks for one (``NO_CGROUP_USERS``). ``up`` reads the host's
cgroups (the mount at /sys/fs/cgroup, whether it is writable, systemd and D-Bus), rules out each
setup of ``CGROUP_SETUPS`` that cannot work there with one line saying why, and tries the others in
order (``slurmd -G``, then the daemons), one line for each that slurmd refuses, with the cause from
its log; ``--cgroup`` names the setups to try instead.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import platform
import random
import re
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import yaml

from tileproof.records.capability import sm_of
from tileproof.records.cluster import Cluster, GpuKind, load_cluster
from tileproof.records.models import Model
from tileproof.records.parsers import parse_gpu_query
from tileproof.records.store import sha256_file
from tileproof.runner.capture import GPU_QUERY_ARGV

PACKAGES = ("slurmctld", "slurmd", "slurm-client", "slurm-wlm-basic-plugins", "munge", "libmunge2")
"""What is asked for; their libraries come with them (see the module's docstring)."""
GLIBC = "libc6"
MANIFEST = "manifest.json"
DEBS = "debs"
CLIENTS = ("sbatch", "scontrol", "sinfo", "squeue", "sacct", "scancel", "srun")
"""The Slurm commands ``up`` writes into STATE/bin (tileproof uses sbatch, scontrol and sacct)."""
DAEMONS = ("munged", "slurmctld", "slurmd")
NODE_FILE = "node.json"
VENDOR_WORDS = {"nvidia", "tesla", "geforce", "quadro"}
"""Words a GPU model feature leaves out: ``NVIDIA GeForce RTX 4090`` -> ``rtx_4090``."""
WAIT_S = 60.0
"""How long ``up`` waits for a daemon's socket or the node to come up."""

_SHARED_LIB = re.compile(r"^\./(usr/)?lib/[a-z0-9_]+-linux-gnu[a-z0-9_]*/[^/]+\.so(\.[0-9]+)*$")
"""A shared library in a package's file list: directly in a multiarch library folder."""
_DEP = re.compile(r"^\s*([a-z0-9][a-z0-9+.-]*)(?::[a-z0-9]+)?\s*(?:\(\s*(<<|<=|=|>=|>>)\s*([^)\s]+)\s*\))?\s*$")
_OPS = {"<<": "lt", "<=": "le", "=": "eq", ">=": "ge", ">>": "gt"}


class NodeError(Exception):
    """A step that failed: ``str()`` is the one line printed (what, and the fix)."""


def say(line: str) -> None:
    print(f"slurm-node: {line}", flush=True)


# --- the manifest ------------------------------------------------------------------------------


class Carried(Model):
    """One package ``gather`` kept."""

    name: str
    version: str
    file: str
    """The .deb's name under ``debs/``."""
    sha256: str
    why: str
    """``asked for``, or which kept package depends on it."""


class Left(Model):
    """One dependency ``gather`` did not carry, and why."""

    name: str
    why: str


class Manifest(Model):
    """``DIR/manifest.json``, written by ``gather``, read by ``up``."""

    manifest_version: Literal[1]
    gathered_on: str
    """The distribution the packages are from (``/etc/os-release`` PRETTY_NAME)."""
    architecture: str
    """``dpkg --print-architecture`` of the packages, e.g. ``amd64``."""
    packages: list[Carried]
    left_out: list[Left]
    glibc_at_least: str
    """The highest ``libc6 (>= X)`` any carried package asks: the node's glibc must be at least this."""
    glibc_libraries: list[str]
    """The shared objects libc6 ships (``libc.so.6``, ``libm.so.6``...): the node's glibc provides them."""


def read_manifest(folder: Path) -> Manifest:
    path = folder / MANIFEST
    try:
        return Manifest.model_validate_json(path.read_bytes())
    except FileNotFoundError:
        raise NodeError(f"{path}: missing (fix: gather the packages first: python scripts/slurm_node.py gather "
                        f"--out {folder})") from None
    except ValueError as e:
        raise NodeError(f"{path}: not a manifest this script reads ({str(e).splitlines()[0]}) "
                        "(fix: gather again with this script)") from None


# --- processes ---------------------------------------------------------------------------------


def run(argv: list[str], *, env: dict[str, str] | None = None, cwd: Path | None = None,
        timeout: float = 120) -> subprocess.CompletedProcess:
    """One command to its end (text out); a missing program is a NodeError naming it."""
    try:
        return subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        raise NodeError(f"{argv[0]}: not found (fix: install it, or put it on PATH)") from None
    except subprocess.TimeoutExpired:
        raise NodeError(f"{' '.join(argv[:3])}: no answer after {timeout:.0f} s") from None


def last_line(proc: subprocess.CompletedProcess) -> str:
    lines = [ln.strip() for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip()]
    return lines[-1] if lines else f"exit {proc.returncode}"


# --- gather ------------------------------------------------------------------------------------


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


# --- the prefix ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Prefix:
    """Where Slurm and munge are: unpacked packages (``STATE/prefix``) or the system (``/``)."""

    root: Path

    @property
    def triplet(self) -> str:
        found = sorted(p.parent.name for p in self.root.glob("usr/lib/*/slurm-wlm"))
        if not found:
            raise NodeError(f"{self.root}: no usr/lib/<arch>/slurm-wlm (fix: unpack slurm-wlm-basic-plugins "
                            "there, or install it)")
        return found[0]

    @property
    def plugin_dir(self) -> Path:
        return self.root / "usr" / "lib" / self.triplet / "slurm-wlm"

    @property
    def library_path(self) -> list[Path]:
        """Where the prefix's shared objects are: libslurmfull's folder first (the binaries' RUNPATH names
        it at /usr), then the multiarch folders the library packages fill."""
        t = self.triplet
        return [self.plugin_dir, self.root / "usr" / "lib" / t, self.root / "lib" / t]

    def program(self, folder: str, name: str) -> Path:
        """``usr/sbin/slurmd`` and the like (``unpack`` links Debian's ``slurmd-wlm`` there)."""
        path = self.root / "usr" / folder / name
        if not path.is_file():
            raise NodeError(f"{path}: missing (fix: unpack or install the package that has it)")
        return path

    def daemon_env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """The daemons' environment: the caller's plus the prefix's libraries (see the module's docstring)."""
        env = dict(os.environ if base is None else base)
        env["LD_LIBRARY_PATH"] = os.pathsep.join(
            [*(str(p) for p in self.library_path), *filter(None, [env.get("LD_LIBRARY_PATH")])])
        return env


def unpack(folder: Path, manifest: Manifest, into: Path) -> Prefix:
    """Every carried .deb, digest checked, unpacked into ``into`` (``dpkg-deb -x``; in Python without it)."""
    into.mkdir(parents=True, exist_ok=True)
    for pkg in manifest.packages:
        deb = folder / DEBS / pkg.file
        if not deb.is_file():
            raise NodeError(f"{deb}: missing (fix: copy the whole gathered folder, {MANIFEST} and {DEBS}/)")
        if sha256_file(deb) != pkg.sha256:
            raise NodeError(f"{deb}: sha256 differs from {MANIFEST}'s (fix: gather again; the file was changed)")
        if shutil.which("dpkg-deb"):
            proc = run(["dpkg-deb", "-x", str(deb), str(into)])
            if proc.returncode != 0:
                raise NodeError(f"dpkg-deb -x {deb.name}: {last_line(proc)}")
        else:
            extract_deb(deb, into)
    link_alternatives(into)
    return Prefix(into)


def link_alternatives(prefix: Path) -> None:
    """``usr/sbin/slurmd -> slurmd-wlm`` and the like, as Debian's maintainer scripts link them
    (update-alternatives). The names matter: Slurm reads a node's GRES from slurm.conf only in a
    process whose program name is ``slurmctld`` or ``slurmd``."""
    for wlm in sorted((prefix / "usr" / "sbin").glob("*-wlm")):
        link = wlm.with_name(wlm.name.removesuffix("-wlm"))
        if not link.exists():
            link.symlink_to(wlm.name)


def extract_deb(deb: Path, into: Path) -> None:
    """What ``dpkg-deb -x`` does, for a host without dpkg: the ``data.tar.*`` member of the ar archive."""
    data = deb.read_bytes()
    if not data.startswith(b"!<arch>\n"):
        raise NodeError(f"{deb}: not a Debian package (no ar header)")
    pos = 8
    while pos + 60 <= len(data):
        header = data[pos:pos + 60]
        name, size = header[:16].decode().strip().rstrip("/"), int(header[48:58].decode().strip())
        body = data[pos + 60:pos + 60 + size]
        if name.startswith("data.tar"):
            try:
                with tarfile.open(fileobj=io.BytesIO(body), mode="r:*") as tar:
                    tar.extractall(into, filter="tar")
            except tarfile.TarError as e:
                raise NodeError(f"{deb}: {name}: {e} (fix: unpack on a host with dpkg-deb)") from None
            return
        pos += 60 + size + size % 2
    raise NodeError(f"{deb}: no data.tar member")


# --- libraries -----------------------------------------------------------------------------------


@dataclass
class LibraryReport:
    """What ``ldd`` said about every ELF file of the prefix."""

    missing: dict[str, list[str]] = field(default_factory=dict)
    """Library -> the files that need it and did not find it."""
    outside: dict[str, tuple[str, list[str]]] = field(default_factory=dict)
    """Library that is not glibc's -> (where it resolved, outside the prefix; the files that need it)."""
    errors: list[str] = field(default_factory=list)
    """Other ldd complaints (e.g. a glibc symbol version the host lacks), one line each."""
    loader: str | None = None
    """The dynamic loader ldd named (``/lib64/ld-linux-x86-64.so.2``)."""
    checked: int = 0

    def missing_lines(self) -> list[str]:
        return [f"{lib}: not found (needed by {_some(files)})" for lib, files in sorted(self.missing.items())]

    def outside_lines(self) -> list[str]:
        return [f"{lib}: found only at {path}, outside the prefix (needed by {_some(files)})"
                for lib, (path, files) in sorted(self.outside.items())]


def _some(files: list[str]) -> str:
    return files[0] + (f" and {len(files) - 1} more" if len(files) > 1 else "")


def elf_files(prefix: Prefix) -> list[Path]:
    """Every binary, library and plugin an unpacked prefix holds (all of it is Slurm's, munge's and what they
    need); in the system's prefix, only Slurm's and munge's programs and Slurm's plugins."""
    if prefix.root == Path("/"):
        programs = [prefix.program("sbin", n) for n in (*DAEMONS, "slurmstepd")]
        programs += [prefix.program("bin", n) for n in CLIENTS]
        return [p.resolve() for p in programs] + _elves([prefix.plugin_dir])
    return _elves([prefix.root / "usr" / "sbin", prefix.root / "usr" / "bin", *prefix.library_path])


def _elves(folders: list[Path]) -> list[Path]:
    found = []
    for folder in folders:
        if not folder.is_dir():
            continue
        for path in sorted(folder.iterdir()):
            if path.is_file() and not path.is_symlink() and _is_elf(path):
                found.append(path)
    return found


def _is_elf(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"


def check_libraries(prefix: Prefix, glibc: set[str], files: list[Path] | None = None) -> LibraryReport:
    """``ldd`` every ELF file with the prefix's libraries first: what is missing, what comes from outside."""
    env = prefix.daemon_env({"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C"})
    files = elf_files(prefix) if files is None else files
    report = LibraryReport(checked=len(files))
    inside = [str(p.resolve()) for p in prefix.library_path]
    with ThreadPoolExecutor(max_workers=min(16, os.cpu_count() or 1)) as pool:
        answers = list(pool.map(lambda p: run(["ldd", str(p)], env=env), files))
    for path, proc in zip(files, answers, strict=True):
        rel = path.relative_to(prefix.root).as_posix()
        for line in (proc.stdout + proc.stderr).splitlines():
            line = line.strip()
            if "=>" in line:
                lib, where = (s.strip() for s in line.split("=>", 1))
                if where.startswith("not found"):
                    report.missing.setdefault(lib, []).append(rel)
                    continue
                resolved = where.split(" (")[0]
                real = str(Path(resolved).resolve()) if resolved else ""
                if lib not in glibc and not any(real.startswith(d + "/") for d in inside):
                    report.outside.setdefault(lib, (resolved, []))[1].append(rel)
            elif line.startswith("/") and "ld-linux" in line:
                report.loader = line.split(" (")[0]
            elif "not found" in line or "error" in line.lower():
                report.errors.append(f"{rel}: {line}")
    return report


def glibc_here() -> str | None:
    name, version = platform.libc_ver()
    return version if name == "glibc" and version else None


def version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", text.split("-")[0])[:3])


# --- GPUs, features, gres.conf -------------------------------------------------------------------


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    compute_capability: str


def gpus_of(query_csv: str) -> list[Gpu]:
    """The GPUs of an ``nvidia-smi --query-gpu`` transcript (tileproof's parser), in index order."""
    rows = parse_gpu_query(query_csv)
    bad = [r for r in rows if r["index"] is None or not r["compute_capability"]]
    if bad:
        raise NodeError(f"nvidia-smi --query-gpu: a row without index or compute_cap ({bad[0]}) "
                        "(fix: check the driver with nvidia-smi)")
    return sorted((Gpu(r["index"], r["name"], r["compute_capability"]) for r in rows), key=lambda g: g.index)


def model_feature(name: str) -> str:
    """``NVIDIA H200`` -> ``h200``; ``NVIDIA H100 80GB HBM3`` -> ``h100_80gb_hbm3``."""
    words = [w for w in re.split(r"[^A-Za-z0-9]+", name) if w and w.lower() not in VENDOR_WORDS]
    if not words:
        raise NodeError(f"nvidia-smi: GPU name {name!r} leaves no model word (fix: report the name)")
    return "_".join(words).lower()


def features(gpus: list[Gpu], extra: Iterable[str] = ()) -> list[str]:
    """Node features: each GPU's model and target (``h200``, ``sm_90``), then ``extra``, once each."""
    out: list[str] = []
    for gpu in gpus:
        out += [model_feature(gpu.name), sm_of(gpu.compute_capability)]
    out += list(extra)
    return list(dict.fromkeys(out))


def has_nvml(plugin_dir: Path) -> bool:
    return (plugin_dir / "gpu_nvml.so").is_file()


def gres_conf(gpus: list[Gpu], plugin_dir: Path, device_dir: Path) -> str:
    """gres.conf for this node's GPUs: NVML autodetection where Slurm has the plugin, else one File each."""
    lines = ["# Generated by scripts/slurm_node.py from nvidia-smi --query-gpu."]
    if has_nvml(plugin_dir):
        lines.append("AutoDetect=nvml")
    else:
        lines.append("# Slurm here has no gpu_nvml plugin: each GPU's device file, in nvidia-smi's index order.")
        lines += [f"Name=gpu File={device_dir / f'nvidia{g.index}'}" for g in gpus]
    return "\n".join(lines) + "\n"


def check_devices(gpus: list[Gpu], device_dir: Path) -> None:
    """Each GPU's ``nvidiaN`` is a character device (slurmd refuses anything else in gres.conf)."""
    for gpu in gpus:
        path = device_dir / f"nvidia{gpu.index}"
        try:
            is_char = stat.S_ISCHR(path.stat().st_mode)
        except OSError:
            is_char = False
        if not is_char:
            raise NodeError(f"{path}: not a character device, for GPU {gpu.index} ({gpu.name}) (fix: load the "
                            "NVIDIA driver; nvidia-smi creates the device files)")


def cluster_kinds(gpus: list[Gpu]) -> dict[str, GpuKind]:
    """One tileproof kind per GPU model of the node (constraint: its feature; one GPU per task), or ``cpu``."""
    if not gpus:
        return {"cpu": GpuKind()}
    kinds: dict[str, GpuKind] = {}
    for gpu in gpus:
        kinds.setdefault(model_feature(gpu.name), GpuKind(constraint=model_feature(gpu.name), gres="gpu:1",
                                                          compute_capability=gpu.compute_capability))
    return kinds


# --- cgroups -------------------------------------------------------------------------------------
#
# slurmd loads a cgroup plugin at every start, whatever else slurm.conf says (Slurm 22.05: _slurmd_init calls
# cgroup_g_init, and slurmd stops when the plugin's init() fails), and so does ``slurmd -G``. Which plugin is
# CgroupPlugin in cgroup.conf (beside slurm.conf), by default ``autodetect``: cgroup/v2 where /sys/fs/cgroup is
# cgroup2. That plugin's init() asks systemd over D-Bus for a scope for the slurmstepds, and fails on a host
# without systemd (the H200's slurmd.log: "cannot connect to dbus system daemon ... cannot initialize cgroup
# directory for stepds"); with IgnoreSystemd=yes it makes the folders itself, which needs a writable cgroup2 tree.
# cgroup/v1's init() touches no file at all (it fills in-memory lists): cgroups are asked for only by
# proctrack/cgroup, task/cgroup, jobacct_gather/cgroup and CoreSpec/MemSpec, and this node's slurm.conf names none
# of them (NO_CGROUP_USERS). From Slurm 24.05, CgroupPlugin=disabled says that outright.

NO_CGROUP_USERS = ("ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "JobAcctGatherType=jobacct_gather/none")
"""The slurm.conf plugins that use no cgroup (with no CoreSpecCount or MemSpecLimit): tasks are tracked through
/proc, confined by nothing, and accounted by nobody, so the cgroup plugin slurmd loads is never asked for a
cgroup. tileproof contains its own programs (runner/process.py) and Slurm's GRES sets the GPU a task sees."""
CGROUP_MOUNT = Path("/sys/fs/cgroup")
"""Where Slurm looks for cgroups (CgroupMountpoint's default; only meant to change for Slurm's own tests)."""
SYSTEMD_RUNNING = Path("/run/systemd/system")
"""The folder systemd makes when it is the init system (what ``sd_booted()`` tests)."""
DBUS_SOCKET = Path("/run/dbus/system_bus_socket")
"""The system bus, through which cgroup/v2 asks systemd for a scope."""
CGROUP_FILE = "host-cgroups.txt"
"""STATE/host-cgroups.txt: what ``up`` read about this host's cgroups (the mounts, /proc/self/cgroup, the root's
controllers), kept for whoever reads a failed ``up``."""


@dataclass(frozen=True)
class HostCgroups:
    """This host's cgroups as Slurm's cgroup plugins meet them (``host_cgroups``; judged by ``cgroup_plan``)."""

    mounted: str | None
    """The file system type at /sys/fs/cgroup: ``cgroup2`` (unified), ``tmpfs`` (cgroup v1 hierarchies below it), or
    None (nothing mounted)."""
    systemd_hierarchy: str | None
    """Below a tmpfs: the type at /sys/fs/cgroup/systemd (``cgroup``: v1; ``cgroup2``: systemd's unified tree)."""
    read_only: bool
    """/sys/fs/cgroup is mounted read-only."""
    writable: bool
    """This process may create a folder in /sys/fs/cgroup."""
    self_cgroup: tuple[str, ...]
    """/proc/self/cgroup: one line ``0::/PATH`` on a unified host, one per hierarchy otherwise."""
    systemd: bool
    """systemd is the init system (``SYSTEMD_RUNNING``)."""
    dbus: bool
    """The system bus's socket is there (``DBUS_SOCKET``)."""
    system_slice: bool
    """/sys/fs/cgroup/system.slice exists (cgroup/v2 puts its slurmstepd scope in it)."""

    @property
    def slurm_default(self) -> str | None:
        """The plugin Slurm's ``autodetect`` loads here, by its own rule (autodetect_cgroup_version, 22.05)."""
        if self.mounted == "cgroup2":
            return "cgroup/v2"
        if self.mounted == "tmpfs":
            return {"cgroup2": "cgroup/v2", "cgroup": "cgroup/v1"}.get(self.systemd_hierarchy or "")
        return None

    def line(self) -> str:
        if self.mounted is None:
            fs = f"nothing mounted at {CGROUP_MOUNT}"
        elif self.mounted == "cgroup2":
            fs = f"{CGROUP_MOUNT} is cgroup2"
        else:
            fs = f"{CGROUP_MOUNT} is {self.mounted} (systemd's hierarchy: {self.systemd_hierarchy or 'none'})"
        access = "read-only" if self.read_only else "writable" if self.writable else "not writable here"
        inside = self.self_cgroup[0] if len(self.self_cgroup) == 1 else f"{len(self.self_cgroup)} hierarchies"
        return (f"{fs}, {access}; this process in {inside}; "
                f"systemd {'running' if self.systemd else 'not running'}, D-Bus socket "
                f"{'present' if self.dbus else 'absent'}; Slurm's default here: {self.slurm_default or 'none'}")


def mounts(mountinfo: str) -> dict[str, tuple[str, set[str]]]:
    """``/proc/self/mountinfo`` -> mount point -> (file system type, mount options); the last mount wins (it hides
    the ones below it)."""
    out = {}
    for line in mountinfo.splitlines():
        fields = line.split()
        if "-" not in fields[6:]:
            continue
        dash = fields.index("-", 6)
        if len(fields) > dash + 1 and len(fields) > 5:
            point = fields[4].replace("\\040", " ")
            out[point] = (fields[dash + 1], set(fields[5].split(",")))
    return out


def host_cgroups(mountinfo: str, self_cgroup: str, present: Iterable[Path], writable: bool) -> HostCgroups:
    """What ``read_cgroups`` reads, from its texts: ``present`` holds those of SYSTEMD_RUNNING, DBUS_SOCKET and
    /sys/fs/cgroup/system.slice that exist; ``writable``: access(2) of /sys/fs/cgroup for writing."""
    table = mounts(mountinfo)
    at = table.get(str(CGROUP_MOUNT))
    below = table.get(str(CGROUP_MOUNT / "systemd"))
    there = set(present)
    read_only = at is not None and "ro" in at[1]
    return HostCgroups(
        mounted=at[0] if at else None, systemd_hierarchy=below[0] if below and at and at[0] == "tmpfs" else None,
        read_only=read_only, writable=at is not None and writable and not read_only,
        self_cgroup=tuple(ln.strip() for ln in self_cgroup.splitlines() if ln.strip()) or ("(none)",),
        systemd=SYSTEMD_RUNNING in there, dbus=DBUS_SOCKET in there,
        system_slice=CGROUP_MOUNT / "system.slice" in there)


def read_cgroups(state: Path | None = None) -> HostCgroups:
    """This host's cgroups; with ``state``, what was read is kept in STATE/host-cgroups.txt."""
    mountinfo = Path("/proc/self/mountinfo").read_text()
    self_cgroup = Path("/proc/self/cgroup").read_text()
    found = host_cgroups(mountinfo, self_cgroup,
                         [p for p in (SYSTEMD_RUNNING, DBUS_SOCKET, CGROUP_MOUNT / "system.slice") if p.exists()],
                         os.access(CGROUP_MOUNT, os.W_OK))
    if state is not None:
        controllers = CGROUP_MOUNT / "cgroup.controllers"
        (state / CGROUP_FILE).write_text("\n".join([
            "# Read by scripts/slurm_node.py up: the cgroup mounts, this process's cgroups, the root's controllers.",
            *(ln for ln in mountinfo.splitlines() if "cgroup" in ln), "# /proc/self/cgroup", self_cgroup.rstrip(),
            f"# {controllers}", controllers.read_text().strip() if controllers.is_file() else "(none)",
            f"# {found.line()}", ""]))
    return found


@dataclass(frozen=True)
class CgroupSetup:
    """One cgroup.conf ``up`` may start slurmd with."""

    name: str
    settings: tuple[str, ...] | None
    """cgroup.conf's lines; None: no cgroup.conf at all (Slurm's default)."""
    what: str


CGROUP_SETUPS = (
    CgroupSetup("disabled", ("CgroupPlugin=disabled",), "no cgroup plugin (Slurm 24.05 and later)"),
    CgroupSetup("v1-inert", ("CgroupPlugin=cgroup/v1",),
                "cgroup/v1, whose init touches no file, and no plugin that asks it for a cgroup"),
    CgroupSetup("v2-no-systemd", ("CgroupPlugin=cgroup/v2", "IgnoreSystemd=yes"),
                "cgroup/v2 making its own folders under /sys/fs/cgroup/system.slice, without systemd"),
    CgroupSetup("autodetect", None, "Slurm's default: autodetect (cgroup2: cgroup/v2 through systemd over D-Bus)"),
)
"""In the order ``up`` tries them: the ones that touch the host's cgroups least first."""
SETUP_BY_NAME = {s.name: s for s in CGROUP_SETUPS}


@dataclass(frozen=True)
class Planned:
    """A setup of the plan, or why it is not tried here."""

    setup: CgroupSetup
    skipped: str | None = None


def cgroup_plan(host: HostCgroups, version: tuple[int, ...], plugins: Iterable[str]) -> list[Planned]:
    """Every setup in order, each with why it cannot work on this host and Slurm (None: try it). ``plugins``:
    the file names in PluginDir."""
    have = set(plugins)
    shown = f"{version[0]}.{version[1]:02d}" + "".join(f".{v}" for v in version[2:])

    def why_not(setup: CgroupSetup, earlier: list[Planned]) -> str | None:
        if setup.name == "disabled":
            return None if version[:2] >= (24, 5) else f"Slurm {shown} has no CgroupPlugin=disabled (from 24.05)"
        if setup.name == "v1-inert":
            return None if "cgroup_v1.so" in have else "no cgroup_v1.so in PluginDir"
        if setup.name == "v2-no-systemd":
            if "cgroup_v2.so" not in have:
                return "no cgroup_v2.so in PluginDir"
            if host.mounted != "cgroup2":
                return f"{CGROUP_MOUNT} is {host.mounted or 'not mounted'}, not cgroup2"
            if host.read_only or not host.writable:
                return f"{CGROUP_MOUNT} is {'mounted read-only' if host.read_only else 'not writable here'}"
            if host.systemd:
                return "systemd runs here (IgnoreSystemd is for hosts without it: it would fight systemd's tree)"
            return None
        default = host.slurm_default
        if default is None:
            return f"Slurm's autodetect finds no cgroup file system at {CGROUP_MOUNT}"
        if default == "cgroup/v1" and any(p.setup.name == "v1-inert" and p.skipped is None for p in earlier):
            return "it loads cgroup/v1 here, as v1-inert does"
        if default == "cgroup/v2" and host.mounted == "tmpfs":
            return "cgroup/v2 on cgroup v1 hierarchies: Slurm stops (\"Hybrid mode is not supported\")"
        if default == "cgroup/v2" and not (host.systemd and host.dbus):
            missing = "systemd is not running" if not host.systemd else f"{DBUS_SOCKET} is missing"
            return f"on cgroup2 it asks systemd over D-Bus for a scope, and {missing}"
        return None

    plan: list[Planned] = []
    for setup in CGROUP_SETUPS:
        plan.append(Planned(setup, why_not(setup, plan)))
    return plan


def cgroup_conf(setup: CgroupSetup) -> str:
    return "\n".join(["# Generated by scripts/slurm_node.py: " + setup.what + ".", *(setup.settings or ()), ""])


_SLURM_VERSION = re.compile(r"\b(\d+)\.(\d+)\.(\d+)\b")


def slurm_version(text: str) -> tuple[int, int, int]:
    """``slurmd -V`` (``slurm-wlm 22.05.8``, ``slurm 24.05.1``) -> (22, 5, 8)."""
    m = _SLURM_VERSION.search(text)
    if m is None:
        raise NodeError(f"slurmd -V: no version in {text.strip()[:100]!r}")
    return int(m.group(1)), int(m.group(2)), int(m.group(3))


_CHAIN = re.compile(r"Unable to initialize cgroup plugin|slurmd initialization failed|cannot create \S+ context for|"
                    r"Couldn't load specified plugin name for|Controller \S+ is not enabled")
"""slurmd.log's lines that follow from a failed plugin init (or only say a cgroup controller is off), not its cause."""


def daemon_failure(log: str, output: str, name: str = "slurmd") -> str:
    """Why a daemon (slurmd, slurmctld) stopped, in one line: its log's first fatal line, else its first error
    line that is not a consequence of an earlier one (``_CHAIN``), else its own output's last line."""
    said = [re.sub(r"^\[[^]]*\]\s*", "", ln.strip()) for ln in log.splitlines()]
    errors = [ln for ln in said if re.match(rf"({name}: )?(error|fatal): ", ln)]
    causes = [ln for ln in errors if not _CHAIN.search(ln)]
    causes.sort(key=lambda ln: not re.match(rf"({name}: )?fatal: ", ln))  # stable: the first fatal line first
    if causes:
        return re.sub(rf"^({name}: )?", "", causes[0]) + (f" (+{len(causes) - 1} more)" if len(causes) > 1 else "")
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    return errors[-1] if errors else lines[-1] if lines else "no error logged"


class SlurmdError(NodeError):
    """slurmd (or ``slurmd -G``) stopped while starting: another cgroup setup may let it start."""


class PortTaken(NodeError):
    """A daemon stopped because its port was taken after ``free_ports`` found it free: new ports may let it start."""


# --- slurm.conf ------------------------------------------------------------------------------------


PORT_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
PORT_TRIES = 3
"""Starts of the daemons, each with new ports, while one says its port is taken (another program took it)."""
_IN_USE = "Address already in use"


def port_choices(ephemeral: tuple[int, int]) -> range:
    """Ports the kernel never hands out as a connection's own (outside ``ephemeral``, the local port range): a
    port chosen there stays free until a listener takes it, where one from the range may be any connection's."""
    low, high = ephemeral
    return range(10000, low) if low > 11000 else range(high + 1, 65536) if high < 64535 else range(1024, low)


def ephemeral_range(path: Path = PORT_RANGE_FILE) -> tuple[int, int]:
    try:
        low, high = (int(x) for x in path.read_text().split())
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default
    return low, high


def free_ports(count: int = 2, choices: range | None = None) -> tuple[int, ...]:
    """``count`` distinct ports, each free to listen on at every address now, drawn at random from
    ``port_choices`` (clusters started at once, as in parallel tests, rarely draw the same one)."""
    pool = choices if choices is not None else port_choices(ephemeral_range())
    found: list[int] = []
    for port in random.sample(pool, min(len(pool), 200)):
        with socket.socket() as s:
            try:
                s.bind(("", port))
            except OSError:
                continue
        found.append(port)
        if len(found) == count:
            return tuple(found)
    raise NodeError(f"ports: fewer than {count} free among 200 tried in {pool.start}-{pool.stop - 1} "
                    f"(fix: stop what listens there)")


@dataclass(frozen=True)
class NodeLine:
    """``slurmd -C``'s hardware line for this host."""

    name: str
    hardware: str
    """``CPUs=16 Boards=1 ... RealMemory=...``: everything after ``NodeName=``."""


def node_line(slurmd_c: str) -> NodeLine:
    line = next((ln for ln in slurmd_c.splitlines() if ln.startswith("NodeName=")), None)
    if line is None:
        raise NodeError(f"slurmd -C: no NodeName line in {slurmd_c.strip()[:200]!r}")
    name, _, rest = line.partition(" ")
    return NodeLine(name.split("=", 1)[1], rest.strip())


def slurm_conf(state: Path, prefix: Prefix, node: NodeLine, gpus: int, node_features: list[str],
               cluster: str, ports: tuple[int, ...]) -> str:
    """The cluster's slurm.conf: one node at 127.0.0.1 (no name lookup), its state under ``state``."""
    node_opts = [f"NodeName={node.name}", "NodeAddr=127.0.0.1", node.hardware]
    if gpus:
        node_opts.append(f"Gres=gpu:{gpus}")
    if node_features:
        node_opts.append(f"Features={','.join(node_features)}")
    return "\n".join([
        "# Generated by scripts/slurm_node.py: a single-node cluster for tileproof fleet.",
        f"ClusterName={cluster}", f"SlurmctldHost={node.name}(127.0.0.1)", "SlurmUser=root", "SlurmdUser=root",
        f"PluginDir={prefix.plugin_dir}",
        "AuthType=auth/munge", f"AuthInfo=socket={state / 'munge.socket'}",
        f"StateSaveLocation={state / 'ctld'}", f"SlurmdSpoolDir={state / 'spool'}",
        f"SlurmctldPidFile={state / 'slurmctld.pid'}", f"SlurmdPidFile={state / 'slurmd.pid'}",
        f"SlurmctldLogFile={state / 'slurmctld.log'}", f"SlurmdLogFile={state / 'slurmd.log'}",
        f"SlurmctldPort={ports[0]}", f"SlurmdPort={ports[1]}",
        *NO_CGROUP_USERS, "MpiDefault=none",
        "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core", "ReturnToService=2",
        # Schedule at the next event, not up to 3 s later (batch_sched_delay's default), and let tasks share the
        # node's cores (OverSubscribe; GPUs are never shared): tasks wait on Slurm, not on idle cores.
        "SchedulerType=sched/builtin", "SchedulerParameters=sched_min_interval=100000,batch_sched_delay=0",
        # SIGKILL 10 s after a task's time limit's SIGTERM (tileproof stops its programs on SIGTERM at once).
        "KillWait=10",
        "AccountingStorageType=accounting_storage/none",
        "GresTypes=gpu",
        " ".join(node_opts) + " State=UNKNOWN",
        f"PartitionName=debug Nodes={node.name} Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4", "",
    ])


# --- up / down -------------------------------------------------------------------------------------


def client_script(prefix: Prefix, loader: str, name: str, conf: Path) -> str:
    """STATE/bin/NAME: the client through the dynamic loader, its libraries an argument (nothing inherited)."""
    libs = os.pathsep.join(str(p) for p in prefix.library_path)
    return "\n".join([
        "#!/bin/sh",
        f"# Generated by scripts/slurm_node.py: {name} with its libraries given to ld.so, not on LD_LIBRARY_PATH",
        "# (which sbatch would pass on to every job).",
        f"SLURM_CONF={shlex.quote(str(conf))}; export SLURM_CONF",
        f"exec {shlex.quote(loader)} --library-path {shlex.quote(libs)} --argv0 {name} "
        f"{shlex.quote(str(prefix.program('bin', name)))} \"$@\"", ""])


@dataclass
class Node:
    """A cluster ``up`` started: where its files are and its daemons (ours to stop)."""

    state: Path
    prefix: Prefix
    hardware: NodeLine
    gpus: list[Gpu]
    features: list[str]
    cluster: str
    ports: tuple[int, ...] = ()
    """slurm.conf's SlurmctldPort and SlurmdPort (``write_conf``)."""
    daemons: dict[str, subprocess.Popen] = field(default_factory=dict)
    cluster_file: Path | None = None
    """The tileproof cluster file ``up`` wrote for this node, if asked to."""
    cgroup: str | None = None
    """The name of the cgroup setup slurmd started with (``CGROUP_SETUPS``)."""
    cgroup_folders: list[Path] = field(default_factory=list)
    """Folders under /sys/fs/cgroup made for this cluster (v2-no-systemd), removed when it stops."""

    @property
    def name(self) -> str:
        return self.hardware.name

    @property
    def bin(self) -> Path:
        return self.state / "bin"

    def write_conf(self) -> None:
        """slurm.conf for this node and its ports."""
        self.conf.write_text(slurm_conf(self.state, self.prefix, self.hardware, len(self.gpus), self.features,
                                        self.cluster, self.ports))

    @property
    def conf(self) -> Path:
        return self.state / "slurm.conf"

    def client(self, name: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        return run([str(self.bin / name), *args], timeout=timeout)


def _daemon(state: Path, argv: list[str], env: dict[str, str]) -> subprocess.Popen:
    """One daemon in the foreground of its own session, stdout and stderr into STATE/NAME.out."""
    name = Path(argv[0]).name
    with open(state / f"{name}.out", "wb") as out:
        try:
            return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env,
                                    start_new_session=True)
        except OSError as e:
            raise NodeError(f"{argv[0]}: cannot start ({e})") from None


def logs_tail(state: Path, lines: int = 5) -> list[str]:
    """The last lines of each daemon's log and output (what follows a failed ``up``'s one line)."""
    out = []
    for path in sorted(state.glob("*.log")) + sorted(state.glob("*.out")):
        tail = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()][-lines:]
        out += [f"{path.name}: {ln}" for ln in tail]
    return out


def _wait(ready, node: Node, what: str, fix: str, seconds: float = WAIT_S) -> None:
    deadline = time.monotonic() + seconds
    while not ready():
        dead = {n: p.returncode for n, p in node.daemons.items() if p.poll() is not None}
        if dead:
            name, code = next(iter(dead.items()))
            log, out = _text(node.state / f"{name}.log"), _text(node.state / f"{name}.out")
            why = daemon_failure(log, out, name)
            if _IN_USE in log or _IN_USE in out:
                raise PortTaken(f"{name} exited {code} before {what}: {why}")
            if name == "slurmd":
                raise SlurmdError(f"slurmd exited {code} before {what}: {why}")
            raise NodeError(f"{name} exited {code} before {what}: {why} (fix: see {node.state}/{name}.log and "
                            f"{name}.out; {fix})")
        if time.monotonic() > deadline:
            raise NodeError(f"{what}: not after {seconds:.0f} s (fix: see the logs in {node.state}; {fix})")
        time.sleep(0.1)


def up(state: Path, *, debs: Path | None = None, system_prefix: Path | None = None, gpu_query: Path | None = None,
       device_dir: Path = Path("/dev"), extra_features: Iterable[str] = (), cluster: str = "tileproof-node",
       cluster_file: Path | None = None, time_limit: str = "00:10:00", cgroup: Sequence[str] | None = None) -> Node:
    """Every step of ``up``, each saying one line; the daemons are children of this process (``stop``, or
    ``down`` from another process, ends them). ``cgroup``: the cgroup setups to try, in order (names of
    ``CGROUP_SETUPS``, tried whatever this host looks like); None: ``cgroup_plan``'s for this host."""
    if cgroup is not None and (not cgroup or any(n not in SETUP_BY_NAME for n in cgroup)):
        raise NodeError(f"--cgroup {','.join(cgroup)}: expected names among {', '.join(SETUP_BY_NAME)}")
    if state.exists() and any(state.iterdir()):
        raise NodeError(f"{state}: not empty (fix: a new folder for each cluster; down stops an old one)")
    if len(str(state / "munge.socket")) > SOCKET_PATH_MAX:
        raise NodeError(f"{state}: too long a path for munged's socket (fix: a --state folder of at most "
                        f"{SOCKET_PATH_MAX - len('/munge.socket')} characters, e.g. under /tmp)")
    state.mkdir(parents=True, exist_ok=True)
    state.chmod(0o700)  # munged refuses a socket or key in a folder others may write
    prefix, glibc = _prefix_step(state, debs, system_prefix)
    loader = _libraries_step(prefix, glibc, note_outside=debs is not None)
    gpus = _gpus_step(state, prefix, gpu_query, device_dir)
    node = _config_step(state, prefix, gpus, device_dir, features(gpus, extra_features), cluster, loader)
    _cgroup_step(node, cgroup)
    if cluster_file is not None:
        write_cluster_file(cluster_file, cluster, gpus, time_limit)
        node.cluster_file = cluster_file
        say(f"cluster file: {cluster_file} (kinds {', '.join(cluster_kinds(gpus))})")
    return node


SOCKET_PATH_MAX = 100
"""A Unix socket's path must fit ``sun_path`` (108 bytes on Linux): munged's, with room to spare."""


def _prefix_step(state: Path, debs: Path | None, system: Path | None) -> tuple[Prefix, set[str]]:
    """The gathered packages unpacked into STATE/prefix (after checking this host's glibc), or the system's."""
    if debs is None:
        return Prefix(system or Path("/")), set()
    manifest = read_manifest(debs)
    have, need = glibc_here(), manifest.glibc_at_least
    if have is None or version_tuple(have) < version_tuple(need):
        raise NodeError(f"glibc {have or 'not found'} here; the packages from {manifest.gathered_on} need "
                        f">= {need} (fix: gather on a release at most as new as this host's)")
    prefix = unpack(debs, manifest, state / "prefix")
    say(f"unpack: {len(manifest.packages)} packages from {manifest.gathered_on} into {prefix.root} "
        f"(glibc {have} here, >= {need} needed)")
    return prefix, set(manifest.glibc_libraries)


def _libraries_step(prefix: Prefix, glibc: set[str], note_outside: bool) -> str:
    """ldd over every ELF file: one line per missing library, then fail; the dynamic loader's path."""
    report = check_libraries(prefix, glibc)
    for line in report.missing_lines() + report.errors:
        say(f"libraries: {line}")
    if report.loader is None:
        raise NodeError(f"libraries: ldd named no dynamic loader for the {report.checked} files of {prefix.root}")
    if report.missing or report.errors:
        raise NodeError(f"libraries: {len(report.missing)} missing, {len(report.errors)} other ldd errors in "
                        f"{report.checked} files of {prefix.root} (the lines above; fix: gather on a machine with "
                        "the registry, from a release whose glibc is at most this host's)")
    for line in report.outside_lines() if note_outside else []:
        say(f"libraries: note: {line}")
    say(f"libraries: {report.checked} binaries, libraries and plugins find every library they need "
        f"(loader {report.loader})")
    return report.loader


def _gpus_step(state: Path, prefix: Prefix, gpu_query: Path | None, device_dir: Path) -> list[Gpu]:
    """The GPUs nvidia-smi lists (or the transcript given), kept as STATE/nvidia-smi-query.csv; their devices."""
    if gpu_query is None and shutil.which("nvidia-smi") is None:
        say("gpus: no nvidia-smi here: a node without GPUs")
        return []
    query = gpu_query.read_text() if gpu_query else _nvidia_smi()
    (state / "nvidia-smi-query.csv").write_text(query)
    gpus = gpus_of(query)
    nvml = has_nvml(prefix.plugin_dir)
    if gpus and not nvml:
        check_devices(gpus, device_dir)
    say(f"gpus: {len(gpus)} ({', '.join(f'{g.index}: {g.name}, cc {g.compute_capability}' for g in gpus)}); "
        f"gres.conf: {'AutoDetect=nvml' if nvml else 'one File= per GPU'}" if gpus else "gpus: nvidia-smi lists none")
    return gpus


def _config_step(state: Path, prefix: Prefix, gpus: list[Gpu], device_dir: Path, node_features: list[str],
                 cluster: str, loader: str) -> Node:
    """slurm.conf and gres.conf (read back by ``slurmd -G`` in ``_cgroup_step``), the munge key, the clients."""
    env = prefix.daemon_env()
    slurmd = prefix.program("sbin", "slurmd")
    hw = run([str(slurmd), "-C"], env=env)
    if hw.returncode != 0:
        raise NodeError(f"slurmd -C: {last_line(hw)}")
    node_hw = node_line(hw.stdout)
    for sub in ("ctld", "spool", "bin"):
        (state / sub).mkdir()
    node = Node(state=state, prefix=prefix, hardware=node_hw, gpus=gpus, features=node_features, cluster=cluster,
                ports=free_ports())
    conf = node.conf
    node.write_conf()
    (state / "gres.conf").write_text(gres_conf(gpus, prefix.plugin_dir, device_dir) if gpus else "")
    for name in CLIENTS:
        script = node.bin / name
        script.write_text(client_script(prefix, loader, name, conf))
        script.chmod(0o755)
    key = state / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    say(f"config: node {node_hw.name} ({node_hw.hardware.split(' ')[0]}, "
        f"features {','.join(node_features) or 'none'}, gres gpu:{len(gpus)}) in {conf}")
    return node


def _text(path: Path) -> str:
    return path.read_text(errors="replace") if path.is_file() else ""


def _readback(node: Node) -> None:
    """``slurmd -G``: Slurm's own reading of gres.conf (it loads the cgroup plugin first, as slurmd does), which
    must list every GPU. SlurmdError where slurmd -G itself fails."""
    env = {**node.prefix.daemon_env(), "SLURM_CONF": str(node.conf)}
    shown = run([str(node.prefix.program("sbin", "slurmd")), "-G", "-f", str(node.conf)], env=env)
    if shown.returncode != 0:
        raise SlurmdError(f"slurmd -G exited {shown.returncode}: "
                          f"{daemon_failure(_text(node.state / 'slurmd.log'), shown.stdout + shown.stderr)}")
    listed = len(re.findall(r"\bGres Name=gpu\b", shown.stdout + shown.stderr))
    if listed != len(node.gpus) and not has_nvml(node.prefix.plugin_dir):
        raise NodeError(f"slurmd -G: Slurm reads {listed} GPUs from {node.state / 'gres.conf'}, expected "
                        f"{len(node.gpus)}: {last_line(shown)}")


def _cgroup_step(node: Node, names: Sequence[str] | None) -> None:
    """slurmd started with the first cgroup setup that lets it (``cgroup_plan``'s order for this host, or the
    names given): one line for what this host is, one per setup skipped and one per attempt that failed (its
    slurmd.log kept as slurmd.cgroup-N.log); the cluster up, or a NodeError naming every attempt."""
    host = read_cgroups(node.state)
    say(f"cgroup: {host.line()}")
    if names is None:
        version = slurm_version(run([str(node.prefix.program("sbin", "slurmd")), "-V"],
                                    env=node.prefix.daemon_env()).stdout)
        plan = cgroup_plan(host, version, [p.name for p in node.prefix.plugin_dir.iterdir()])
        for p in plan:
            if p.skipped:
                say(f"cgroup: not {p.setup.name}: {p.skipped}")
        tries = [p.setup for p in plan if p.skipped is None]
    else:
        tries = [SETUP_BY_NAME[n] for n in names]
    if not tries:
        raise NodeError(f"cgroup: no setup can work on this host (the lines above; fix: see "
                        f"{node.state / CGROUP_FILE}, or name setups to try anyway: --cgroup v1-inert)")
    failed = []
    for n, setup in enumerate(tries, 1):
        before = _folders_before(host, setup)
        try:
            (node.state / "cgroup.conf").unlink(missing_ok=True)
            if setup.settings is not None:
                (node.state / "cgroup.conf").write_text(cgroup_conf(setup))
            node.cgroup, node.cgroup_folders = setup.name, []
            if before is not None:
                node.cgroup_folders = _folders_made(before)
            _readback(node)
            _start_step(node)
        except SlurmdError as e:
            for line in _remove_folders(node.cgroup_folders if before is None else _folders_made(before)):
                say(f"cgroup: {line}")
            kept = [_keep(node.state / f"slurmd.{ext}", f"slurmd.cgroup-{n}.{ext}") for ext in ("log", "out")]
            say(f"cgroup: attempt {n} of {len(tries)}, {setup.name} ({setup.what}): {e} "
                f"(log: {', '.join(k for k in kept if k) or 'none'})")
            failed.append(f"{setup.name} ({e})")
            continue
        if before is not None:
            node.cgroup_folders = _folders_made(before)
            _write_node_file(node)
        return
    raise NodeError(f"cgroup: slurmd starts with none of the setups tried here: {'; '.join(failed)} "
                    f"(fix: see the cgroup lines above and {node.state / CGROUP_FILE}; --cgroup names others)")


def _keep(path: Path, name: str) -> str | None:
    if not path.is_file():
        return None
    path.rename(path.with_name(name))
    return name


def _folders_before(host: HostCgroups, setup: CgroupSetup) -> set[Path] | None:
    """For v2-no-systemd on a writable cgroup2 tree: system.slice made if it is missing (slurmd makes only the
    scope inside it), and the folders in it before slurmd starts; None for every other setup."""
    if setup.name != "v2-no-systemd" or host.mounted != "cgroup2" or not host.writable:
        return None
    slice_ = CGROUP_MOUNT / "system.slice"
    if not slice_.is_dir():
        try:
            slice_.mkdir()
        except OSError:
            return None  # slurmd then says why it cannot make its scope there
        return set()
    return {slice_, *slice_.iterdir()}


def _folders_made(before: set[Path]) -> list[Path]:
    slice_ = CGROUP_MOUNT / "system.slice"
    if slice_ not in before:
        return [slice_] if slice_.is_dir() else []
    return sorted(p for p in slice_.iterdir() if p.is_dir() and p not in before)


def _remove_folders(folders: Iterable[Path]) -> list[str]:
    """Each cgroup folder this cluster made, its sub-folders first (a cgroup goes with rmdir once no process is
    in it); one line per folder that stays."""
    lines = []
    for top in folders:
        if not top.is_dir():
            continue
        for where, subs, _ in os.walk(top, topdown=False):
            for sub in [*(Path(where) / d for d in subs), *([top] if Path(where) == top else [])]:
                try:
                    sub.rmdir()
                except OSError as e:
                    lines.append(f"{sub}: not removed ({e.strerror})")
    return lines

def _start_step(node: Node) -> None:
    """munged, then slurmctld and slurmd; the node idle in sinfo and showing its GPUs; else every daemon stopped.
    A daemon that stops because its port was taken since ``free_ports`` (by another program's listener or
    connection) is started again with new ports, up to ``PORT_TRIES`` starts in all."""
    for attempt in range(1, PORT_TRIES + 1):
        try:
            _start_daemons(node, last=attempt == PORT_TRIES)
            return
        except PortTaken as e:
            if attempt == PORT_TRIES:
                raise NodeError(f"ports {node.ports[0]}, {node.ports[1]}: taken at each of {PORT_TRIES} starts: {e} "
                                f"(fix: stop what takes this host's ports; see the logs in {node.state})") from None
            was = node.ports
            node.ports = free_ports()
            node.write_conf()
            say(f"ports {was[0]}, {was[1]}: {e}; starting again with ports {node.ports[0]}, {node.ports[1]}")


def _start_daemons(node: Node, last: bool) -> None:
    state, prefix = node.state, node.prefix
    env = {**prefix.daemon_env(), "SLURM_CONF": str(node.conf)}
    node.daemons = {}
    (state / "munge.socket").unlink(missing_ok=True)  # an earlier attempt's: _wait must see munged's own
    try:
        node.daemons["munged"] = _daemon(state, [str(prefix.program("sbin", "munged")), "--foreground", "--force",
                                                 f"--socket={state / 'munge.socket'}",
                                                 f"--key-file={state / 'munge.key'}",
                                                 f"--pid-file={state / 'munged.pid'}",
                                                 f"--seed-file={state / 'munged.seed'}",
                                                 f"--log-file={state / 'munged.log'}"], env)
        _wait(lambda: (state / "munge.socket").exists(), node, "munged made its socket", "munged's key and folders")
        node.daemons["slurmctld"] = _daemon(state, [str(prefix.program("sbin", "slurmctld")), "-D", "-f",
                                                    str(node.conf)], env)
        node.daemons["slurmd"] = _daemon(state, [str(prefix.program("sbin", "slurmd")), "-D", "-f", str(node.conf),
                                                 "-d", str(prefix.program("sbin", "slurmstepd"))], env)
        _wait(lambda: node.client("sinfo", "--noheader", "--format=%t").stdout.strip() in ("idle", "mix", "alloc"),
              node, "the node is idle in sinfo", "slurmd -C and the NodeName line of slurm.conf")
        _write_node_file(node)
        shown = re.search(r"\bGres=(\S+)", node.client("scontrol", "show", "node", "-o", node.name).stdout)
        gres = shown.group(1).split("(")[0] if shown else None
        if node.gpus and gres != f"gpu:{len(node.gpus)}":
            raise NodeError(f"scontrol show node {node.name}: Gres={gres}, expected gpu:{len(node.gpus)} "
                            f"(fix: see {state}/slurmd.log)")
    except PortTaken:
        (stop if last else _stop_daemons)(node)  # the cgroup folders stay for the next start
        raise
    except BaseException:
        stop(node)
        raise
    say(f"up: munged, slurmctld, slurmd running (pids {', '.join(str(p.pid) for p in node.daemons.values())}); "
        f"cgroup setup {node.cgroup}; node {node.name} idle; clients in {node.bin}")


def _write_node_file(node: Node) -> None:
    """STATE/node.json: what ``down`` stops (the daemons' pids) and removes (the cgroup folders made)."""
    (node.state / NODE_FILE).write_text(json.dumps({
        "pids": {n: p.pid for n, p in node.daemons.items()}, "node": node.name, "cgroup": node.cgroup,
        "cgroup_folders": [str(f) for f in node.cgroup_folders]}, indent=2) + "\n")


def _nvidia_smi() -> str:
    proc = run(GPU_QUERY_ARGV)
    if proc.returncode != 0:
        raise NodeError(f"{' '.join(GPU_QUERY_ARGV)}: {last_line(proc)} (fix: check the driver with nvidia-smi)")
    return proc.stdout


def write_cluster_file(path: Path, name: str, gpus: list[Gpu], time_limit: str) -> Cluster:
    """A tileproof cluster file for this node, read back through tileproof's own reader."""
    cluster = Cluster(cluster_version=1, name=name, time_limit=time_limit, cpus_per_task=1, kinds=cluster_kinds(gpus))
    body = yaml.safe_dump(cluster.model_dump(mode="json", exclude_none=True), sort_keys=False)
    path.write_text(f"# Written by scripts/slurm_node.py up for the node it started (schema/cluster.v1.schema.json).\n"
                    f"{body}")
    return load_cluster(path)


def _alive(pid: int) -> bool:
    """The process exists and is not a zombie (a zombie is a process that has ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def steps_of(conf: Path) -> list[int]:
    """The slurmstepd processes of the cluster whose slurm.conf is ``conf`` (slurmd hands them its environment,
    ``SLURM_CONF`` included); found in /proc, since slurmd detaches them."""
    want = f"SLURM_CONF={conf}".encode()
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if (proc / "comm").read_text().strip() == "slurmstepd" and want in (proc / "environ").read_bytes().split(
                    b"\0"):
                found.append(int(proc.name))
        except OSError:
            continue
    return [pid for pid in found if _alive(pid)]


def _kill_steps(conf: Path) -> list[str]:
    """SIGKILL to the cluster's slurmstepd processes still there once slurmd has stopped (one that lost its
    slurmd retries its last message for ever); one line each."""
    lines = []
    for pid in steps_of(conf):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        lines.append(f"slurmstepd (pid {pid}) outlived slurmd: killed")
    return lines


def _cancel_jobs(client, seconds: float = 15) -> list[str]:
    """``scancel`` every job still queued or running (all of this private cluster's jobs are ours), and wait
    for the queue to empty: a job's processes end with it, not orphaned by the shutdown. One line if any."""
    ids = client("squeue", "-h", "-o", "%i").stdout.split()
    if not ids:
        return []
    client("scancel", *ids)
    deadline = time.monotonic() + seconds
    while client("squeue", "-h", "-o", "%i").stdout.split() and time.monotonic() < deadline:
        time.sleep(0.5)
    return [f"cancelled the jobs still queued or running: {' '.join(ids)}"]


def _stop_pids(pids: dict[str, int], shutdown, reap, seconds: float = 20) -> list[str]:
    """``scontrol shutdown`` (slurmctld and slurmd), then SIGTERM to munged (last: the shutdown needs it);
    SIGKILL to any still there after ``seconds``. Returns one line per daemon that needed SIGKILL."""
    killed = []
    shut = "slurmctld" in pids and _alive(pids["slurmctld"]) and shutdown()
    for name in ("slurmctld", "slurmd", "munged"):
        pid = pids.get(name)
        if pid is None:
            continue
        if (name == "munged" or not shut) and _alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + seconds
        while _alive(pid) and time.monotonic() < deadline:
            reap(name)
            time.sleep(0.1)
        if _alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            killed.append(f"{name} (pid {pid}) did not stop in {seconds:.0f} s: killed")
        reap(name)
    return killed


def stop(node: Node) -> list[str]:
    """Stop the daemons of a Node this process started (and reap them), and remove the cgroup folders made for it."""
    return _stop_daemons(node) + _remove_folders(node.cgroup_folders)


def _stop_daemons(node: Node) -> list[str]:
    def shutdown() -> bool:
        return node.client("scontrol", "shutdown").returncode == 0

    def reap(name: str) -> None:
        proc = node.daemons.get(name)
        if proc is not None:
            proc.poll()

    running = "slurmctld" in node.daemons and node.daemons["slurmctld"].poll() is None
    lines = _cancel_jobs(node.client) if running else []
    lines += _stop_pids({n: p.pid for n, p in node.daemons.items()}, shutdown, reap)
    for proc in node.daemons.values():
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(5)
    return lines + _kill_steps(node.conf)


def down(state: Path) -> list[str]:
    """Stop the daemons ``up`` left running, by the process ids it wrote in STATE/node.json."""
    path = state / NODE_FILE
    try:
        written = json.loads(path.read_text())
        pids = {k: int(v) for k, v in written["pids"].items()}
        folders = [Path(f) for f in written.get("cgroup_folders", [])]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise NodeError(f"{path}: no daemons to stop ({e}) (fix: name the --state folder up was given)") from None
    def client(name: str, *args: str) -> subprocess.CompletedProcess:
        return run([str(state / "bin" / name), *args], timeout=60)

    lines = _cancel_jobs(client) if "slurmctld" in pids and _alive(pids["slurmctld"]) else []
    lines += _stop_pids(pids, lambda: client("scontrol", "shutdown").returncode == 0, lambda name: None)
    return lines + _kill_steps(state / "slurm.conf") + _remove_folders(folders)


# --- command line --------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="slurm_node.py", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="action", required=True)
    g = sub.add_parser("gather", help="download the packages and their libraries (needs apt and the registry)")
    g.add_argument("--out", type=Path, required=True, help="a new folder: debs/ and manifest.json")
    u = sub.add_parser("up", help="unpack, configure and start a single-node cluster")
    where = u.add_mutually_exclusive_group(required=True)
    where.add_argument("--debs", type=Path, help="the folder gather wrote")
    where.add_argument("--prefix", type=Path, help="where Slurm and munge are installed (/ for the system's)")
    u.add_argument("--state", type=Path, required=True, help="a new folder: prefix, configs, logs, sockets")
    u.add_argument("--cluster-file", type=Path, default=None, help="write a tileproof cluster file for this node")
    u.add_argument("--time-limit", default="00:10:00", help="the cluster file's time_limit (default 00:10:00)")
    u.add_argument("--cluster-name", default="tileproof-node")
    u.add_argument("--feature", action="append", default=[], help="a node feature beyond the GPUs' (repeatable)")
    u.add_argument("--gpu-query", type=Path, default=None,
                   help="an nvidia-smi --query-gpu transcript to read instead of asking nvidia-smi (tests)")
    u.add_argument("--device-dir", type=Path, default=Path("/dev"), help="where the nvidiaN device files are")
    u.add_argument("--cgroup", default=None, metavar="NAME[,NAME]",
                   help=f"the cgroup setups to try, in order ({', '.join(SETUP_BY_NAME)}); default: the ones that "
                        "can work on this host, least intrusive first")
    d = sub.add_parser("down", help="stop the daemons up started")
    d.add_argument("--state", type=Path, required=True)
    args = parser.parse_args(argv)
    try:
        if args.action == "gather":
            manifest = gather(args.out.resolve())
            size = sum((args.out / DEBS / p.file).stat().st_size for p in manifest.packages)
            say(f"gather: {len(manifest.packages)} packages ({size / 1e6:.1f} MB) into {args.out / DEBS}; "
                f"left out: {', '.join(x.name for x in manifest.left_out)}; glibc >= {manifest.glibc_at_least}")
            return 0
        if args.action == "up":
            up(args.state.resolve(), debs=args.debs.resolve() if args.debs else None,
               system_prefix=args.prefix.resolve() if args.prefix else None,
               gpu_query=args.gpu_query, device_dir=args.device_dir, extra_features=args.feature,
               cluster=args.cluster_name, cluster_file=args.cluster_file, time_limit=args.time_limit,
               cgroup=None if args.cgroup is None else [n.strip() for n in args.cgroup.split(",")])
            return 0
        for line in down(args.state.resolve()):
            say(f"down: {line}")
        say("down: stopped")
        return 0
    except NodeError as e:
        print(f"slurm-node: FAILED: {e}", file=sys.stderr, flush=True)
        state = getattr(args, "state", None)
        for line in logs_tail(state.resolve()) if args.action == "up" and state and state.is_dir() else []:
            print(f"slurm-node:   {line}", file=sys.stderr, flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
