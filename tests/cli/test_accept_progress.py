"""`placet accept`'s progress people can read (placet.cli.accept_progress): on a terminal
one live line (ops, bytes, rate, time left, the op running) redrawn in place and a
summary, not a line per op; without a terminal a plain line every few seconds and the
summary, a line only for an op that did not end done (every op with --verbose); the
figures are the core's (`placet.executor.progress.Tracker`), inert and cut to the width.

The end-to-end tests run the real `placet accept --yes` (allow_yes in config.toml,
transfers = 4) on a sync planned by the sync service, against a local-folder remote; the
terminal one on a real pseudo-terminal.
"""

from __future__ import annotations

import io
import os
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from placet.cli import accept_progress
from placet.cli.accept_progress import RunProgress, StepProgress
from placet.executor import ProgressEvent
from placet.executor.progress import Tracker
from placet.store import OpResultRecord, ProposalRecord
from placet.sync.propose import propose_sync
from placet.sync.service import SyncService
from tests.support.rig import PLACET, Rig, placet_cli, write_config
from tests.support.terminal import run_on_pty

N = 300


@pytest.fixture
def pooled_rig(local_rig: Callable[..., Rig]) -> Rig:
    """A rig whose transfers run 4 at a time, in process and in `placet accept --yes`."""
    r = local_rig(transfers=4)
    write_config(r.settings, drive=r.drive.spec, allow_yes=True, transfers=4)
    return r


def _sync_of_files(rig: Rig, n: int = N) -> ProposalRecord:
    for i in range(n):
        rig.write(f"d{i // 100}/f{i:03d}.bin", os.urandom(2_000 + i))
    svc = SyncService(rig.store, rig.settings)
    plan = svc.make_plan(
        rig.ctx, svc.folder(rig.ctx, "", None), "", include_hidden=False, allow_empty_side=False
    )
    rec, created = propose_sync(svc, rig.ctx, plan_id=plan.id, decisions={}, reason="progress")
    assert created and rig.store.op_count(rec.id) == n + n // 100  # the files, their folders
    return rec


RESULT = re.compile(r"#\d+ (done|already_done|stale|failed)")


def test_on_a_terminal_accept_shows_one_live_line_and_a_summary(pooled_rig: Rig) -> None:
    rec = _sync_of_files(pooled_rig)
    ops = N + N // 100
    argv = [str(PLACET), "accept", str(rec.id), "--yes"]
    rc, out = run_on_pty(argv, dict(os.environ), 120, cols=90)
    assert rc == 0, out[-2000:]
    assert pooled_rig.store.get(rec.id).status == "succeeded"
    run = out[out.index("request hash") :]  # what was printed once the ops ran
    assert not RESULT.search(run), run[:2000]  # no line per op that ended done
    draws = re.findall(r"\r([^\r\n\x1b]*)\x1b\[K", run)  # each redraw: "\r<line>\x1b[K"
    assert draws and all(len(d) <= 89 for d in draws), draws[-3:]
    assert re.match(rf"\[#+\] {ops}/{ops} ops · ", draws[-1]), draws[-1]
    assert "(100%)" in draws[-1]
    assert any(" · now d" in d for d in draws), draws[:5]  # the op running, by name
    assert re.search(rf"proposal {rec.id} succeeded: {ops} done \(.+ in \d+", run)
    assert run.count("\n") < 20, run  # the live line, the summary: not one line per op


def test_without_a_terminal_only_ops_not_done_get_a_line(pooled_rig: Rig) -> None:
    assert pooled_rig.remote_dir is not None
    rec = _sync_of_files(pooled_rig)
    time.sleep(0.01)
    edited = pooled_rig.write("d1/f150.bin", b"edited after the plan")  # stale when it runs
    r = placet_cli("accept", str(rec.id), "--yes", env=dict(os.environ))
    assert r.returncode == 1, r.stderr[-2000:]  # an op failed (stale)
    lines = r.stderr.splitlines()
    told = [ln for ln in lines if RESULT.search(ln)]
    assert len(told) == 1 and re.match(r"^  \[\d+/\d+\] #\d+ stale: d1/f150\.bin: ", told[0])
    assert not (pooled_rig.remote_dir / "d1" / "f150.bin").exists() and edited.exists()
    ops = N + N // 100
    assert re.match(rf"{ops}/{ops} ops · .* · 1 not done", lines[-1]), lines[-1]
    for out in (r.stdout, r.stderr):
        assert "\x1b" not in out and "\r" not in out and "\x9b" not in out
    assert f"proposal {rec.id} failed: {ops - 1} done, 1 stale (" in r.stdout


def test_verbose_prints_every_op(pooled_rig: Rig) -> None:
    rec = _sync_of_files(pooled_rig, 100)
    r = placet_cli("accept", str(rec.id), "--yes", "--verbose", env=dict(os.environ))
    assert r.returncode == 0, r.stderr[-2000:]
    counts = [int(m) for m in re.findall(r"^  \[(\d+)/101\] #\d+ done: ", r.stderr, re.M)]
    assert counts == list(range(1, 102)), r.stderr[-2000:]  # numbered by ops ended


# --- the figures and the redraws, without a transfer ------------------------------------


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _result(index: int, outcome: str) -> OpResultRecord:
    op = {"index": index, "kind": "upload", "remote_path": f"f{index}"}
    return OpResultRecord(
        proposal_id=1, attempt=1, op_index=index, op=op, outcome=outcome,
        detail={"message": "changed since"}, recorded_at=datetime.now(UTC),
    )  # fmt: skip


def test_the_figures_say_rate_time_left_and_the_op_running_inert_and_cut() -> None:
    clock = _Clock()
    t = Tracker(clock)
    assert t.figures() is None
    t(ProgressEvent(0, 10, 0, 10 * 2**20, ops_done=0, in_flight=(0,), current="a.txt"))
    first = t.figures()
    assert first is not None and first.rate is None and first.seconds_left is None
    assert first.line() == "0/10 ops · 0 B/10.0 MiB (0%) · now a.txt"
    clock.now += 2.0
    evil = "evil\x1b[2J" + "\u5b57" * 40
    t(ProgressEvent(3, 10, 2 * 2**20, 10 * 2**20, ops_done=2, in_flight=(3,), current=evil))
    f = t.figures()
    assert f is not None and f.rate == 2**20  # 2 MiB in 2 s
    assert f.seconds_left == 8.0  # the larger: 8 ops at 1 op/s (8 MiB at 1 MiB/s is 8 s too)
    line = f.line()
    assert line.startswith("2/10 ops · 2.0 MiB/10.0 MiB (20%) · 1.0 MiB/s · 8s left · now ")
    assert "evil\\x1b[2J" in line and "\x1b" not in line  # the name is inert
    cut = f.line(60)
    assert cut.endswith("...") and sum(2 if c == "\u5b57" else 1 for c in cut) <= 60
    assert f.to_dict()["line"] == line and f.to_dict()["current"] == f.current
    clock.now += 10.0
    t(ProgressEvent(5, 10, 3 * 2**20, 10 * 2**20, _result(5, "stale"), ops_done=3))
    later = t.figures()
    assert later is not None and later.not_done == 1 and "1 not done" in later.line()
    assert later.current is None  # nothing in flight


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_terminal_redraws_are_rate_limited_and_the_log_gets_no_control_sequence() -> None:
    clock = _Clock()
    tty, log = _Tty(), io.StringIO()
    shows = [RunProgress(tty, clock=clock), RunProgress(log, clock=clock)]
    for k in range(20_000):  # 20 s of events, one a millisecond
        clock.now += 0.001
        r = _result(k, "stale" if k == 7_000 else "done") if k % 1000 == 0 else None
        ev = ProgressEvent(k, 20_000, k, 20_000, r, ops_done=k // 1000,
                           in_flight=(k,), current="\x1b]52;c;cHduZWQ=\x07")  # fmt: skip
        for show in shows:
            show(ev)
    for show in shows:
        assert show.finish() is not None
    screen = tty.getvalue()
    redraws = screen.count("\r") - screen.count("\r\x1b[K")  # the clears before a result
    assert 150 <= redraws <= 20 / 0.1 + 2  # at most 10 a second, and the last one
    assert "\x07" not in screen and "\\x1b]52;c;cHduZWQ=\\x07" in screen
    assert screen.endswith("\x1b[K\n") and screen.count("#7000 stale") == 1
    assert "done: " not in screen  # ops that ended done get no line
    plain = log.getvalue()
    assert "\x1b" not in plain and "\r" not in plain
    lines = plain.splitlines()
    assert 4 <= len(lines) <= 20 / 5.0 + 3  # a line every 5 s, the stale op, the last line
    assert [ln for ln in lines if "#" in ln] == ["  [7/20000] #7000 stale: f7000: changed since"]


def test_a_long_step_before_the_transfers_shows_its_progress(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Reading and flagging a big sync's ops: nothing for a quick step; past the quiet
    time, `done/total ops` (a plain line at most every few seconds without a terminal)
    and a last line with the time taken."""
    quick = io.StringIO()
    step = StepProgress("reading the ops", quick)
    step(1000, 100_000)
    step.done(100_000)
    assert quick.getvalue() == ""  # ended within the quiet time: silent

    monkeypatch.setattr(accept_progress, "PHASE_QUIET", 0.0)
    out = io.StringIO()
    step = StepProgress("reading the ops", out)
    for n in range(1000, 100_001, 1000):
        step(n, 100_000)
    step.done(100_000)
    lines = out.getvalue().splitlines()
    assert lines[0] == "reading the ops: 1,000/100,000 ops"
    assert len(lines) == 2 and re.fullmatch(r"reading the ops: 100,000 ops in \d+\.\d s", lines[1])
    assert "\x1b" not in out.getvalue()
