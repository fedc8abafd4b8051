"""`placet accept ID [--yes] [--skip INDEX]...`: the owner's headless decision, then the
execution.

What the owner approves is what runs: the effect is computed from the same parsed ops
the executor runs, every risk flag is shown above the agent's reason, and the approval
binds the request hash shown (docs/design.md section 9, "Accept binds to what was
shown"). The confirmation is a random code written to and read back from the
controlling terminal, so a command without one (an agent's shell tool, a pipe) cannot
approve; `--yes` skips it only with `allow_yes = true` (docs/security.md).

Sequence: sweep, read and flag the ops (a sync's a page at a time, held once), show,
confirm, accept, execute with progress on stderr (docs/decisions/0034-cli.md). A
proposal made on another host is only approved here (docs/decisions/0021-hosts.md).
Ctrl-C interrupts cleanly; a second quits at once. Exit codes: docs/errors.md."""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import signal
import sys
import termios
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from types import FrameType
from typing import Any, TextIO

from placet.cli.accept_effect import effect_lines, flag_counts
from placet.config import Settings, approvals_mode, load_settings
from placet.display import human_bytes
from placet.errors import (
    EXIT_DRIVE_UNAVAILABLE,
    EXIT_OK,
    EXIT_OP_FAILED,
    Expired,
    PolicyRefused,
    UsageError,
    WrongState,
)
from placet.executor import Plan, ProgressEvent, check_binding, execute, load_plan
from placet.proposals.approval import origin
from placet.proposals.risk import RiskFlag
from placet.proposals.vetting import proposal_flags, refuse_own_paths
from placet.schema import Op
from placet.store import OpResultRecord, ProposalRecord, Store, open_store
from placet.store.decisions import signature_required
from placet.store.host import host_label, runs_elsewhere
from placet.store.lifecycle import ACCEPTABLE
from placet.text import cell_width as _width
from placet.text import fit_cells, inert

CODE_ALPHABET = "ACDEFHJKLMNPRTUVWXY3479"
"""Letters and digits that cannot be misread for one another (no 0/O, 1/I/L, 5/S...)."""
CODE_LENGTH = 6


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `accept` to the `placet` parser."""
    p = subparsers.add_parser(
        "accept",
        help="accept a proposal (confirmation code on the terminal) and execute it",
        description="Show a proposal's exact effect, ask for a confirmation code on the "
        "terminal, record the approval and execute it.",
    )
    p.add_argument("id", type=int, help="the proposal id (see `placet list`)")
    p.add_argument(
        "--yes",
        action="store_true",
        help="skip the confirmation code; works only with allow_yes = true in config.toml",
    )
    p.add_argument(
        "--skip",
        type=int,
        action="append",
        default=[],
        metavar="INDEX",
        help="a sync only: leave op INDEX out (repeatable); it is recorded as skipped",
    )
    p.set_defaults(func=cmd_accept)


def cmd_accept(args: argparse.Namespace) -> int:
    settings = load_settings()
    if args.yes and not settings.allow_yes:
        raise PolicyRefused(
            f"refusing --yes for proposal {args.id}: accepting without the confirmation "
            f"code is off. Set allow_yes = true in {settings.config_file} to allow it, or "
            "run `placet accept ID` at a terminal and type the code",
            code="yes_not_allowed",
            details={"config_key": "allow_yes", "config_file": str(settings.config_file)},
        )
    with open_store(settings) as store:
        store.sweep()
        record = store.get(args.id)
        _check_state(record)
        if approvals_mode(settings) == "signed" and record.status in ACCEPTABLE:
            raise signature_required(record.id, settings.config_file)
        # Refuse a proposal that could never run (altered request, another drive) before
        # the owner types a code, leaving it as it is. Made on another host: that host's
        # drive and folders are its executor's to check.
        elsewhere = runs_elsewhere(record.host_id, store.host_id)
        check_binding(settings, record, elsewhere=elsewhere)
        # a sync's ops read a page at a time, verified against its digest, held once:
        # the executor runs this same plan (`execute(shown=...)`)
        reading = StepProgress("reading the ops")
        plan = load_plan(store, record, on_page=reading)
        reading.done(len(plan.ops))
        if not elsewhere:
            refuse_own_paths(settings, record, plan.ops)
        skip = _check_skip(record, plan.ops, args.skip)
        flagging = StepProgress("checking the ops for risk flags")
        flags = proposal_flags(record, plan.ops)
        flagging.done(len(plan.ops))
        _emit(effect_lines(record, plan.ops, skip, flags=flags))
        if record.status in ACCEPTABLE:
            with terminal() as tty:
                if not args.yes:
                    if tty is None:
                        raise PolicyRefused(
                            f"refusing to accept proposal {record.id}: there is no terminal "
                            "to confirm on (placet reads the confirmation code from "
                            "/dev/tty, never from stdin); run `placet accept` in a terminal, "
                            f"or opt in to --yes with allow_yes = true in {settings.config_file}",
                            code="no_terminal",
                            details={"proposal_id": record.id},
                        )
                    _confirm(tty, record, skip, covers=_covers(plan.ops, flags))
                detail: dict[str, Any] = {
                    "request_hash": record.request_hash,
                    "via": "cli",
                    "yes": bool(args.yes),
                    "tty": tty is not None,
                    "origin": origin(tty),
                }
                if record.kind == "sync":
                    detail["skip_ops"] = skip
                accepted = store.accept(record.id, detail=detail)
                if accepted.request_hash != record.request_hash:  # changed while shown
                    raise PolicyRefused(
                        f"proposal {record.id} changed while it was shown (request hash "
                        f"{accepted.request_hash[:16]}..., shown {record.request_hash[:16]}...); "
                        "not executing it: discard it",
                        code="not_approved_as_shown",
                        details={"shown": record.request_hash, "now": accepted.request_hash},
                    )
        elif not elsewhere:
            _emit([f"proposal {record.id} was already approved; executing it now"])
        if elsewhere:
            where = host_label(inert(record.host), record.host_id)  # a database value: inert
            _emit(
                [
                    f"proposal {record.id} is approved; it was made on host {where}, where "
                    "its files are, and that host runs it: `placet executor` there runs it "
                    f"now, or `placet accept {record.id}` there"
                ]
            )
            return EXIT_OK
        return _run(store, settings, record, plan)


def _check_skip(record: ProposalRecord, ops: list[Op], skip: list[int]) -> list[int]:
    """The `--skip` indexes, sorted and checked before anything is shown or asked.

    Raises:
        UsageError (``skip_invalid``): not a sync, already approved (its selection is
            bound), or an index the proposal has no op for; (``nothing_selected``):
            every op skipped (discard it instead).
    """
    if not skip:
        return []
    chosen = sorted(set(skip))
    if record.kind != "sync" or record.status == "approved":
        why = (
            f"it is a {record.kind} proposal with a single op"
            if record.kind != "sync"
            else "it is already approved, with the selection made then"
        )
        raise UsageError(
            f"cannot skip ops of proposal {record.id}: {why}; run it without --skip",
            code="skip_invalid",
            details={"proposal_id": record.id},
        )
    unknown = sorted(set(chosen) - {op.index for op in ops})
    if unknown:
        raise UsageError(
            f"cannot skip op(s) {unknown} of proposal {record.id}: it has no such op; "
            f"its ops are {', '.join(f'#{op.index}' for op in ops[:20])}",
            code="skip_invalid",
            details={"proposal_id": record.id, "unknown": unknown},
        )
    if len(chosen) >= len(ops):
        raise UsageError(
            f"cannot skip every op of proposal {record.id}: nothing would run; discard it "
            "instead (`placet discard ID`)",
            code="nothing_selected",
            details={"proposal_id": record.id},
        )
    return chosen


def _check_state(record: ProposalRecord) -> None:
    if record.status == "expired":
        raise Expired(
            f"cannot accept proposal {record.id}: it expired at "
            f"{record.expires_at.isoformat()}; ask the agent to propose again",
            details={"proposal_id": record.id},
        )
    if record.status == "executing":
        raise WrongState(
            f"cannot accept proposal {record.id}: it is executing under "
            f"{inert(record.lease_holder or '?')}; wait for it, or, if that process is gone, "
            "run `placet sweep` and accept again",
            details={"proposal_id": record.id, "status": record.status},
        )
    if record.status not in (*ACCEPTABLE, "approved"):
        raise WrongState(
            f"cannot accept proposal {record.id}: it is {record.status}; only a pending, "
            "failed or interrupted proposal can be accepted",
            details={"proposal_id": record.id, "status": record.status},
        )


def _emit(lines: list[str]) -> None:
    for line in lines:
        sys.stdout.write(line + "\n")
    sys.stdout.flush()


# ---- the confirmation on the terminal ---------------------------------------------------


@contextlib.contextmanager
def terminal() -> Iterator[int | None]:
    """The controlling terminal, opened read-write, or None when there is none."""
    try:
        fd = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError:
        yield None
        return
    try:
        yield fd
    finally:
        os.close(fd)


def read_line(fd: int, limit: int = 64) -> str:
    """One line read from `fd` a byte at a time (at most `limit` bytes, no newline)."""
    buf = b""
    while len(buf) < limit:
        ch = os.read(fd, 1)
        if not ch or ch in b"\r\n":
            break
        buf += ch
    return buf.decode("utf-8", "replace")


def code_typed(tty: int, prompt: Callable[[str], str]) -> bool:
    """Write `prompt(code)` for a fresh confirmation code to the terminal `tty` (its
    type-ahead flushed first, so it cannot answer a code not yet shown) and read a line
    back from it: True when the line is the code (case and surrounding blanks aside)."""
    code = "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))
    with contextlib.suppress(termios.error):
        termios.tcflush(tty, termios.TCIFLUSH)
    os.write(tty, prompt(code).encode())
    typed = read_line(tty).strip().upper()
    return secrets.compare_digest(typed.encode(), code.encode())


def _covers(ops: list[Op], flags: list[RiskFlag]) -> str:
    """What the code accepts, said in the prompt: the op count and every risk flag by kind."""
    said = f"{len(flags)} risk flag(s): {flag_counts(flags)}" if flags else "no risk flags"
    return f"{len(ops)} op(s), {said}, all listed above"


def _confirm(
    tty: int, record: ProposalRecord, skip: list[int] | None = None, *, covers: str = ""
) -> None:
    """Write a fresh code to the terminal and read it back from the terminal. The prompt
    repeats `covers` (op count, risk flags by kind) so the code is typed for all of them.

    Raises:
        PolicyRefused (code ``confirmation_mismatch``): something else was typed.
    """

    def prompt(code: str) -> str:
        return (
            f"\nTo accept proposal {record.id} (request hash {record.request_hash[:16]}...)"
            + (f" with {covers}" if covers else "")
            + (f" without op(s) {', '.join(f'#{i}' for i in skip)}" if skip else "")
            + ", "
            f"type the code {code} and press Enter (anything else declines): "
        )

    if not code_typed(tty, prompt):
        raise PolicyRefused(
            f"proposal {record.id} was not accepted: the confirmation code did not match; "
            "it is unchanged",
            code="confirmation_mismatch",
            details={"proposal_id": record.id},
        )


# ---- execution with progress on stderr ---------------------------------------------------

_TTY_EVERY = 0.1  # seconds between redraws of the terminal line (at most 10 a second)
_LOG_EVERY = 5.0  # seconds between status lines when stderr is not a terminal
_RATE_WINDOW = 5.0  # seconds of byte counts the current rate is measured over
_LOG_COLS = 160  # width of a status line written to a file or pipe
PHASE_QUIET = 1.0
"""Seconds a step before the transfers (`StepProgress`) runs before its progress is shown."""


def _fit(s: str, cols: int) -> str:
    """`s` cut to at most `cols` terminal cells, ending '...' if cut."""
    return fit_cells(s, cols, "...")


def status_line(
    ev: ProgressEvent, names: dict[int, str], rate: float | None, cols: int, *, bar: bool
) -> str:
    """One line of progress, at most `cols` cells: ops ended of total (more than one op),
    bytes done of total, the rate in bytes/s (None: not measured yet), then the ops in
    flight by name (`names`: op index -> inert name), as many as fit, then ``+N more``.
    With `bar`, a 20-cell bar comes first where about 20 cells for names remain after it."""
    multi = ev.op_count > 1
    frac = ev.bytes_done / ev.bytes_total if ev.bytes_total else ev.ops_done / max(1, ev.op_count)
    parts = [f"{ev.ops_done}/{ev.op_count} ops ended"] if multi or not ev.bytes_total else []
    if ev.bytes_total:
        done, total = human_bytes(ev.bytes_done), human_bytes(ev.bytes_total)
        parts.append(f"{done}/{total} ({frac * 100:.0f}%)")
    if rate is not None:
        parts.append(f"{human_bytes(rate)}/s")
    head = ", ".join(parts)
    if bar and _width(head) + 42 <= cols:  # the bar only where names still fit after it
        head = f"[{'#' * int(frac * 20):.<20}] {head}"
    flying = list(ev.in_flight) if multi else [] if ev.op_result else [ev.op_index]
    if not flying:
        return _fit(head, cols)
    prefix = head + (", in flight: " if multi else "  ")
    shown: list[str] = []
    for k, i in enumerate(flying):
        left = len(flying) - k - 1
        trial = prefix + ", ".join([*shown, names.get(i, f"#{i}")])
        if shown and _width(trial + (f", +{left} more" if left else "")) > cols:
            break
        shown.append(names.get(i, f"#{i}"))
    hidden = len(flying) - len(shown)
    return _fit(prefix + ", ".join(shown) + (f", +{hidden} more" if hidden else ""), cols)


class StepProgress:
    """Progress of a long step before the transfers (reading a big sync's ops, checking
    them for risk flags) on stderr: silent for a step that ends within `PHASE_QUIET`
    seconds; after that ``what: N/M ops`` redrawn in place on a terminal (at most every
    `_TTY_EVERY` s) or a plain line every `_LOG_EVERY` s elsewhere, and a last line with
    the time taken. Call it with (done, total) as the step goes; `done(total)` ends it."""

    def __init__(self, what: str, out: TextIO | None = None) -> None:
        self.what, self.out = what, out or sys.stderr
        self.tty = self.out.isatty()
        self._start = self._last = time.monotonic()
        self._shown = False

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if now - self._start < PHASE_QUIET:
            return
        if self._shown and now - self._last < (_TTY_EVERY if self.tty else _LOG_EVERY):
            return
        self._line(f"{self.what}: {done:,}/{total:,} ops", end="\r" if self.tty else "\n")
        self._last, self._shown = now, True

    def done(self, total: int) -> None:
        """End the step: one line with its time, if it took long enough to be shown."""
        took = time.monotonic() - self._start
        if took >= PHASE_QUIET:
            self._line(f"{self.what}: {total:,} ops in {took:.1f} s", end="\n")

    def _line(self, text: str, end: str) -> None:
        self.out.write(("\r\x1b[K" if self.tty else "") + text + (end if self.tty else "\n"))
        self.out.flush()


class _Progress:
    """Execution progress on stderr. Every op result is one line, numbered by ops ended
    (``[3/20]``) when there is more than one op. The status line (`status_line`) is
    redrawn in place on a terminal at most every `_TTY_EVERY` s, cut to its width;
    elsewhere it is a plain line at most every `_LOG_EVERY` s, never a control
    sequence, and lines are written in one go at most every `_TTY_EVERY` s (a
    100,000-op sync is not 100,000 writes). `finish` writes the last status once,
    whatever the timing, and everything held."""

    def __init__(self, ops: list[Op], out: TextIO | None = None) -> None:
        self.out = out or sys.stderr
        self.tty = self.out.isatty()
        self._ops = {op.index: op for op in ops}  # names made only for the ops shown
        self._start = self._last = self._flushed = time.monotonic()
        self._samples: deque[tuple[float, int]] = deque()
        self._first: int | None = None
        self._ev: ProgressEvent | None = None
        self._drawn = False
        self._held: list[str] = []  # lines not yet written (not a terminal)

    def __call__(self, ev: ProgressEvent) -> None:
        now = time.monotonic()
        self._ev = ev
        self._first = ev.bytes_done if self._first is None else self._first
        self._samples.append((now, ev.bytes_done))
        while now - self._samples[0][0] > _RATE_WINDOW:
            self._samples.popleft()
        if ev.op_result is not None:
            self._clear()
            count = f"[{ev.ops_done}/{ev.op_count}] " if ev.op_count > 1 else ""
            self._write(f"  {count}{_result_line(ev.op_result)}\n")
        if now - self._last >= (_TTY_EVERY if self.tty else _LOG_EVERY):
            self._draw(now)
        if self.tty or now - self._flushed >= _TTY_EVERY:
            self._flush(now)

    def finish(self) -> None:
        """Write the final status line (also after a failure: the line is ended)."""
        if self._ev is not None:
            self._draw(time.monotonic(), final=True)
        self._flush(time.monotonic())

    def _write(self, text: str) -> None:
        if self.tty:
            self.out.write(text)
        else:
            self._held.append(text)

    def _flush(self, now: float) -> None:
        if self._held:
            self.out.write("".join(self._held))
            self._held.clear()
        self.out.flush()
        self._flushed = now

    def _rate(self, now: float, final: bool) -> float | None:
        (t0, b0), (t1, b1) = self._samples[0], self._samples[-1]
        if final:
            t0, b0, t1 = self._start, self._first or 0, now
        return max(0.0, (b1 - b0) / (t1 - t0)) if t1 - t0 >= 0.5 else None

    def _draw(self, now: float, final: bool = False) -> None:
        assert self._ev is not None
        cols = _LOG_COLS
        if self.tty:
            with contextlib.suppress(OSError, ValueError):
                cols = os.get_terminal_size(self.out.fileno()).columns
        ev = self._ev
        names = {i: self._name(i) for i in (*ev.in_flight, ev.op_index)}
        line = status_line(ev, names, self._rate(now, final), cols - 1, bar=self.tty)
        if self.tty:
            self.out.write("\r" + line + "\x1b[K" + ("\n" if final else ""))
            self._drawn = not final
        else:
            self._write(line + "\n")
        self._last = now

    def _name(self, index: int) -> str:
        op = self._ops.get(index)
        return f"#{index}" if op is None else inert(op.remote_path or op.local_path or "")

    def _clear(self) -> None:
        if self._drawn:
            self.out.write("\r\x1b[K")
            self._drawn = False


def _result_line(r: OpResultRecord) -> str:
    d = r.detail
    what = inert(str(r.op.get("remote_path") or r.op.get("local_path") or ""))
    if r.outcome in ("done", "already_done"):
        how = d.get("verification")
        extra = f" ({inert(str(how))}" + (f", {d['path_taken']}" if d.get("path_taken") else "")
        return f"#{r.op_index} {r.outcome}: {what}" + (extra + ")" if how else "")
    return f"#{r.op_index} {r.outcome}: {what}: {inert(str(d.get('message', '')))}"


def _run(store: Store, settings: Settings, record: ProposalRecord, plan: Plan) -> int:
    cancel = threading.Event()

    def on_sigint(signum: int, frame: FrameType | None) -> None:
        if cancel.is_set():
            raise KeyboardInterrupt
        cancel.set()
        sys.stderr.write("\nstopping after cleaning up (Ctrl-C again to quit at once)\n")

    previous: Any = signal.signal(signal.SIGINT, on_sigint)
    shown = _Progress(plan.ops)
    try:
        final = execute(store, settings, record.id, progress=shown, cancel=cancel, shown=plan)
    finally:
        signal.signal(signal.SIGINT, previous)
        shown.finish()
    del plan, shown  # the ops are not needed to count the journal
    counts = store.outcome_counts(final.id)
    said = ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "no ops journaled"
    _emit([f"proposal {final.id} {final.status}: {said}"])
    if final.status == "succeeded":
        return EXIT_OK
    return exit_code(final, store.op_results(final.id, outcomes=_BAD))


_BAD = ("stale", "failed")
"""Outcomes of an op that did not end as selected (not done, already_done or skipped)."""


def exit_code(final: ProposalRecord, results: Iterable[OpResultRecord]) -> int:
    """0 succeeded; 5 when every failed op could not reach the drive; else 1."""
    if final.status == "succeeded":
        return EXIT_OK
    bad = [r for r in results if r.outcome not in ("done", "already_done", "skipped")]
    if bad and all(r.detail.get("code") == "drive_unavailable" for r in bad):
        return EXIT_DRIVE_UNAVAILABLE
    return EXIT_OP_FAILED


__all__ = [
    "PHASE_QUIET",
    "StepProgress",
    "cmd_accept",
    "effect_lines",
    "exit_code",
    "flag_counts",
    "register",
]
