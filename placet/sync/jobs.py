"""Long reads: a cold index or plan that outlasts a tool call goes on in the background.

docs/design.md section 9 ("Long reads"): many MCP hosts give a tool call about 60 s. A cold
`local_index` or `sync_plan` of a large tree can take longer (every file is hashed),
so the work runs in a background thread of the server process, keyed by its arguments.
A call waits up to its budget (about 45 s); if the work is not done, the call fails
with the retryable `in_progress` error carrying a progress figure, and the work goes
on. The agent calls again with the same arguments and gets the result (or waits again).
A result is handed out once; one nobody collects is dropped after `KEEP_SECONDS`.

The same arguments while a job runs join it rather than starting another, so an agent
that retries in a loop costs one job. At most `MAX_RUNNING` jobs run at once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from placet.errors import InProgress, LimitExceeded

T = TypeVar("T")

KEEP_SECONDS = 600.0
"""A finished job's result waits this long for its caller, then is dropped."""
MAX_RUNNING = 4
"""Jobs running at once; another distinct request is refused (retryable) meanwhile."""


@dataclass
class Progress:
    """What a running job has done so far; the job updates it, callers read it.

    `phase`: what it is doing (e.g. "indexing local files", "listing the remote");
    `files`: local files seen; `bytes_hashed`: bytes read to hash; `remote_entries`:
    remote entries listed (None until the listing returns).
    """

    phase: str = "starting"
    files: int = 0
    bytes_hashed: int = 0
    remote_entries: int | None = None
    started: float = field(default_factory=time.monotonic)

    def to_dict(self) -> dict[str, Any]:
        return {
            "phase": self.phase,
            "files_seen": self.files,
            "bytes_hashed": self.bytes_hashed,
            "remote_entries": self.remote_entries,
            "elapsed_s": round(time.monotonic() - self.started, 1),
        }


@dataclass
class _Job(Generic[T]):
    progress: Progress
    done: threading.Event = field(default_factory=threading.Event)
    result: T | None = None
    error: BaseException | None = None
    finished_at: float | None = None


class LongReads:
    """Background jobs keyed by their arguments (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: dict[Hashable, _Job[Any]] = {}

    def _drop_stale(self, now: float) -> None:
        for key, job in list(self._jobs.items()):
            if job.finished_at is not None and now - job.finished_at > KEEP_SECONDS:
                del self._jobs[key]

    def run(
        self,
        key: Hashable,
        fn: Callable[[Progress], T],
        *,
        budget: float | None,
        what: str,
    ) -> T:
        """`fn(progress)`'s result, waiting at most `budget` seconds (None: no limit).

        Raises:
            InProgress: not done within `budget` (retryable; details: `progress`). The
                same `key` later returns the result, or the error `fn` raised.
            LimitExceeded: `MAX_RUNNING` other jobs are running (retryable).
            Whatever `fn` raised, once, to the caller that collects it.
        """
        if budget is None:
            return fn(Progress())
        with self._lock:
            self._drop_stale(time.monotonic())
            job = self._jobs.get(key)
            if job is None:
                running = sum(1 for j in self._jobs.values() if not j.done.is_set())
                if running >= MAX_RUNNING:
                    raise LimitExceeded(
                        f"cannot start {what}: {running} long reads are already running in "
                        "this server; call again in a minute",
                        details={"running": running},
                        retryable=True,
                    )
                job = self._jobs[key] = _Job(Progress())
                threading.Thread(
                    target=self._work, args=(job, fn), name="placet-long-read", daemon=True
                ).start()
                fresh = True
            else:
                fresh = False
        # A budget of 0 never looks at a job it just started: "started, call again" is
        # then certain, however fast the job is (tests rely on it).
        if not (fresh and budget <= 0) and job.done.wait(budget):
            with self._lock:
                if self._jobs.get(key) is job:
                    del self._jobs[key]
            if job.error is not None:
                raise job.error
            return job.result  # type: ignore[return-value]
        p = job.progress.to_dict()
        raise InProgress(
            f"{what} is still running ({p['phase']}; {p['files_seen']} local files seen, "
            f"{p['bytes_hashed']} bytes hashed, {p['elapsed_s']} s so far); it goes on in "
            "the background: call again with the same arguments for the result",
            details={"progress": p},
        )

    @staticmethod
    def _work(job: _Job[T], fn: Callable[[Progress], T]) -> None:
        try:
            job.result = fn(job.progress)
        except BaseException as e:  # handed to the caller that collects the job
            job.error = e
        finally:
            job.finished_at = time.monotonic()
            job.done.set()
