"""The trust root a reviewer pins: a commit whose runner registry is trusted as it stands.

The registry in the tree (``lessons/runners.yaml``) says which keys count, and a
committer can change it. What a reviewer holds outside the tree is a *trust root*:
``tileproof audit --trust-root VALUE`` (or ``$TILEPROOF_TRUST_ROOT``, which CI sets from
its own configuration) where VALUE is a commit (its registry is trusted as it stands;
every later change must be signed by a key held before it), a pin file in the format
below, or a registry file (the first commit whose registry has exactly these bytes).
Without either, the pin committed as CI configuration, ``.ci/trust-root`` (outside
``runs/`` and ``evidence/``: moving it is a reviewed change, and the audit lists every
move), is used, and the audit says so. ``judge.trust.trust_root`` applies it; docs/keys.md is the
procedure to move it when every registered key is lost.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import Field, ValidationError

from tileproof.records import models
from tileproof.records.errors import RecordError
from tileproof.records.safe_read import decode, parse_yaml
from tileproof.records.schemas import schema
from tileproof.records.trust.runner_keys import read_optional

PIN = Path(".ci") / "trust-root"
"""The pin committed as CI configuration (a YAML file; ``TrustPin``)."""
PIN_ENV = "TILEPROOF_TRUST_ROOT"
"""Where CI puts the trust root it keeps outside the tree (a commit, or a path to a pin or registry file)."""
PIN_VERSION = 1


@schema("trust-pin", PIN_VERSION)
class TrustPin(models.Model):
    """``.ci/trust-root``: the commit whose ``lessons/runners.yaml`` CI trusts as it stands."""

    pin_version: Literal[1]
    commit: str = Field(pattern=r"^([0-9a-f]{40}|[0-9a-f]{64})$")
    """The full commit id (``git rev-parse``): its registry is the root; every later registry change must
    be signed by a key that registry chain held before the change."""
    why: str = Field(min_length=1)
    """Who moved the pin here and why (a root reset after every registered key was lost, say)."""


def parse_pin(text: str, shown: str) -> TrustPin:
    """A pin file's text as the model; one ``RecordError`` naming ``shown`` otherwise."""
    try:
        raw = parse_yaml(text, shown)
    except yaml.YAMLError as e:
        raise RecordError(shown, "", f"not valid YAML ({str(e).splitlines()[0]})", "restore it from git") from None
    try:
        return TrustPin.model_validate(raw)
    except ValidationError as e:
        err = e.errors()[0]
        raise RecordError(shown, ".".join(str(p) for p in err["loc"]), err["msg"],
                          f"write pin_version: {PIN_VERSION}, commit: '<full commit id, quoted>', why: <one line> "
                          "(docs/keys.md)") from None


def load_pin(root: Path) -> TrustPin | None:
    """The tree's own pin (``.ci/trust-root``), or None when it has none."""
    data = read_optional(root, PIN)
    return None if data is None else parse_pin(decode(data, PIN.as_posix()), PIN.as_posix())
