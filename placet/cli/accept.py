"""`placet accept ID... [--yes] [--skip INDEX]...`: the owner's headless decision on one
or several proposals, then their execution with progress on stderr.

Each proposal's effect is shown from the ops the executor runs, placet's risk flags
above the agent's reason and the request hash the approval binds to (docs/design.md
section 9). One random code, written to and read back from the controlling terminal,
approves all of them or none (`placet.decisions`; ``via: "terminal"``), so a command
without one (an agent's shell tool, a pipe) cannot approve; `--yes` skips it only with
`allow_yes = true` (docs/security.md). `--skip INDEX` unticks an op of one sync. An
approved proposal runs without asking again; one made on another host is only approved
here (docs/decisions/0021-hosts.md). Progress goes to stderr, one live line and a summary
(`placet.cli.accept_progress`; docs/decisions/0034-cli.md);
Ctrl-C interrupts cleanly, a second quits at once. Exit codes: docs/errors.md.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Callable, Iterable
from types import FrameType
from typing import Any

from placet import decisions
from placet.cli.accept_effect import effect_lines, flag_counts
from placet.cli.accept_progress import PHASE_QUIET, RunProgress, StepProgress, summary_line
from placet.cli.confirming import code_typed, no_terminal, terminal, yes_allowed
from placet.config import Settings, load_settings
from placet.decisions import Accepted, Proof, Shown, WarmDrive, warm_for
from placet.drive.base import Drive
from placet.errors import (
    EXIT_DRIVE_UNAVAILABLE,
    EXIT_OK,
    EXIT_OP_FAILED,
    PlacetError,
    PolicyRefused,
    UsageError,
    one_or_set,
)
from placet.executor import Plan, check_binding, execute, load_plan
from placet.proposals.risk import RiskFlag
from placet.proposals.vetting import proposal_flags
from placet.store import OpResultRecord, ProposalRecord, Store, open_store
from placet.store.db import utcnow
from placet.store.host import host_label, runs_elsewhere
from placet.store.lifecycle import APPROVED
from placet.text import inert


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `accept` to the `placet` parser."""
    p = subparsers.add_parser(
        "accept",
        help="accept proposals (one confirmation code on the terminal) and execute them",
        description="Show each proposal's exact effect, ask for one confirmation code on "
        "the terminal, record the approval of all of them (or of none) and execute them.",
    )
    p.add_argument(
        "ids", type=int, nargs="+", metavar="ID", help="the proposal id(s) (see `placet list`)"
    )
    p.add_argument(
        "--yes",
        action="store_true",
        help="skip the confirmation code; works only with allow_yes = true in config.toml",
    )
    p.add_argument(
        "--verbose",
        action="store_true",
        help="print a line for every op as it ends (by default only for ops not done, "
        "beside one progress line)",
    )
    p.add_argument(
        "--skip",
        type=int,
        action="append",
        default=[],
        metavar="INDEX",
        help="one sync only: leave op INDEX out (repeatable); it is recorded as skipped",
    )
    p.set_defaults(func=cmd_accept)


def cmd_accept(args: argparse.Namespace) -> int:
    settings = load_settings()
    ids: list[int] = list(args.ids)
    yes_allowed(settings, ids, args.yes)
    if args.skip and len(ids) > 1:
        raise UsageError(
            "--skip leaves out ops of one sync: accept that sync alone with --skip, and "
            "the others without it",
            code="skip_invalid",
            details={"proposal_ids": ids},
        )
    with open_store(settings) as store:
        store.sweep()
        records = [store.get(i) for i in ids]
        # rcd starts while the ops are read, checked and confirmed (`decisions.warming`)
        with warm_for(settings, store.host_id, records) as warm:
            return _decide(store, settings, records, args, warm)


def _decide(
    store: Store,
    settings: Settings,
    records: list[ProposalRecord],
    args: argparse.Namespace,
    warm: WarmDrive,
) -> int:
    """Show `records`, ask for the code, accept and run those of this host on `warm`."""
    ids: list[int] = list(args.ids)
    if len(records) == 1 and records[0].status == APPROVED:
        return _run_approved(store, settings, records[0], args.skip, args.verbose, warm)
    shown = _show(store, settings, records, args.skip)
    with terminal() as tty:
        if not args.yes:
            if tty is None:
                raise no_terminal(ids, settings)
            _confirm(tty, shown)
        accepted = decisions.accept(
            store, settings, [s for s, _ in shown], Proof.terminal(tty, yes=args.yes)
        )
    codes = []
    for a in accepted:
        if a.runs_here:
            continue
        where = host_label(inert(a.record.host), a.record.host_id)  # a database value
        _emit(
            [
                f"proposal {a.proposal_id} is approved; it was made on host {where}, "
                "where its files are, and that host runs it: `placet executor` there "
                f"runs it now, or `placet accept {a.proposal_id}` there"
            ]
        )
    here = [a for a in accepted if a.runs_here]
    for n, a in enumerate(here):
        code, stopped = _run(store, settings, a, args.verbose, warm)
        codes.append(code)
        if stopped:
            _leave_rest(here[n + 1 :])
            break
    return _worst(codes)


def _show(
    store: Store, settings: Settings, records: list[ProposalRecord], skip: list[int]
) -> list[tuple[Shown, list[RiskFlag]]]:
    """Check each proposal (`decisions.check`: every refusal before the code is asked,
    all of them listed for a set) and print its effect; returns what was shown."""
    now = utcnow()
    shown: list[tuple[Shown, list[RiskFlag]]] = []
    refused: list[tuple[int, PlacetError]] = []
    for record in records:
        # a sync's ops read a page at a time, verified against its digest, held once:
        # the executor runs this same plan (`decisions.run`)
        reading = StepProgress("reading the ops")
        try:
            checked = decisions.check(
                store, settings, Shown.of(record, skip), now=now, on_page=reading
            )
        except PlacetError as e:
            refused.append((record.id, e))
            continue
        plan = checked.plan
        reading.done(len(plan.ops))
        flagging = StepProgress("checking the ops for risk flags")
        flags = proposal_flags(record, plan.ops)
        flagging.done(len(plan.ops))
        _emit(effect_lines(record, plan.ops, sorted(set(skip)), flags=flags))
        shown.append((Shown.of(record, skip, plan), flags))
    if refused:
        raise one_or_set("accept", len(records), refused)
    return shown


def _run_approved(
    store: Store,
    settings: Settings,
    record: ProposalRecord,
    skip: list[int],
    verbose: bool,
    warm: WarmDrive,
) -> int:
    """A proposal already approved (elsewhere, never claimed): shown, then executed here
    (on the `warm` drive) without asking again, or left to the host it was
    made on."""
    if skip:
        raise UsageError(
            f"cannot skip ops of proposal {record.id}: it is already approved, with the "
            "selection made then; run it without --skip",
            code="skip_invalid",
            details={"proposal_id": record.id},
        )
    elsewhere = runs_elsewhere(record.host_id, store.host_id)
    check_binding(settings, record, elsewhere=elsewhere)
    reading = StepProgress("reading the ops")
    plan = load_plan(store, record, on_page=reading)
    reading.done(len(plan.ops))
    _emit(effect_lines(record, plan.ops, [], flags=proposal_flags(record, plan.ops)))
    if elsewhere:
        where = host_label(inert(record.host), record.host_id)
        _emit(
            [
                f"proposal {record.id} is approved; it was made on host {where}, where its "
                "files are, and that host runs it: `placet executor` there runs it now, or "
                f"`placet accept {record.id}` there"
            ]
        )
        return EXIT_OK
    _emit([f"proposal {record.id} was already approved; executing it now"])
    return _execute(store, settings, record, plan, verbose=verbose, drive=warm.drive())


def _leave_rest(rest: list[Accepted]) -> None:
    """Stopped mid-set: the proposals not run yet stay approved; this host's placet
    runs them (or `placet accept ID`)."""
    for a in rest:
        decisions.leave(a)
    if rest:
        ids = ", ".join(str(a.proposal_id) for a in rest)
        _emit(
            [f"proposal(s) {ids} stay approved: `placet accept ID` or `placet executor` runs them"]
        )


def _worst(codes: list[int]) -> int:
    """0 when every run succeeded; 5 when every failed one could not reach the drive
    (retryable); else 1."""
    bad = [c for c in codes if c != EXIT_OK]
    if not bad:
        return EXIT_OK
    return EXIT_DRIVE_UNAVAILABLE if all(c == EXIT_DRIVE_UNAVAILABLE for c in bad) else bad[0]


def _emit(lines: list[str]) -> None:
    for line in lines:
        sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _covers(op_count: int, flags: list[RiskFlag]) -> str:
    """What the code accepts, said in the prompt: the op count and every risk flag by kind."""
    said = f"{len(flags)} risk flag(s): {flag_counts(flags)}" if flags else "no risk flags"
    return f"{op_count} op(s), {said}, all listed above"


def _confirm(tty: int, shown: list[tuple[Shown, list[RiskFlag]]]) -> None:
    """Write a fresh code to the terminal and read it back from the terminal. The prompt
    names each proposal with its request hash and repeats what the code covers (op
    count, risk flags by kind), so one code is typed for exactly those.

    Raises:
        PolicyRefused (code ``confirmation_mismatch``): something else was typed.
    """
    op_count = sum(len(s.plan.ops) for s, _ in shown if s.plan is not None)
    covers = _covers(op_count, [f for _, fl in shown for f in fl])
    if len(shown) == 1:
        s = shown[0][0]
        skip = sorted(s.skip_ops)
        what = f"proposal {s.proposal_id} (request hash {s.request_hash[:16]}...) with {covers}" + (
            f" without op(s) {', '.join(f'#{i}' for i in skip)}" if skip else ""
        )
    else:
        each = ", ".join(f"{s.proposal_id} ({s.request_hash[:12]})" for s, _ in shown)
        what = f"the {len(shown)} proposals {each} (id, request hash) with {covers}"

    def prompt(code: str) -> str:
        return (
            f"\nTo accept {what}, type the code {code} and press Enter (anything else declines): "
        )

    if not code_typed(tty, prompt):
        ids = [s.proposal_id for s, _ in shown]
        raise PolicyRefused(
            f"proposal {', '.join(map(str, ids))} "
            f"{'was' if len(ids) == 1 else 'were'} not accepted: the confirmation code did "
            "not match; nothing changed",
            code="confirmation_mismatch",
            details={"proposal_ids": ids},
        )


# ---- execution with progress on stderr ---------------------------------------------------


def _run(
    store: Store, settings: Settings, accepted: Accepted, verbose: bool, warm: WarmDrive
) -> tuple[int, bool]:
    """Execute `accepted` here with progress on stderr (`decisions.run`, on the `warm`
    drive); returns its exit code and whether the owner stopped it (Ctrl-C)."""
    record = accepted.record
    drive = warm.drive()
    plan = accepted.plan if accepted.plan is not None else load_plan(store, record)
    cancel = threading.Event()
    code = _execute(
        store,
        settings,
        record,
        plan,
        cancel=cancel,
        verbose=verbose,
        run=lambda progress: decisions.run(
            store, settings, accepted, progress=progress, cancel=cancel, drive=drive
        ),
    )
    return code, cancel.is_set()


def _execute(
    store: Store,
    settings: Settings,
    record: ProposalRecord,
    plan: Plan,
    *,
    cancel: threading.Event | None = None,
    verbose: bool = False,
    run: Callable[[RunProgress], ProposalRecord] | None = None,
    drive: Drive | None = None,
) -> int:
    """Execute `record` (`run(progress)`, default `execute` with the plan shown, on
    `drive` if given), Ctrl-C stopping it cleanly, and print its outcome; returns the
    exit code."""
    stop = cancel or threading.Event()

    def on_sigint(signum: int, frame: FrameType | None) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()
        sys.stderr.write("\nstopping after cleaning up (Ctrl-C again to quit at once)\n")

    previous: Any = signal.signal(signal.SIGINT, on_sigint)
    shown = RunProgress(verbose=verbose)
    try:
        if run is not None:
            final = run(shown)
        else:
            final = execute(
                store, settings, record.id, progress=shown, cancel=stop, drive=drive, shown=plan
            )
    finally:
        signal.signal(signal.SIGINT, previous)
        figures = shown.finish()
    del plan, shown  # the ops are not needed to count the journal
    counts = store.outcome_counts(final.id)
    _emit([summary_line(final.id, final.status, counts, figures)])
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
