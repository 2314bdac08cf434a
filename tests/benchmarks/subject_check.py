"""An independent check of every committed signed record: no tileproof code, only git, hashlib,
PyNaCl (ed25519), PyYAML (the registry) and jsonschema (against schema/).

    python tests/benchmarks/subject_check.py [ROOT] [--schema DIR]

(``--schema``: the schema folder, default ROOT/schema.)

For every record committed under runs/ at HEAD:

- an unsigned record is counted (written before signing existed) and validated against its
  kind's schema;
- a signed one is a DSSE envelope: it must validate against schema/signed-record.v1.schema.json,
  its statement against the schema of its predicate type (record-statement.v1 or .v2), the
  record it carries against its kind's schema, and one signature must verify (PyNaCl, over a
  PAE built here from the DSSE spec) with a key lessons/runners.yaml lists under that keyid;
- each statement subject is checked against the tree, by the rule below, and counted as a
  match, a mismatch (or missing), or "not committed" when it is a build output under build/,
  which .gitignore keeps out of every tree (compile records attest the artifacts they built).

The rule for subjects. A generic in-toto verifier takes a statement's subjects as
what the step produced and checks each against the files it has.

- Statements of predicate type ``urn:tileproof:record:v2`` (written from this change on) list
  only products as subjects (transcripts under evidence/, artifacts under build/): each is
  checked at HEAD. Their materials (sources, lessons, the binary a run ran) are inputs that a
  later commit may change; they are checked, as v1 inputs are below, at the commit the record
  says it ran from, and reported apart.
- Statements of predicate type ``urn:tileproof:record:v1`` (the committed records signed before
  this change, never rewritten) list inputs as subjects too. A subject under evidence/ (or
  build/) is a product: checked at HEAD (the history check keeps every committed transcript's
  first bytes).
  Any other subject is an input as it was when the record was made: checked in the tree of the
  commit the record names (``git.commit``, when it says the tree was clean). A record made on a
  dirty tree names no commit that holds its inputs; they are checked in the tree of the commit
  that first added the record (whoever committed it committed the tree it ran from with it), in
  a bucket of their own; a mismatch there counts as one.

The check at the commit that first added each record, and the naive check of every subject at
HEAD, are printed too (informational): publish rewrites a lesson in the same commit that adds
the records behind it, so the lesson a v1 statement names is already rewritten there.

Exit 0 when every record validates, every signature verifies and the rule finds no mismatch.
Committed output: tests/benchmarks/subject_check.txt.
"""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import jsonschema
import yaml
from nacl.exceptions import BadSignatureError
from nacl.signing import VerifyKey

V1 = "urn:tileproof:record:v1"
V2 = "urn:tileproof:record:v2"


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True).stdout


class Blobs:
    """sha256 of ``path`` in commit ``rev`` (None when absent), by one ``git cat-file --batch`` per lookup set."""

    def __init__(self, root: Path):
        self.root = root
        self.memo: dict[tuple[str, str], str | None] = {}

    def want(self, pairs: set[tuple[str, str]]) -> None:
        todo = sorted(p for p in pairs if p not in self.memo)
        if not todo:
            return
        out = subprocess.run(["git", "-C", str(self.root), "cat-file", "--batch"], capture_output=True, check=True,
                             input="".join(f"{rev}:{path}\n" for rev, path in todo).encode()).stdout
        at = 0
        for pair in todo:
            end = out.index(b"\n", at)
            head = out[at:end].split()
            at = end + 1
            if len(head) == 3 and head[1] == b"blob":
                size = int(head[2])
                self.memo[pair] = hashlib.sha256(out[at:at + size]).hexdigest()
                at += size + 1
            else:
                self.memo[pair] = None

    def sha256(self, rev: str, path: str) -> str | None:
        return self.memo[(rev, path)]


def pae(payload_type: str, body: bytes) -> bytes:
    t = payload_type.encode()
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(body), body)


def schema(folder: Path, name: str) -> dict:
    return json.loads((folder / name).read_text())


def record_schema(folder: Path, record: dict) -> dict:
    found = sorted(folder.glob(f"{record['kind']}-record.v*.schema.json"))
    return json.loads(found[-1].read_text())


_VALIDATORS: dict[str, jsonschema.protocols.Validator] = {}


def validate(instance: dict, against: dict) -> None:
    """``jsonschema.validate``, each schema checked and its validator built once (not once per record)."""
    key = json.dumps(against, sort_keys=True)
    if key not in _VALIDATORS:
        cls = jsonschema.validators.validator_for(against)
        cls.check_schema(against)
        _VALIDATORS[key] = cls(against)
    error = jsonschema.exceptions.best_match(_VALIDATORS[key].iter_errors(instance))
    if error is not None:
        raise error


def main(root: Path, schemas: Path | None = None) -> int:
    root = root.resolve()
    folder = schemas or root / "schema"
    head = git(root, "rev-parse", "HEAD").strip()
    committed = [p for p in git(root, "ls-files", "-z", "runs").split("\0") if p.endswith(".json")]
    registry = yaml.safe_load(git(root, "show", f"{head}:lessons/runners.yaml"))
    keys = {r["keyid"]: bytes.fromhex(r["public_key"]) for r in registry.get("runners") or []}
    first_added = {}
    for line in git(root, "log", "--reverse", "--diff-filter=A", "--format=%x01%H", "--name-only", "--", "runs"
                    ).splitlines():
        if line.startswith("\x01"):
            commit = line[1:]
        elif line and line not in first_added:
            first_added[line] = commit
    envelope_schema, statements = schema(folder, "signed-record.v1.schema.json"), {
        V1: schema(folder, "record-statement.v1.schema.json"), V2: schema(folder, "record-statement.v2.schema.json")}
    counts: Counter[str] = Counter()
    problems: list[str] = []
    checks: list[tuple[str, str, str, str, str]] = []  # (record, rule bucket, rev, path, sha256)
    ignored = set(git(root, "ls-files", "--others", "--ignored", "--exclude-standard", "--directory").split())

    def build_output(path: str) -> bool:
        return path.startswith("build/") or any(path.startswith(i) for i in ignored)

    for name in committed:
        raw = json.loads((root / name).read_text())
        if "payloadType" not in raw:
            counts["unsigned"] += 1
            validate(raw, record_schema(folder, raw))
            counts["validated"] += 1
            continue
        counts["signed"] += 1
        validate(raw, envelope_schema)
        body = base64.b64decode(raw["payload"], validate=True)
        statement = json.loads(body)
        kind = statement["predicateType"]
        validate(statement, statements[kind])
        record = statement["predicate"] if kind == V1 else statement["predicate"]["record"]
        validate(record, record_schema(folder, record))
        counts["validated"] += 1
        verified = False
        for sig in raw["signatures"]:
            public = keys.get(sig["keyid"])
            if public is None or hashlib.sha256(public).hexdigest() != sig["keyid"]:
                continue
            try:
                VerifyKey(public).verify(pae(raw["payloadType"], body), base64.b64decode(sig["sig"]))
                verified = True
            except BadSignatureError:
                pass
        counts["signature verified" if verified else "signature NOT verified"] += 1
        if not verified:
            problems.append(f"{name}: no signature verifies with a key lessons/runners.yaml lists")
        counts[f"statements {kind}"] += 1
        ran_at = record["git"]["commit"] if not record["git"]["dirty"] else None
        produced = ("evidence/", "build/")
        inputs = [] if kind == V2 else [s for s in statement["subject"] if not s["name"].startswith(produced)]
        products = statement["subject"] if kind == V2 else [s for s in statement["subject"]
                                                             if s["name"].startswith(produced)]
        materials = statement["predicate"]["materials"] if kind == V2 else []
        for s in products:
            checks.append((name, "product at HEAD", head, s["name"], s["digest"]["sha256"]))
        where = (("at the commit it ran from", ran_at) if ran_at else
                 ("of a record made on a dirty tree, at the commit that first added it", first_added[name]))
        for s in inputs:
            checks.append((name, f"v1 input {where[0]}", where[1], s["name"], s["digest"]["sha256"]))
        for s in materials:
            checks.append((name, f"v2 material {where[0]}", where[1], s["name"], s["digest"]["sha256"]))
        for s in statement["subject"]:
            checks.append((name, "(informational) every subject at HEAD", head, s["name"], s["digest"]["sha256"]))
            checks.append((name, "(informational) every subject at the commit that first added the record",
                           first_added[name], s["name"], s["digest"]["sha256"]))

    blobs = Blobs(root)
    blobs.want({(rev, path) for _n, _b, rev, path, _s in checks})
    tally: dict[str, Counter[str]] = {}
    differing: dict[str, Counter[str]] = {}
    for name, bucket, rev, path, sha in checks:
        t = tally.setdefault(bucket, Counter())
        if build_output(path):
            t["not committed (build output)"] += 1
        elif blobs.sha256(rev, path) == sha:
            t["match"] += 1
        else:
            t["MISMATCH"] += 1
            differing.setdefault(bucket, Counter())[path] += 1
            if not bucket.startswith("(informational)"):
                problems.append(f"{name}: {bucket}: {path} at {rev[:12]} is not the sha256 the statement names")
    print(f"tree: {root.name} at {head[:12]}; {len(committed)} committed records: " +
          ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    for bucket in sorted(tally, key=lambda b: (b.startswith("("), b)):
        print(f"  {bucket}: " + ", ".join(f"{k} {v}" for k, v in sorted(tally[bucket].items())))
        if bucket in differing:
            print("    differing: " + ", ".join(f"{p} ({n} records)" for p, n in sorted(differing[bucket].items())))
    for p in problems:
        print(f"  {p}")
    mismatches = sum(t["MISMATCH"] for b, t in tally.items() if not b.startswith("("))
    print(f"subject check: {mismatches} mismatches by the rule, {len(problems) - mismatches} other problems")
    return 0 if not problems else 1


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", nargs="?", type=Path, default=Path(__file__).resolve().parents[2])
    parser.add_argument("--schema", type=Path, default=None)
    args = parser.parse_args()
    sys.exit(main(args.root, args.schema))
