"""Finding the tile toolchain, reading its versions, and checking it agrees.

The pip toolchain lives in ``site-packages/nvidia/cu13`` of the interpreter
running tileproof. nvcc is always called by its real path (through a symlink it
loses its include paths). Every piece must share one major.minor, and
CUDA_HOME/CUDA_PATH must not name another toolkit: tileiras would load that
toolkit's libnvvm and fail with exit 5 ("failed to compile Tile IR program").

This module starts no process (the toolchain layer sits below the runner):
where a tool's ``--version`` must be read, the caller passes ``version_text``,
a callable that runs an argv and returns its output (``runner.capture.output_of``;
tests pass a fake).
"""

from __future__ import annotations

import email.parser
import importlib.metadata as md
import importlib.util
import json
import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from tileproof.records import release, store
from tileproof.records.errors import InputProblem, InputRefused, RecordError, ToolchainError
from tileproof.records.models import Toolchain, ToolchainProblem, ToolVersion
from tileproof.records.release import PACKAGES, major_minor
from tileproof.records.safe_read import decode, parse_json, read_file

__all__ = ["PACKAGES", "major_minor", "coherence", "discover", "require_coherent", "runtime_tools"]

TOOLS = ("nvcc", "tileiras", "ptxas", "cuobjdump")
MIN_SYSTEM_NVCC = (13, 3)
HAZARD_VARS = ("CUDA_HOME", "CUDA_PATH")
VersionText = Callable[[list[str]], str]
"""Runs argv, returns its stdout and stderr as text: how this layer asks the runner for a process."""
_RELEASE = re.compile(r"release (\d+)\.(\d+), V(\d+\.\d+\.\d+)")


@dataclass(frozen=True)
class Tools:
    """Resolved tool paths plus what was learned about them."""

    bin: Path
    source: str
    paths: dict[str, Path | None]
    facts: Toolchain
    extra_path: list[str] = field(default_factory=list)

    def tool(self, name: str) -> Path:
        path = self.paths.get(name)
        if path is None:
            raise ToolchainError(f"{name} not found in {self.bin} "
                                 "(fix: pip install 'tileproof[toolchain]' or nox -s compile)")
        return path

    def path_dirs(self) -> list[str]:
        """Folders children need first on PATH (``runner.environment.child_env``)."""
        return [str(self.bin), *self.extra_path]


def parse_release(text: str) -> str | None:
    """``13.4.92`` from a tool's ``--version`` text ("release 13.4, V13.4.92")."""
    m = _RELEASE.search(text)
    return m.group(3) if m else None


def pip_bin() -> Path | None:
    """``.../site-packages/nvidia/cu13/bin`` of this interpreter, by real path."""
    spec = importlib.util.find_spec("nvidia")
    if spec is None or not spec.submodule_search_locations:
        return None
    for loc in spec.submodule_search_locations:
        cand = Path(loc) / "cu13" / "bin"
        if (cand / "nvcc").exists():
            return cand.resolve()
    return None


_HEADERS = email.parser.HeaderParser()


def installed(key: Callable[[str], str | None]) -> dict[str, str]:
    """The version of every distribution this interpreter can import, under ``key(its Name)`` (those it maps to
    None left out), sorted: the first on ``sys.path`` for a key, the one imported. A distribution kept without a
    ``Version`` is refused.

    Name and Version are the headers of the metadata file ``importlib.metadata`` reads (``METADATA``, else
    ``PKG-INFO``), read as it reads them, but the headers alone: ``dist.metadata`` parses the whole file, the long
    description too, and ``dist.version`` parses it again (for the toolchain environment's 89 distributions,
    27 ms of CPU against 12 ms)."""
    out: dict[str, str] = {}
    for dist in md.distributions():
        text = dist.read_text("METADATA") or dist.read_text("PKG-INFO") or dist.read_text("") or ""
        headers = _HEADERS.parsestr(text)
        name = headers["Name"]
        k = key(name) if name else None
        if k is None or k in out:
            continue
        if not headers["Version"]:
            raise ToolchainError(f"{dist.locate_file('')}: the installed distribution {name} has no Version in "
                                 f"its metadata (fix: reinstall it)")
        out[k] = headers["Version"]
    return dict(sorted(out.items()))


def package_versions() -> dict[str, str]:
    """The toolchain's distributions (``nvidia-*``, ``cuda-*``) → version, by lower-cased name."""
    return installed(lambda name: name.lower() if name.lower().startswith(("nvidia-", "cuda-")) else None)


def tool_version(path: Path | None, version_text: VersionText, cache: dict | None = None) -> str | None:
    """Release of a tool from its ``--version``; ``cache`` maps path+size+mtime → version."""
    if path is None:
        return None
    if cache is not None:
        try:
            st = path.stat()
        except OSError:
            return None
        key = f"{path}:{st.st_size}:{st.st_mtime_ns}"
        if key not in cache:
            cache[key] = tool_version(path, version_text)
        return cache[key]
    return parse_release(version_text([str(path), "--version"]))


def toolkit_version_at(home: str) -> str | None:
    """Version of the toolkit a CUDA_HOME names, from its version.json (else version.txt); no process."""
    vj = Path(home) / "version.json"
    if vj.is_file():
        try:
            return json.loads(vj.read_text())["cuda"]["version"]
        except (ValueError, KeyError, TypeError):
            pass
    vt = Path(home) / "version.txt"
    if vt.is_file():
        m = re.search(r"(\d+\.\d+\.\d+)", vt.read_text(errors="replace"))
        return m.group(1) if m else None
    return None


def coherence(tools: dict[str, str | None], packages: dict[str, str],
              env: dict[str, str]) -> tuple[str | None, list[ToolchainProblem]]:
    """The shared major.minor and one problem per mismatch or hazard (empty when coherent);
    the pieces are ``records.release``'s."""
    found = release.pieces(tools, packages)
    problems = [ToolchainProblem(kind="tool-missing", subject=name, detail=f"{name} (tool) not found")
                for name, v in found.items() if v is None and name in tools]
    groups = release.by_release({f"{n} (tool)" if n in tools else n: v for n, v in found.items()})
    if len(groups) > 1:
        problems.append(ToolchainProblem(
            kind="mixed-releases", subject="release",
            detail=f"mixed releases ({release.describe_mixed(groups)}): install one release, "
                   f"e.g. pip install 'tileproof[toolchain]'"))
    shared = next(iter(groups)) if len(groups) == 1 else None
    for var in HAZARD_VARS:
        home = env.get(var)
        if home:
            theirs = major_minor(toolkit_version_at(home))
            if theirs != shared:
                problems.append(ToolchainProblem(
                    kind="hazard-var", subject=var,
                    detail=f"{var}={home} names CUDA {theirs or 'unknown'}, not {shared}: tileiras would load "
                           f"its libnvvm and fail with exit 5; unset {var}"))
    return shared, problems


REBUILT: frozenset[InputProblem] = frozenset({"missing", "not-utf8", "too-deep", "too-large"})
"""Refusals of a build/ cache file that only mean its content is not what tileproof wrote: it is rebuilt."""


def read_build_json(path: Path) -> object | None:
    """A JSON file tileproof keeps under build/ (a cache), read through ``safe_read`` as a build
    file: None when it is missing or its content is not what tileproof wrote (the cache is then
    rebuilt); a link out of its folder, a FIFO or a device is one ``InputRefused`` line (fail closed)."""
    try:
        return parse_json(decode(read_file(path, "build"), str(path)), str(path))
    except InputRefused as e:
        if e.kind in REBUILT:
            return None
        raise
    except RecordError:  # not JSON
        return None


def _read_cache(path: Path | None) -> dict:
    data = None if path is None else read_build_json(path)
    return data if isinstance(data, dict) else {}


def _write_cache(path: Path | None, cache: dict) -> None:
    if path is not None and cache != _read_cache(path):
        store.write_atomic(path, json.dumps(cache, indent=1, sort_keys=True))


def discover(system_nvcc: str | None = None, env: dict[str, str] | None = None,
             cache_file: Path | None = None, *, version_text: VersionText) -> Tools:
    """Find the toolchain: pip's by default, a system nvcc only when asked.

    ``cache_file`` keeps tool versions keyed by path, size and mtime, so a warm
    rerun starts no ``--version`` process.
    """
    env = dict(os.environ if env is None else env)
    cache = _read_cache(cache_file)
    if system_nvcc:
        nvcc = Path(system_nvcc).resolve()
        if not nvcc.exists():
            raise ToolchainError(f"--system-nvcc {system_nvcc}: no such file")
        version = tool_version(nvcc, version_text)
        mm = tuple(int(x) for x in (major_minor(version) or "0.0").split("."))
        if mm < MIN_SYSTEM_NVCC:
            raise ToolchainError(
                f"--system-nvcc {system_nvcc}: CUDA {version or 'unknown'} has no tile support; "
                f"need >= {'.'.join(map(str, MIN_SYSTEM_NVCC))} (fix: drop --system-nvcc to use the pip toolchain)"
            )
        bin_dir = nvcc.parent
    else:
        found = pip_bin()
        if found is None:
            raise ToolchainError(
                "the pip tile toolchain (nvidia/cu13/bin/nvcc) is not installed in this interpreter "
                "(fix: pip install 'tileproof[toolchain]', or run nox -s compile)"
            )
        bin_dir = found
    paths: dict[str, Path | None] = {}
    source: Literal["pip", "system"] = "system" if system_nvcc else "pip"
    for name in TOOLS:
        cand = bin_dir / name
        paths[name] = cand if cand.exists() else (Path(w).resolve() if (w := shutil.which(name)) else None)
    versions = {name: tool_version(paths[name], version_text, cache) for name in TOOLS}
    _write_cache(cache_file, cache)
    packages = package_versions() if source == "pip" else {}
    shared, problems = coherence(versions, packages, env)
    facts = Toolchain(
        version=2,
        source=source,
        tools=[ToolVersion(name=n, path=str(paths[n]) if paths[n] else None, version=versions[n]) for n in TOOLS],
        packages=packages,
        major_minor=shared,
        coherent=not problems,
        problems=list[ToolchainProblem | str](problems),  # the field also reads version 1's text
    )
    return Tools(bin=bin_dir, source=source, paths=paths, facts=facts)


def require_coherent(tools: Tools, ignore_env: bool = True) -> None:
    """Refuse with one line when the pieces disagree.

    ``ignore_env``: CUDA_HOME problems are not fatal when children get a clean
    environment (``runner.environment.child_env``), which is what tileproof always does.
    """
    problems = [str(p) for p in tools.facts.problems
                if not (ignore_env and isinstance(p, ToolchainProblem) and p.kind == "hazard-var")]
    if problems:
        raise ToolchainError("tile toolchain is not coherent: " + " | ".join(problems))


def nvvm_version(lib: Path) -> str | None:
    """Release of a ``libnvvm.so`` read from the version banner it embeds."""
    try:
        data = lib.read_bytes()
    except OSError:
        return None
    m = re.search(rb"release (\d+)\.(\d+), V(\d+\.\d+\.\d+)", data)
    return m.group(3).decode() if m else None


CUDA_TILE = "cuda-tile"
"""The cuTile Python distribution (canonical name): its version is a package of the runtime toolchain."""


def cuda_tile_version() -> str | None:
    """The installed cuda-tile's version (``importlib.metadata`` normalises the name), None when absent."""
    try:
        return md.version(CUDA_TILE)
    except md.PackageNotFoundError:
        return None


def runtime_tools(nvcc_version: str | None, version_text: VersionText, env: dict[str, str] | None = None,
                  cache: dict | None = None) -> Toolchain:
    """The toolchain the programs use at run time, found the way cuTile finds it.

    cuTile takes tileiras from the pip packages when they agree, else from
    PATH; ptxas sits beside tileiras and libnvvm at ``../lib``. ``nvcc_version``
    is the nvcc that built the C++ binaries (from their compile record). The
    cuda-tile version is kept among the packages (whatever tileiras is used): the
    claims matrix shows it, Python-side verdicts can differ between cuda-tile
    versions of one CUDA release. It is not a piece of the one-release rule.
    ``cache`` (``tool_version``'s, path+size+mtime → version) lets a caller that asks
    twice start each ``--version`` process once.
    """
    env = dict(os.environ if env is None else env)
    pip = pip_bin()
    packages = package_versions()
    pip_ok = pip is not None and len({major_minor(packages.get(p)) for p in PACKAGES[:3]}) == 1
    on_path = shutil.which("tileiras", path=env.get("PATH"))
    tileiras = pip / "tileiras" if pip is not None and pip_ok else (Path(on_path).resolve() if on_path else None)
    base = tileiras.parent if tileiras else None
    ptxas = base / "ptxas" if base and (base / "ptxas").exists() else None
    nvvm = base.parent / "lib" / "libnvvm.so.4" if base else None
    versions = {
        "tileiras": tool_version(tileiras, version_text, cache),
        "ptxas": tool_version(ptxas, version_text, cache),
        "nvvm": nvvm_version(nvvm) if nvvm and nvvm.exists() else None,
        "nvcc": nvcc_version,
    }
    paths = {"tileiras": tileiras, "ptxas": ptxas, "nvvm": nvvm, "nvcc": None}
    relevant = {k: v for k, v in versions.items() if k != "nvcc" or v is not None}
    shared, problems = coherence(relevant, {}, env)
    used = {k: v for k, v in packages.items() if k in PACKAGES[:3]} if pip_ok else {}
    cuda_tile = cuda_tile_version()
    if cuda_tile is not None:
        used[CUDA_TILE] = cuda_tile
    return Toolchain(
        version=2,
        source="pip" if pip_ok else "system",
        tools=[ToolVersion(name=k, path=str(paths[k]) if paths[k] else None, version=v) for k, v in versions.items()],
        packages=used,
        major_minor=shared,
        coherent=not problems,
        problems=list[ToolchainProblem | str](problems),  # the field also reads version 1's text
    )
