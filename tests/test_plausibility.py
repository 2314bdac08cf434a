"""Signals of a fake GPU, each checked on real records altered as the attack would.

The records are the committed, signed H200 session 20261201T142212Z-session-e8b177c4 (its
PATH and PYTHONPATH point at /tmp/gpu-node/... and /tmp/site2, where the lent machine keeps
its toolchain) and the real nvidia-smi transcript of tests/data/gpu. The pure judge
(``judge.plausibility``) is tested directly; the gate and the audit through a tree.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from pathlib import Path

import pytest

from tileproof.judge import gate, plausibility
from tileproof.records import lessons, parsers, store
from tileproof.records.models import LessonFront, PlausibilityNote, ResultRow, RunRecord, VerifiedRelease
from tileproof.records.trust import runner_keys
from tileproof.records.trust.runner_keys import Verification
from tileproof.records.trust.trust_history import FirstCommit

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data"
SESSION = "20261201T142212Z-session-e8b177c4"
RUNS = ["20261201T142214Z-run-37aa63e2", "20261201T142223Z-run-50e52167", "20261201T142252Z-run-3f340aa3",
        "20261201T142301Z-run-3ee6fa74"]
"""Two Python programs, one more, and a C++ program of that session."""
OTHER_KEY = "f" * 64


def real(run_id: str) -> store.Examined:
    return store.read_record(REPO / "runs" / f"{run_id}.json", runner_keys.load_registry(REPO))


@pytest.fixture(scope="module")
def session() -> list[store.Examined]:
    items = [real(r) for r in RUNS]
    assert all(i.trust == "verified" and i.verification.keyid for i in items)
    return items


def altered(item: store.Examined, *, keyid: str | None = None, days: float = 0, **update) -> store.Examined:
    """The record with fields changed as an attacker (or another runner) would write them, dated
    ``days`` later, vouched for by ``keyid`` (default: the same key) as if signed and intact."""
    rec = item.record
    env = update.pop("env", None)
    environment = rec.environment.model_copy(update={"env": {**rec.environment.env, **env}}) if env else \
        update.pop("environment", rec.environment)
    when = rec.created + timedelta(days=days)
    new = rec.model_copy(update={"run_id": store.new_run_id("run", when), "created": when,
                                 "environment": environment, **update})
    who = Verification("verified", keyid or item.verification.keyid, "test")
    return dataclasses.replace(item, record=new, verification=who)


def smi_clocks(*items: store.Examined, text: str | None = None) -> dict:
    """Every record's nvidia-smi clock, read from the committed transcript (or ``text``)."""
    out = {}
    for i in items:
        t = plausibility.smi_transcript(i.record)
        out[t.path] = parsers.smi_clock(text if text is not None else (REPO / t.path).read_text())
    return out


def kinds(found: dict, run_id: str) -> set[tuple[str, str]]:
    return {(s.kind, s.subject) for s in found.get(run_id, ())}


# --- the real session is judged as it is: its /tmp entries are its runner's baseline ---------


def test_the_real_h200_session_has_no_signal(session):
    env = session[0].record.environment.env
    assert "/tmp/gpu-node/cu13/bin" in env["PATH"]
    assert env["PYTHONPATH"] == "/tmp/site2:/tmp/gpu-node/site"
    assert plausibility.signals(session, smi_clocks(*session)) == {}


# --- each signal on an altered copy --------------------------------------------------------


@pytest.mark.parametrize("var, value, subject", [
    ("PYTHONPATH", "/tmp/shim:/tmp/site2:/tmp/gpu-node/site", "PYTHONPATH=/tmp/shim"),
    ("PATH", "/dev/shm/x/bin:/usr/bin", "PATH=/dev/shm/x/bin"),
    ("PATH", "/work/main/.fake/bin:/usr/local/nvidia/bin", "PATH=/work/main/.fake/bin"),  # inside the checkout
    ("PATH", ":/usr/local/nvidia/bin", "PATH="),  # an empty entry: the working directory
    ("PYTHONPATH", "shim:/tmp/gpu-node/site", "PYTHONPATH=shim"),
])
def test_a_shim_path_is_a_signal(session, var, value, subject):
    shimmed = altered(session[0], days=1, env={var: value})
    found = plausibility.signals([*session, shimmed], smi_clocks(*session))
    assert kinds(found, shimmed.record.run_id) == {("shim-path", subject)}
    assert "not proof" in str(found[shimmed.record.run_id][0])
    assert plausibility.checkout_of(shimmed.record) == "/work/main"


def test_paths_outside_scratch_and_the_checkout_are_no_signal(session):
    moved = altered(session[0], days=1, env={"PATH": "/opt/cuda/bin:/usr/local/nvidia/bin:/usr/bin",
                                              "PYTHONPATH": "/opt/site"})
    assert plausibility.signals([*session, moved], smi_clocks(*session)) == {}


def test_a_replayed_nvidia_smi_transcript_dated_two_days_before_is_a_signal(session):
    text = (DATA / "gpu" / "nvidia-smi.txt").read_text()  # "Sun Nov 29 12:13:39 2026": a real capture
    first = session[0]
    clock = parsers.smi_clock(text)
    assert clock is not None
    assert (first.record.created.replace(tzinfo=None) - clock) > timedelta(days=2)
    found = plausibility.signals(session, smi_clocks(*session, text=text))
    path = first.record.environment.nvidia_smi.path
    assert all(kinds(found, i.record.run_id) == {("smi-clock", path)} for i in session)


@pytest.mark.parametrize("hours", [-11.5, 0, 13.5])
def test_an_nvidia_smi_clock_in_any_time_zone_is_no_signal(session, hours):
    created = session[0].record.created.replace(tzinfo=None) - timedelta(seconds=11) + timedelta(hours=hours)
    text = created.strftime("%a %b %d %H:%M:%S %Y").replace(" 0", "  ", 1) + "\n+---\n"
    assert parsers.smi_clock(text) is not None
    assert plausibility.signals(session, smi_clocks(*session, text=text)) == {}


@pytest.mark.parametrize("which, took", [(0, 0.04), (3, 0.01)])
def test_a_gpu_run_faster_than_its_launch_is_a_signal(session, which, took):
    rec = session[which].record
    step = rec.step.model_copy(update={"duration_s": took})
    fast = altered(session[which], days=1, step=step)
    found = plausibility.signals([*session, fast], smi_clocks(*session))
    assert kinds(found, fast.record.run_id) == {("launch-too-fast", fast.record.run_id)}


def test_a_run_that_found_no_gpu_may_be_fast():
    """The committed no-GPU record of a C++ program took 0.004 s: it names no GPU, so nothing to judge."""
    item = real("20261129T123225Z-run-7155d66e")
    assert item.record.step.duration_s < 0.05
    assert plausibility.too_fast(item.record) == []


def test_host_facts_unlike_the_keys_first_record_are_a_signal(session):
    host = session[0].record.host.model_copy(update={"cpu_count": 2, "release": "6.18.44-fc-v669"})
    moved = altered(session[1], days=1, host=host)
    found = plausibility.signals([*session, moved], smi_clocks(*session))
    assert kinds(found, moved.record.run_id) == {("host-facts", "cpu_count=2"),
                                                  ("host-facts", "release=6.18.44-fc-v669")}
    again = altered(session[1], days=2, host=host)  # a second run of the same fake is no less odd
    assert kinds(plausibility.signals([*session, moved, again], smi_clocks(*session)),
                 again.record.run_id) == kinds(found, moved.record.run_id)


def test_a_gpu_uuid_under_a_second_runner_key_is_a_signal(session):
    copied = altered(session[0], days=1, keyid=OTHER_KEY)
    found = plausibility.signals([*session, copied], smi_clocks(*session))
    uuid = session[0].record.environment.gpu.uuid
    assert kinds(found, copied.record.run_id) == {("gpu-two-hosts", uuid)}
    assert all(i.record.run_id not in found for i in session)


def test_first_is_read_from_history_not_from_the_date_a_signer_wrote(session):
    """A record dated before the whole session but first committed after it (a signer's backdating)
    neither becomes its key's baseline nor the first owner of the GPU: its odd host facts and its
    uuid under another key are signals on it, and the session stays clean (``standing.age``)."""
    committed = [dataclasses.replace(item, first=FirstCommit("a" * 40, 0, item.record.created)) for item in session]
    host = session[0].record.host.model_copy(update={"cpu_count": 2})
    for keyid in (None, OTHER_KEY):
        backdated = altered(session[1], days=-30, host=host, keyid=keyid)
        backdated = dataclasses.replace(backdated, first=FirstCommit("b" * 40, 1, session[-1].record.created))
        found = plausibility.signals([*committed, backdated], smi_clocks(*session))
        assert all(i.record.run_id not in found for i in session), found
        smi = ("smi-clock", plausibility.smi_transcript(backdated.record).path)  # its transcript is 30 days on
        expected = {("host-facts", "cpu_count=2"), smi} if keyid is None else \
            {("gpu-two-hosts", session[0].record.environment.gpu.uuid), smi}
        assert kinds(found, backdated.record.run_id) == expected


def test_records_that_do_not_count_are_not_judged(session):
    shimmed = altered(session[0], days=1, env={"PYTHONPATH": "/tmp/shim"})
    assert plausibility.signals([*session, dataclasses.replace(shimmed, seal="broken")], smi_clocks(*session)) == {}


# --- the decision: blocked until explained or corroborated ---------------------------------


FRONT = lessons.load(REPO, "day79-cutile").front.model_copy(update={
    "status": "draft", "performance": [], "res_usage": None, "plausibility": [],
    "results": [ResultRow(program="kernels/fused.py", check="fused", bound="rtol 1e-4, atol 1e-3")]})
"""The lesson the session's records attest (its program list), with one results row: the fused program's."""
SHIM = {"PYTHONPATH": "/tmp/shim:/tmp/site2:/tmp/gpu-node/site"}


def decide(items: list[store.Examined], front: LessonFront = FRONT) -> gate.Decision:
    """The real decision over these records (today's sources are what the records attest)."""
    today = {s.path: s.sha256 for i in items for s in i.record.sources}
    table = {"fused": gate.Bound(1e-4, 1e-3)}

    def read(rel: str) -> bytes | None:
        return (REPO / rel).read_bytes()

    return gate.decide(front, items, today, table, read, plausibility.signals(items, smi_clocks(*items)))


def test_a_lesson_whose_evidence_has_a_signal_is_not_publishable(session):
    shimmed = altered(session[0], days=1, env=SHIM)
    assert decide([session[0]]).publishable
    decision = decide([session[0], shimmed])
    (blocker,) = decision.blockers
    assert blocker.kind == "plausibility"
    assert blocker.outcome == "shim-path"
    assert "PYTHONPATH=/tmp/shim" in blocker.reason
    assert "not proof" in blocker.reason
    assert "plausibility signal" in decision.lacking()


def test_an_explained_signal_no_longer_blocks(session):
    shimmed = altered(session[0], days=1, env=SHIM)
    note = PlausibilityNote(signal="shim-path", subject="PYTHONPATH=/tmp/shim",
                            explanation="the runner's cupy 14.2 wheel unpacked there by the lead, see ops log 12")
    assert decide([session[0], shimmed], FRONT.model_copy(update={"plausibility": [note]})).publishable
    wrong = note.model_copy(update={"subject": "PYTHONPATH=/tmp/site2"})
    assert not decide([session[0], shimmed], FRONT.model_copy(update={"plausibility": [wrong]})).publishable


def test_a_second_runner_keys_agreeing_record_settles_it(session):
    shimmed = altered(session[0], days=1, env=SHIM)
    other = altered(session[0], days=0.5, keyid=OTHER_KEY,
                    environment=session[0].record.environment.model_copy(update={
                        "gpu": session[0].record.environment.gpu.model_copy(update={"uuid": "GPU-other"})}))
    assert plausibility.signals([session[0], shimmed, other], smi_clocks(session[0])).keys() == \
        {shimmed.record.run_id}
    assert decide([session[0], shimmed, other]).publishable
    failed = dataclasses.replace(other, record=other.record.model_copy(update={"verdict": "failed"}))
    assert not decide([session[0], shimmed, failed]).publishable  # it must agree: a pass of the same program
    assert isinstance(shimmed.record, RunRecord)


def test_a_signal_on_a_record_behind_a_stated_release_blocks(session):
    """``cuda_tile_verified`` names its run records in the front matter: a lesson rests on them as on its rows
    (``gate.with_verified``), whichever release decides the rows."""
    shimmed = altered(session[0], days=1, env=SHIM)
    items = [session[0], shimmed]
    decision = decide([session[0]])
    assert decision.publishable
    assert shimmed.record.run_id not in decision.rests_on
    release = VerifiedRelease(cuda_tile="1.5.0", tileiras=["13.4.92"], tileiras_in_range=True,
                              run_ids=[shimmed.record.run_id])
    flagged = plausibility.signals(items, smi_clocks(*items))
    stated = gate.with_verified(decision, [release], items, flagged, FRONT)
    assert stated.cuda_tile_verified == (release,)
    assert shimmed.record.run_id in stated.rests_on
    assert [(b.kind, b.subject) for b in stated.blockers] == [("plausibility", f"run {shimmed.record.run_id}")]
    note = PlausibilityNote(signal="shim-path", subject="PYTHONPATH=/tmp/shim",
                            explanation="the runner's cupy 14.2 wheel unpacked there by the lead, see ops log 12")
    explained = FRONT.model_copy(update={"plausibility": [note]})
    assert gate.with_verified(decision, [release], items, flagged, explained).publishable


# --- the audit: each unsettled signal is a finding on its record -----------------------------


def test_the_audit_names_each_unexplained_signal_on_its_record(tree):
    from tileproof.gather import audit

    old = next(r for r in store.of_kind(store.load_records(tree), RunRecord) if r.program == "kernels/fused.py")
    env = old.environment.model_copy(update={"env": {"PYTHONPATH": "/tmp/shim"}})
    created = old.created + timedelta(days=1)
    new = old.model_copy(update={"run_id": f"FIXTURE-{created:%Y%m%dT%H%M%SZ}-run-0000000a", "created": created,
                                 "environment": env})
    store.write_record(tree, new)
    (finding,) = [f for f in audit.audit(tree).findings if f.rule.startswith("plausibility-")]
    assert (finding.file, finding.rule) == (f"runs/{new.run_id}.json", "plausibility-shim-path")
    assert "PYTHONPATH=/tmp/shim" in finding.reason
    assert "not proof" in finding.reason
    path = tree / "lessons" / "tile-reduction-spike.md"  # any lesson's note explains the subject
    note = ("plausibility:\n- signal: shim-path\n  subject: PYTHONPATH=/tmp/shim\n"
            "  explanation: cupy for this runner's CUDA 13 driver lives there; see the runner's setup notes\n")
    path.write_text(path.read_text().replace("\nstatus:", "\n" + note + "status:", 1))
    assert not [f for f in audit.audit(tree).findings if f.rule.startswith("plausibility-")]
