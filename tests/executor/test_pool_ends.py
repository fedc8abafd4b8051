"""`run_transfers` ends with its last worker (an end marker per worker, not a tick) and
reports every op, whatever a unit does: returns, raises an error, raises a
`BaseException`, raises an error that cannot even be printed, or leaves an op of its
batch without an outcome. Each test bounds its wait: a pool that hangs fails."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from placet.executor.pool import PoolResult, run_transfers
from placet.executor.progress import OpOutcome
from placet.schema import Op

pytestmark = pytest.mark.timeout(30)

RunUnit = Callable[[list[Op]], list[tuple[Op, OpOutcome]]]


class Unprintable(Exception):
    def __str__(self) -> str:
        raise ValueError("no text for this error")


def _ops(n: int) -> list[Op]:
    return [Op(index=i, kind="upload", local_path=f"f{i}", remote_path=f"f{i}") for i in range(n)]


def _run(
    units: list[list[Op]], run_unit: RunUnit, workers: int = 4
) -> tuple[PoolResult, dict[int, OpOutcome]]:
    ended: dict[int, OpOutcome] = {}
    lock = threading.Lock()

    def end_op(op: Op, out: OpOutcome) -> bool:
        with lock:
            assert op.index not in ended, f"op {op.index} reported twice"
            ended[op.index] = out
        return True

    box: list[PoolResult] = []

    def go() -> None:
        res = run_transfers(
            units,
            workers,
            run_unit=run_unit,
            end_op=end_op,
            abort_reason=lambda: None,
            halt=lambda why: None,
            tick=lambda: None,
        )
        box.append(res)

    t = threading.Thread(target=go, daemon=True)
    t.start()
    t.join(20)
    assert not t.is_alive(), "run_transfers did not end"
    return box[0], ended


@pytest.mark.parametrize(
    "boom",
    [RuntimeError("bug"), SystemExit(3), Unprintable()],
    ids=["error", "system-exit", "unprintable"],
)
def test_a_unit_that_raises_is_that_op_failing_and_the_others_run(boom: BaseException) -> None:
    ops = _ops(12)

    def run_unit(unit: list[Op]) -> list[tuple[Op, OpOutcome]]:
        if unit[0].index == 5:
            raise boom
        return [(op, OpOutcome("done", {})) for op in unit]

    res, ended = _run([[op] for op in ops], run_unit)
    assert res.stopped is None  # a bug is not a cancel
    assert sorted(ended) == list(range(12))  # every op reported, once
    assert ended[5].outcome == "failed" and ended[5].detail["code"] == "internal_error"
    assert all(ended[i].outcome == "done" for i in ended if i != 5)


def test_a_batch_missing_an_outcome_reports_it_as_a_bug() -> None:
    ops = _ops(6)

    def run_unit(unit: list[Op]) -> list[tuple[Op, OpOutcome]]:
        return [(op, OpOutcome("done", {})) for op in unit[:-1]]  # drops the last

    res, ended = _run([ops[:3], ops[3:]], run_unit)
    assert res.stopped is None
    assert sorted(ended) == list(range(6))
    assert {i for i, o in ended.items() if o.outcome == "failed"} == {2, 5}


def test_every_worker_raising_still_ends_the_pool() -> None:
    def run_unit(unit: list[Op]) -> list[tuple[Op, OpOutcome]]:
        raise RuntimeError("every unit")

    res, ended = _run([[op] for op in _ops(9)], run_unit, workers=3)
    assert res.stopped is None
    assert sorted(ended) == list(range(9))
    assert {o.outcome for o in ended.values()} == {"failed"}


def test_a_worker_that_cannot_start_leaves_the_others_supervised(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The system refuses a thread (``can't start new thread``: a pids limit) after the
    first worker started: that worker's ops must still be journaled by the coordinator,
    never left running with nobody to report them to."""
    started: list[str] = []
    real_start = threading.Thread.start

    def start(self: threading.Thread) -> None:
        if self.name.startswith("placet-transfer-") and started:
            raise RuntimeError("can't start new thread")
        if self.name.startswith("placet-transfer-"):
            started.append(self.name)
        real_start(self)

    monkeypatch.setattr(threading.Thread, "start", start)

    def run_unit(unit: list[Op]) -> list[tuple[Op, OpOutcome]]:
        return [(op, OpOutcome("done", {})) for op in unit]

    res, ended = _run([[op] for op in _ops(8)], run_unit)
    assert res.stopped is None and res.max_in_flight == 1
    assert sorted(ended) == list(range(8))
