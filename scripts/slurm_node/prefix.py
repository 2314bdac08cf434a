"""The prefix on the node: the carried packages unpacked (``dpkg-deb -x``), and the check that every binary and
plugin finds its libraries there (or in the node's own glibc)."""

from __future__ import annotations

import io
import os
import platform
import re
import shutil
import tarfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from tileproof.records.store import sha256_file

from .common import CLIENTS, DAEMONS, NodeError, last_line, run
from .manifest import DEBS, MANIFEST, Manifest


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
    """What ``dpkg-deb -x`` does, for a host without dpkg: the ``data.tar.*`` member of the ar archive, unpacked
    through tarfile's ``tar`` extraction filter (no member outside ``into``, no device file). A Python without
    the filters (before 3.10.12 and 3.11.4) is refused rather than trusted with the archive's paths."""
    if not hasattr(tarfile, "tar_filter"):
        raise NodeError(f"{deb}: unpacking without dpkg-deb needs tarfile's extraction filters, which Python "
                        f"{platform.python_version()} lacks (fix: install dpkg, or use Python 3.10.12, 3.11.4 or "
                        f"newer)")
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
