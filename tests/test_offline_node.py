"""The offline GPU-node path (docs/install.md, "Without network"): ``nox --no-venv -s run-gpu`` runs
``python -m tileproof`` from the checkout, with the node's packages on PYTHONPATH and tileproof itself
installed nowhere. What that path records must be what the audit accepts.

The node is rebuilt here without a GPU: the suite's own interpreter outside its virtual environment,
the suite's packages (tileproof's distribution left out) on PYTHONPATH, and a copy of the package as the
checkout, beside the ``tileproof.egg-info`` setuptools leaves in a checkout it once built. The session's
recording code (``runner.capture``: pip freeze, the GPU probe, the environment) runs there in a process
of its own, exactly as ``tileproof run`` calls it, and its record is read back and judged by the audit's
rule (``judge.audit.rules.packages``) against the pip freeze transcript it wrote.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from conftest import REPO, git_commit_all

from tileproof.judge.audit.rules.packages import freeze_names, packages_issues
from tileproof.records.models import Environment
from tileproof.records.parsers import parse_pip_freeze

RECORD = """\
import sys
from pathlib import Path

from tileproof.records import models as m
from tileproof.runner import capture

root, sid = Path(sys.argv[1]), sys.argv[2]
gpu, frozen = capture.session_start(root, sid, 0)  # as tileproof run starts every session
toolchain = m.Toolchain(source="pip", tools=[], packages={}, major_minor=None, coherent=False, problems=[])
env = capture.environment(root, sid, gpu, frozen, toolchain, capture.env_allowlisted())
print(env.model_dump_json())
"""

SESSION = "20261201T120000Z-session-0000beef"


def node_site(tmp_path: Path) -> Path:
    """The node's packages: every entry of the suite's site-packages except tileproof's own distribution and
    its editable-install hook, linked into one folder for PYTHONPATH (where no .pth file is read)."""
    site = Path(sysconfig.get_paths()["purelib"])
    out = tmp_path / "site"
    out.mkdir()
    for entry in site.iterdir():
        if entry.name.lower().startswith(("tileproof", "__editable__", "_tileproof")):
            continue
        (out / entry.name).symlink_to(entry)
    return out


def checkout(tmp_path: Path) -> Path:
    """A checkout holding the package, and the egg-info a setuptools build leaves beside it, in git."""
    root = tmp_path / "checkout"
    shutil.copytree(REPO / "tileproof", root / "tileproof", ignore=shutil.ignore_patterns("__pycache__"))
    (root / "tileproof.egg-info").mkdir()
    (root / "tileproof.egg-info" / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: tileproof\nVersion: 0.1.0\n")
    (root / ".gitignore").write_text("*.egg-info/\nevidence/\n")
    subprocess.run(["git", "init", "-q", str(root)], check=True, capture_output=True)
    git_commit_all(root, "the node's checkout")
    return root


@pytest.fixture
def node(tmp_path):
    if sys.prefix == sys.base_prefix:
        pytest.skip("needs the suite to run in a virtual environment: the node's interpreter is its base, "
                    "where tileproof must not be installed")
    if shutil.which("git") is None:
        pytest.skip("needs git (the checkout's commit is what the record names)")
    return checkout(tmp_path), node_site(tmp_path)


def test_the_offline_node_path_records_what_the_audit_accepts(node):
    root, site = node
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONHOME")}
    env["PYTHONPATH"] = str(site)
    env["PATH"] = f"{Path(sys._base_executable).parent}{os.pathsep}{env.get('PATH', '')}"
    done = subprocess.run([sys._base_executable, "-c", RECORD, str(root), SESSION], cwd=root, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    environment = Environment.model_validate_json(done.stdout)
    freeze_text = (root / environment.pip_freeze.path).read_text()
    assert "numpy==" in freeze_text.replace("numpy ==", "numpy==") or "pydantic==" in freeze_text, freeze_text

    # What the audit's packages rule says about this record against its own pip freeze transcript.
    assert packages_issues(environment, parse_pip_freeze(freeze_text), freeze_names(freeze_text)) == []

    # The record names the tileproof that ran by its source identity, not as an installed package.
    origin = environment.tileproof
    head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert origin is not None
    assert origin.kind == "checkout"
    assert origin.commit == head
    assert origin.version == "0.1.0"
    assert "tileproof" not in environment.packages
    listing = subprocess.run([sys._base_executable, "-c", "import sys, json; from tileproof.runner import capture; "
                              "from pathlib import Path; print(capture.package_digest(Path(sys.argv[1])))",
                              str(root / "tileproof")], cwd=root, env=env, capture_output=True, text=True)
    assert origin.sources_sha256 == listing.stdout.strip()
    assert json.loads(done.stdout)["environment_version"] == 3


def test_an_installed_tileproof_is_recorded_as_the_distribution_pip_freeze_lists():
    """The suite's own interpreter has tileproof installed (editable, by nox): recorded as a distribution,
    listed among the packages like any other."""
    from tileproof.runner.capture import installed_packages, tileproof_origin

    origin = tileproof_origin()
    assert origin.kind == "distribution"
    assert origin.commit is None
    assert installed_packages().get("tileproof") == origin.version
