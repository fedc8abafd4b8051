"""The executions `placet web` starts: one daemon thread per accepted proposal, each
through `placet.decisions.run` (which ends the reservation its accept made), with the
figures of its progress (`placet.executor.progress.Tracker`: the line `placet accept`
and the review UI show) for the page's status; and the plan each accept's challenge
read, and the drive warmed for it (`placet.decisions.warming`), so that the accept runs
it rather than reading every op again and starting rcd after the owner's passkey said
yes. The page says nothing when the owner cancels the passkey prompt or leaves: the
warmed drive is closed `WARM_SECONDS` after its challenge unless an accept took it."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from placet import decisions
from placet.config import Settings
from placet.decisions import Accepted, WarmDrive, warms
from placet.errors import PlacetError
from placet.executor import Plan
from placet.executor.progress import Figures, Tracker
from placet.store import ProposalRecord, Store

__all__ = ["PLANS_KEPT", "WARM_SECONDS", "Runs"]

PLANS_KEPT = 2
"""Plans kept for the accepts to come, the latest challenges' (a plan of 100,000 ops is
much of the 268 MiB `placet accept` holds for one: docs/performance.md)."""
WARM_SECONDS = 60.0
"""How long the drive warmed for an accept's challenge waits for its answer (a touch of
the passkey takes seconds); a later answer runs on a drive its run opens."""


@dataclass
class Runs:
    """Executions started from the page, one daemon thread each (they die with the
    process; a proposal left `executing` is recovered by the next sweep, its holder
    being gone)."""

    store: Store
    settings: Settings
    executor: decisions.Executor | None = None
    """None: `placet.executor.execute`."""
    _threads: dict[int, threading.Thread] = field(default_factory=dict)
    _cancel: threading.Event = field(default_factory=threading.Event)
    errors: dict[int, PlacetError] = field(default_factory=dict)
    _trackers: dict[int, Tracker] = field(default_factory=dict)
    _plans: OrderedDict[int, Plan] = field(default_factory=OrderedDict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    warm_seconds: float = WARM_SECONDS
    _warm: tuple[int, WarmDrive, threading.Timer] | None = None
    """The drive warmed for the latest accept challenge: one at a time."""
    _started: WarmDrive | None = None
    """The drive warmed last (held, taken or closed): no other starts until it is ready."""

    def start(self, accepted: Accepted, warm: WarmDrive | None = None) -> None:
        """Execute `accepted` in a daemon thread (`decisions.run`, which ends the
        reservation the accept made, so this process's host loop leaves it to this run),
        on `warm`'s drive if given, closed when the run ends."""
        pid = accepted.proposal_id
        tracker = self._trackers[pid] = Tracker()
        warm = warm or WarmDrive(None)

        def run() -> None:
            try:
                with warm:
                    decisions.run(
                        self.store,
                        self.settings,
                        accepted,
                        progress=tracker,
                        cancel=self._cancel,
                        execute=self.executor,
                        drive=warm.drive(),
                    )
            except PlacetError as e:
                self.errors[pid] = e

        t = threading.Thread(target=run, name=f"placet-web-run-{pid}", daemon=True)
        self._threads[pid] = t
        t.start()

    def running(self, pid: int) -> bool:
        t = self._threads.get(pid)
        return t is not None and t.is_alive()

    def figures(self, pid: int) -> Figures | None:
        """Where this server's run of `pid` stands (its whole run's rate once it ended);
        None before its first event or when this server started none."""
        tracker = self._trackers.get(pid)
        if tracker is None:
            return None
        return tracker.figures(final=not self.running(pid))

    def keep_plan(self, pid: int, plan: Plan) -> None:
        """Keep the plan a challenge's checks read for proposal `pid`, for its accept."""
        with self._lock:
            self._plans.pop(pid, None)
            self._plans[pid] = plan
            while len(self._plans) > PLANS_KEPT:
                self._plans.popitem(last=False)

    def take_plan(self, pid: int) -> Plan | None:
        """The plan kept for `pid` (the accept's checks use it only when it was read for
        the request hash the proposal still has), no longer kept."""
        with self._lock:
            return self._plans.pop(pid, None)

    def warm_up(self, record: ProposalRecord) -> None:
        """Open the drive an accept of `record` would run on (`decisions.warms`), for
        the accept answering its challenge (`take_warm`); closed after `warm_seconds` if
        no accept took it. One at a time, whatever a session asks: a newer challenge
        takes over the drive warmed for an earlier one (the same configured drive) or
        closes it, and none is started while an earlier one still starts (its close
        waits for its rcd to answer)."""
        wanted = warms(self.settings, self.store.host_id, [record])
        with self._lock:
            old, self._warm = self._warm, None
            if wanted and old is not None and old[1].opens:
                warm, old = old[1], (old[0], WarmDrive(None), old[2])  # its timer goes
            elif wanted and (self._started is None or self._started.ready):
                warm = self._started = WarmDrive(self.settings)
            else:
                warm = WarmDrive(None)
            timer = threading.Timer(self.warm_seconds, lambda: self._expire(timer))
            timer.daemon = True
            self._warm = (record.id, warm, timer)
        timer.start()
        if old is not None:
            old[2].cancel()
            old[1].close()

    @property
    def warming(self) -> WarmDrive | None:
        """The drive warmed for the latest challenge and not taken yet, if any."""
        held = self._warm
        return None if held is None else held[1]

    def cool(self, pid: int) -> None:
        """Close the drive warmed for proposal `pid`'s challenge, unless an accept took
        it or a newer challenge did."""
        self._close_held(lambda held: held[0] == pid)

    def _expire(self, timer: threading.Timer) -> None:
        """`timer` ran out: close the drive it was started for, unless taken since."""
        self._close_held(lambda held: held[2] is timer)

    def _close_held(self, which: Callable[[tuple[int, WarmDrive, threading.Timer]], bool]) -> None:
        with self._lock:
            held = self._warm
            if held is None or not which(held):
                return
            self._warm = None
        held[2].cancel()
        held[1].close()

    def take_warm(self, pid: int) -> WarmDrive:
        """The drive warmed for proposal `pid`'s challenge, now the caller's to close; one
        that opens nothing when there is none."""
        with self._lock:
            held = self._warm
            if held is None or held[0] != pid:
                return WarmDrive(None)
            self._warm = None
        held[2].cancel()
        return held[1]

    def stop(self, timeout: float = 10.0) -> None:
        """Close the drive warmed for a challenge not answered, ask every execution to
        stop, and wait up to `timeout` s for each."""
        held = self._warm
        if held is not None:
            self.cool(held[0])
        self._cancel.set()
        for t in list(self._threads.values()):
            t.join(timeout)
