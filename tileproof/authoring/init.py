"""``tileproof init``: make a git repository a working course.

It writes what every course starts from, out of the files that ship inside the package (``course/``): a short
``noxfile.py`` that takes tileproof's sessions from the package (``tileproof.sessions``), ``pyproject.toml`` with
the course's settings (``[tool.tileproof]``), the lock ``constraints.txt`` tileproof is tested with, ``kernels/``
(the harness, an empty tolerance table, the references), ``cpp/`` (the harness header), ``schema/`` and
``cpp/tolerances.h`` (generated), ``.gitignore``, a README with the two commands, ``.github/workflows/`` (the
pull-request workflow, the self-hosted GPU evidence workflow), the composite action the pull-request workflow's
CPU check uses (``.github/actions/tileproof/action.yml``, tileproof's own ``action.yml``) and the script both
workflows post their ``tileproof diff`` with (``.ci/sticky-comment``). Then the first key, as docs/keys.md
does it: keygen (outside the repository), the registry ``lessons/runners.yaml`` naming it, committed alone
(commit A), and the trust-root pin ``.ci/trust-root`` naming A, committed alone (commit B); each git command is
shown.

Nothing existing is overwritten: a file that is there already is one line saying it was kept. Run again, it
writes nothing and commits nothing.
"""

from __future__ import annotations

import importlib.resources
import json
import os
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

import yaml

from tileproof import __version__
from tileproof.authoring import templates
from tileproof.authoring.generated import rendered
from tileproof.records import store
from tileproof.records.errors import TileproofError
from tileproof.records.trust import runner_keys, signing
from tileproof.records.trust.trust_pin import PIN, PIN_VERSION, parse_pin
from tileproof.runner.query import Answer, ask

TEMPLATES = "course"
"""The folder of ``tileproof.authoring`` holding the files a course starts from."""
WORKFLOW_INSTALL = "@TILEPROOF@"
"""In the workflow templates: what ``pip install`` takes to get this tileproof."""
TITLE = "@TITLE@"

COPIED = {
    "noxfile.py": "noxfile.py",
    "pyproject.toml": "pyproject.toml",
    "constraints.txt": "constraints.txt",
    ".gitignore": "gitignore",
    "README.md": "README.md",
    "kernels/harness.py": "kernels/harness.py",
    "kernels/tolerances.py": "kernels/tolerances.py",
    "cpp/harness.h": "cpp/harness.h",
    ".github/actionlint.yaml": "actionlint.yaml",
    ".github/actions/tileproof/action.yml": "action.yml",
    ".github/workflows/pull-request.yml": "workflows/pull-request.yml",
    ".github/workflows/gpu-evidence.yml": "workflows/gpu-evidence.yml",
    ".ci/sticky-comment": "sticky-comment",
}
"""Path in the course → its template under ``course/``."""
WORKFLOWS = (".github/workflows/pull-request.yml", ".github/workflows/gpu-evidence.yml")
"""The workflows whose ``@TILEPROOF@`` becomes this release's pip requirement."""
EXECUTABLE = frozenset({".ci/sticky-comment"})
"""The files written executable (the workflows run them)."""

REGISTRY_HEAD = """\
# The runner registry: every public key whose signed records count as evidence.
# Add a key with the entry `tileproof keygen` prints, in its own reviewed commit,
# endorsed by a key listed here with `registry` (tileproof sign-registry). Revoke: set
# revoked_since (UTC instant). Never delete an entry nor take a revocation back.
"""
PIN_HEAD = """\
# The trust root CI pins: lessons/runners.yaml as it stands at the commit below is trusted;
# every later change of it must be endorsed by a key that registry holds with 'registry'
# (tileproof sign-registry). A reviewer who does not take the tree's word passes their own
# (--trust-root COMMIT, or the TILEPROOF_TRUST_ROOT variable in CI).
"""


class InitError(TileproofError):
    """A folder ``init`` cannot make a course of."""


def template(rel: str) -> str:
    """The text of one template shipped in the package."""
    return importlib.resources.files("tileproof.authoring").joinpath(f"{TEMPLATES}/{rel}").read_text(encoding="utf-8")


def course_files(root: Path) -> dict[str, str]:
    """Every file ``init`` writes but the registry and the pin: path in the course → its text."""
    out = {dest: template(src) for dest, src in COPIED.items()}
    out["README.md"] = out["README.md"].replace(TITLE, root.name.replace("-", " ").replace("_", " ").capitalize())
    pip = f"'tileproof=={__version__}'"
    for dest in WORKFLOWS:
        out[dest] = out[dest].replace(WORKFLOW_INSTALL, pip)
    out["kernels/references.py"] = templates.REFERENCES
    out[PRE_COMMIT_CONFIG] = pre_commit_config()
    return out


PRE_COMMIT_CONFIG = ".pre-commit-config.yaml"
PRE_COMMIT_HEAD = """\
# The fast CPU checks before each commit (https://pre-commit.com: pip install pre-commit && pre-commit install):
# tileproof's own hooks (its .pre-commit-hooks.yaml), run by the tileproof release this course was made with.
"""


def pre_commit_config() -> str:
    """The course's ``.pre-commit-config.yaml``: tileproof's hooks (the package's copy of its
    ``.pre-commit-hooks.yaml``) as local hooks that install this release of tileproof."""
    hooks = yaml.safe_load(template("pre-commit-hooks.yaml"))
    for hook in hooks:
        hook["additional_dependencies"] = [f"tileproof=={__version__}"]
    return PRE_COMMIT_HEAD + yaml.safe_dump({"repos": [{"repo": "local", "hooks": hooks}]}, sort_keys=False,
                                            width=4096)


def _git(root: Path, *args: str) -> Answer:
    return ask(["git", "-C", str(root), *args], fix="install git")


def _git_ok(root: Path, *args: str, say: Callable[[str], None] | None = None) -> str:
    """Run git; its stdout. Shown (``$ git ...``) when ``say`` is given; a failure is one line."""
    if say is not None:
        say("  $ git " + " ".join(a if " " not in a else repr(a) for a in args))
    done = _git(root, *args)
    if done.exit_code != 0:
        raise InitError(f"git {args[0]}: {done.last_error()} (fix: see git's message, then tileproof init again)")
    return done.text().strip()


def ensure_repository(root: Path, say: Callable[[str], None]) -> None:
    """``root`` is the top of a git work tree; a folder that is in none gets ``git init``."""
    root.mkdir(parents=True, exist_ok=True)
    top = _git(root, "rev-parse", "--show-toplevel")
    if top.exit_code == 0:
        if Path(top.text().strip()).resolve() != root.resolve():
            raise InitError(f"{root}: inside the git repository {top.text().strip()}, not its top (fix: tileproof "
                            "init at the repository's top folder)")
        return
    _git_ok(root, "init", "-q", say=say)


def write_files(root: Path, say: Callable[[str], None]) -> list[str]:
    """Write every course file that is missing; one line per file, written or kept. The paths written."""
    written = []
    files = course_files(root)
    for rel, text in files.items():
        path = root / rel
        if path.exists() or path.is_symlink():
            say(f"kept {rel} (exists; init overwrites nothing)")
            continue
        store.write_atomic(path, text, mode=0o755 if rel in EXECUTABLE else 0o644)
        written.append(rel)
        say(f"wrote {rel}")
    (root / "lessons").mkdir(exist_ok=True)
    for made, text in rendered(root).items():  # schema/, cpp/tolerances.h, from the files above
        if (root / made).exists():
            if (root / made).read_text(encoding="utf-8", errors="replace") != text:
                say(f"kept {made.as_posix()} (exists, differs from what tileproof schema renders)")
            continue
        store.write_generated(root, made, text)
        written.append(made.as_posix())
        say(f"wrote {made.as_posix()} (generated)")
    return written


def first_key(root: Path, key: Path, owner: str, say: Callable[[str], None]) -> None:
    """Keygen, the registry naming the key (commit A, alone), the pin naming A (commit B, alone)."""
    registry = root / runner_keys.REGISTRY
    if registry.exists():
        say(f"kept {runner_keys.REGISTRY.as_posix()} (exists: the course has its keys; docs/keys.md adds one)")
        if not (root / PIN).exists():
            say(f"no {PIN.as_posix()}: pin the commit whose registry you reviewed there (docs/keys.md)")
        return
    if (root / PIN).exists():
        raise InitError(f"{PIN.as_posix()}: exists without {runner_keys.REGISTRY.as_posix()} (fix: restore the "
                        "registry it pins from git, or remove the pin and run tileproof init again)")
    if _git(root, "var", "GIT_COMMITTER_IDENT").exit_code != 0:
        raise InitError("git has no name and email to commit the registry with (fix: git config user.name NAME; "
                        "git config user.email EMAIL; then tileproof init again)")
    signing.refuse_inside(key, root)
    if key.exists():
        public = signing.load_signer(key, root).public
        say(f"key: {key} (exists; registered as it is)")
    else:
        public = signing.make_key(key).public_key()
        say(f"key: {key} (new, mode 600; keep it off the repository)")
    entry = runner_keys.RunnerKey(owner=owner, keyid=signing.keyid_of(public),
                                  public_key=signing.raw_public(public).hex(), may_sign=list(runner_keys.SIGN_KINDS),
                                  added=datetime.now(timezone.utc).date())
    body = yaml.safe_dump({"registry_version": runner_keys.REGISTRY_VERSION, "policy": "signed-only",
                           "runners": [entry.model_dump(mode="json", exclude_none=True, exclude_defaults=True)]},
                          sort_keys=False)
    text = REGISTRY_HEAD + body
    runner_keys.parse_registry(text, runner_keys.REGISTRY.as_posix())  # what the audit will read
    store.write_atomic(registry, text)
    say(f"wrote {runner_keys.REGISTRY.as_posix()}: key {entry.keyid[:16]} may sign {', '.join(entry.may_sign)}")
    reg = runner_keys.REGISTRY.as_posix()
    say("commit A, the registry alone (docs/keys.md):")
    _git_ok(root, "add", "--", reg, say=say)
    _git_ok(root, "commit", "-q", "--only", "-m", f"runner registry: the course's first key {entry.keyid[:16]}",
            "--", reg, say=say)
    commit_a = _git_ok(root, "rev-parse", "HEAD")
    why = f"the course's first registry (key {entry.keyid[:16]}, {owner}), written by tileproof init"
    pin_text = PIN_HEAD + f"pin_version: {PIN_VERSION}\ncommit: '{commit_a}'\nwhy: {json.dumps(why)}\n"
    parse_pin(pin_text, PIN.as_posix())  # what the audit will read
    store.write_atomic(root / PIN, pin_text)
    say(f"commit B, the pin {PIN.as_posix()} -> {commit_a} alone:")
    _git_ok(root, "add", "--", PIN.as_posix(), say=say)
    _git_ok(root, "commit", "-q", "--only", "-m", f"trust root: pin {commit_a[:12]}, the course's first registry",
            "--", PIN.as_posix(), say=say)
    say(f"sign records with the key: export {signing.KEY_ENV}={key}")


def init(root: Path, key: Path | None, owner: str | None, say: Callable[[str], None] = print) -> list[str]:
    """Make ``root`` a course; the paths written (the registry and the pin are committed, the rest left for the
    author to commit)."""
    root = Path(root).resolve()
    ensure_repository(root, say)
    written = write_files(root, say)
    key_path = (key or Path(os.environ.get(signing.KEY_ENV) or signing.DEFAULT_KEY)).expanduser()
    first_key(root, key_path, owner or f"{os.environ.get('USER', 'author')}: {root.name}", say)
    return written
