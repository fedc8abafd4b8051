"""`placet accept`'s progress while a sync's transfers run several at a time: op results
numbered by ops ended (never the lowest op in flight), bytes of total with a rate, the
files in flight by inert name cut to the terminal width; plain lines without a terminal,
an updating line (at most 10 redraws a second) on one.

The end-to-end tests run the real `placet accept --yes` (allow_yes in config.toml,
transfers = 4) on a sync planned by the sync service, against a local-folder remote.
"""

from __future__ import annotations

import io
import os
import re
import time
from collections.abc import Callable

import pytest

from placet.cli import accept as accept_cli
from placet.cli.accept import StepProgress, _Progress, status_line
from placet.executor import ProgressEvent
from placet.schema import Op
from placet.store import ProposalRecord
from placet.sync.propose import propose_sync
from placet.sync.service import SyncService
from tests.support.rig import PLACET, Rig, placet_cli, write_config
from tests.support.terminal import run_on_pty

N = 20


@pytest.fixture
def pooled_rig(local_rig: Callable[..., Rig]) -> Rig:
    """A rig whose transfers run 4 at a time, in process and in `placet accept --yes`."""
    r = local_rig(transfers=4)
    write_config(r.settings, drive=r.drive.spec, allow_yes=True, transfers=4)
    return r


def _sync_of_files(rig: Rig, n: int = N) -> ProposalRecord:
    for i in range(n):
        rig.write(f"f{i:02d}.bin", os.urandom(20_000 + i))
    svc = SyncService(rig.store, rig.settings)
    plan = svc.make_plan(
        rig.ctx, svc.folder(rig.ctx, "", None), "", include_hidden=False, allow_empty_side=False
    )
    rec, created = propose_sync(svc, rig.ctx, plan_id=plan.id, decisions={}, reason="progress")
    assert created and rig.store.op_count(rec.id) == n
    return rec


def test_without_a_terminal_results_count_ops_ended_up_to_the_total(pooled_rig: Rig) -> None:
    assert pooled_rig.remote_dir is not None
    rec = _sync_of_files(pooled_rig)
    r = placet_cli("accept", str(rec.id), "--yes", env=dict(os.environ))
    assert r.returncode == 0, r.stderr
    assert pooled_rig.store.get(rec.id).status == "succeeded"
    assert len(list(pooled_rig.remote_dir.glob("f*.bin"))) == N
    result = rf"^  \[(\d+)/{N}\] #\d+ done: f\d\d\.bin"
    counts = [int(m) for m in re.findall(result, r.stderr, re.M)]
    assert counts == list(range(1, N + 1)), r.stderr
    lines = r.stderr.splitlines()
    assert lines[-1].startswith(f"{N}/{N} ops ended, ")
    total = sum(20_000 + i for i in range(N))
    assert f"/{total / 1024:.1f} KiB (100%)" in lines[-1]
    for out in (r.stdout, r.stderr):
        assert "\x1b" not in out and "\r" not in out and "\x9b" not in out
    assert f"proposal {rec.id} succeeded: {N} done" in r.stdout


def test_on_a_terminal_the_last_status_says_all_ops_ended_within_the_width(pooled_rig: Rig) -> None:
    rec = _sync_of_files(pooled_rig)
    argv = [str(PLACET), "accept", str(rec.id), "--yes"]
    rc, out = run_on_pty(argv, dict(os.environ), 90, cols=70)
    assert rc == 0, out
    assert pooled_rig.store.get(rec.id).status == "succeeded"
    # every status draw is "\r<line>\x1b[K"; the last one is ended with a newline
    draws = re.findall(r"\r([^\r\n\x1b]*)\x1b\[K", out)
    statuses = [d for d in draws if "ops ended" in d]
    assert statuses, out
    assert re.match(rf"(\[#+\] )?{N}/{N} ops ended, ", statuses[-1]), statuses[-1]
    assert all(len(d) <= 69 for d in statuses)
    assert out.index(statuses[-1]) > out.rindex(f"[{N}/{N}] #")  # after the last result


# --- the status line and the redraw limit, without a transfer ----------------------------


def _ops(names: list[str]) -> list[Op]:
    return [Op(index=i, kind="upload", local_path=n, remote_path=n, size=10)
            for i, n in enumerate(names)]  # fmt: skip


def test_in_flight_names_are_inert_and_cut_to_the_width() -> None:
    names = {0: "evil\\x1b[2J.txt", 1: "b" * 30, 2: "c.txt", 3: "\u5b57" * 40}
    ev = ProgressEvent(0, 9, 2048, 10 * 2**20, ops_done=5, in_flight=(0, 1, 2, 3))
    wide = status_line(ev, names, 1.5 * 2**20, 400, bar=False)
    assert wide == (
        "5/9 ops ended, 2.0 KiB/10.0 MiB (0%), 1.5 MiB/s, in flight: "
        f"evil\\x1b[2J.txt, {'b' * 30}, c.txt, {chr(0x5B57) * 40}"
    )
    narrow = status_line(ev, names, None, 110, bar=False)
    assert narrow.endswith(f"{'b' * 30}, +2 more") and len(narrow) <= 110
    tight = status_line(ev, names, None, 80, bar=False)
    assert tight.endswith("in flight: evil\\x1b[2J.txt, +3 more") and len(tight) <= 80
    cjk = status_line(ProgressEvent(3, 9, 0, 0, ops_done=1, in_flight=(3,)), names, None, 80,
                      bar=True)  # fmt: skip
    width = sum(2 if c == "\u5b57" else 1 for c in cjk)  # a wide letter takes two cells
    assert cjk.startswith(f"[##{'.' * 18}] 1/9 ops ended, in flight: \u5b57")
    assert cjk.endswith("\u5b57...") and width in (79, 80)


def test_one_op_shows_the_bytes_of_its_file() -> None:
    ev = ProgressEvent(0, 1, 3 * 2**20, 12 * 2**20, in_flight=(0,))
    line = status_line(ev, {0: "big.iso"}, 2**20, 100, bar=True)
    assert line == "[#####...............] 3.0 MiB/12.0 MiB (25%), 1.0 MiB/s  big.iso"


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_terminal_redraws_are_rate_limited_and_the_log_gets_no_control_sequence() -> None:
    ops = _ops([f"f{i}" for i in range(3)] + ["\x1b]52;c;cHduZWQ=\x07"])  # OSC 52
    tty, log = _Tty(), io.StringIO()
    shows = [_Progress(ops, tty), _Progress(ops, log)]
    began = time.monotonic()
    for k in range(20_000):
        ev = ProgressEvent(0, 4, k * 40 // 19_999, 40, ops_done=0, in_flight=(0, 1, 2, 3))
        for show in shows:
            show(ev)
    elapsed = time.monotonic() - began
    for show in shows:
        show.finish()
    redraws = tty.getvalue().count("\r")
    assert 1 <= redraws <= elapsed / 0.1 + 2  # the final draw, and at most 10 a second
    assert tty.getvalue().endswith("\x1b[K\n") and "\\x1b]52;c;cHduZWQ=\\x07" in tty.getvalue()
    assert "\x07" not in tty.getvalue() and tty.getvalue().count("\x1b") == redraws
    plain = log.getvalue()
    assert "\x1b" not in plain and "\r" not in plain
    assert plain.count("\n") <= elapsed / 5.0 + 2
    assert plain.splitlines()[-1].startswith("0/4 ops ended, 40 B/40 B (100%)")


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

    monkeypatch.setattr(accept_cli, "PHASE_QUIET", 0.0)
    out = io.StringIO()
    step = StepProgress("reading the ops", out)
    for n in range(1000, 100_001, 1000):
        step(n, 100_000)
    step.done(100_000)
    lines = out.getvalue().splitlines()
    assert lines[0] == "reading the ops: 1,000/100,000 ops"
    assert len(lines) == 2 and re.fullmatch(r"reading the ops: 100,000 ops in \d+\.\d s", lines[1])
    assert "\x1b" not in out.getvalue()
