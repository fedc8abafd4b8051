"""`placet rules`: the owner's standing rules, as placet reads them.

    placet rules list            each rule, its approvals in the last 7 days, paused or not
    placet rules test [ID ...]   for the given proposals (default: pending and the last
                                 day's): which rule would approve or forbid each, and for
                                 every allow that would not, the first condition that failed
    placet rules resume RULE     a rule paused by a failed run approves again
    placet rules sign            the rules page of `placet web`, to sign the file (signed mode)

The rules live in `rules.toml` beside `config.toml` (`placet.rules`); no MCP tool reads or
writes them. These commands read the file exactly as `placet serve` does, so a file they
report refused applies no rule there either (the roots checked are those the recent
proposals used).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable
from datetime import timedelta
from pathlib import Path

from placet.config import Settings, load_settings
from placet.errors import EXIT_OK, EXIT_OP_FAILED, NotFound, PlacetError
from placet.rules.ledger import RuleLedger
from placet.rules.loading import RulesState, load_rules
from placet.rules.model import Rule
from placet.store import ProposalRecord, Store, open_store
from placet.store.db import utcnow
from placet.store.lifecycle import rule_of
from placet.text import inert

WEEK = timedelta(days=7)
RECENT = timedelta(days=1)
RECENT_LIMIT = 200


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `rules` and its subcommands to the `placet` parser."""
    p = subparsers.add_parser("rules", help="standing rules: list, test, resume, sign")
    sub = p.add_subparsers(dest="rules_command", metavar="SUBCOMMAND", required=True)
    lst = sub.add_parser("list", help="list the rules, their approvals this week, paused or not")
    lst.set_defaults(func=cmd_list)
    t = sub.add_parser("test", help="say which rule would approve or forbid each proposal")
    t.add_argument("ids", nargs="*", type=int, metavar="ID", help="proposal ids (default: "
                   "pending ones and those of the last day)")  # fmt: skip
    t.set_defaults(func=cmd_test)
    r = sub.add_parser("resume", help="let a rule paused by a failed run approve again")
    r.add_argument("rule", help="the rule's id")
    r.set_defaults(func=cmd_resume)
    sg = sub.add_parser("sign", help="name the page of `placet web` that signs the rules file")
    sg.add_argument("--port", type=int, default=8765, help="placet web's port (default 8765)")
    sg.add_argument("--open", action="store_true", help="open the page in a browser too")
    sg.set_defaults(func=cmd_sign)


def _state(settings: Settings, store: Store) -> RulesState:
    return load_rules(settings, roots=[Path(p) for p in RuleLedger(store).recent_roots()])


def _conditions(rule: Rule) -> str:
    parts = [",".join(rule.kinds), f"drive:/{rule.remote_prefix}"]
    if rule.local_folder is not None:
        parts.append(f"local {rule.local_folder}")
    for key in ("max_bytes", "max_bytes_per_proposal", "max_per_hour"):
        value = getattr(rule, key)
        if value is not None:
            parts.append(f"{key}={value}")
    if rule.drive is not None:
        parts.append(f"drive={rule.drive}")
    if rule.clients is not None:
        parts.append(f"clients={','.join(rule.clients)}")
    if rule.expires is not None:
        parts.append(f"expires {rule.expires.isoformat()}")
    return inert(" ".join(parts))


def _with_rules(fn: Callable[[Settings, Store, RulesState], int]) -> int:
    """Print the rules file's state; when it is usable, `fn(settings, store, state)`'s
    exit code, else 0 for no file and 1 for a refused one."""
    settings = load_settings()
    with open_store(settings) as store:
        state = _state(settings, store)
        print(inert(state.line()))
        if not state.usable or state.sha256 is None:
            return EXIT_OK if state.status == "absent" else EXIT_OP_FAILED
        return fn(settings, store, state)


def cmd_list(args: argparse.Namespace) -> int:
    return _with_rules(_list)


def _list(settings: Settings, store: Store, state: RulesState) -> int:
    now = utcnow()
    ledger = RuleLedger(store)
    week = ledger.uses_since(now - WEEK)
    width = max((len(r.id) for r in state.rules), default=2)
    print(f"{'ID':<{width}}  {'EFFECT':<6}  {'7 DAYS':>6}  {'STATE':<28}  COVERS")
    for rule in state.rules:
        until = rule.expires_at()
        if until is not None and now >= until:
            shown = "expired"
        elif rule.effect == "forbid":
            shown = "in force"
        else:
            failed = ledger.paused_by(rule.id)
            shown = "active" if failed is None else f"PAUSED (proposal {failed} failed)"
        used = week.get(rule.id, 0) if rule.effect == "allow" else "-"
        print(f"{rule.id:<{width}}  {rule.effect:<6}  {used:>6}  {shown:<28}  "
              f"{_conditions(rule)}")  # fmt: skip
    return EXIT_OK


def _chosen(store: Store, ids: list[int]) -> Iterable[ProposalRecord]:
    if ids:
        yield from (store.get(i) for i in ids)
        return
    since = utcnow() - RECENT
    seen: set[int] = set()
    for rec in store.list(["pending"], limit=RECENT_LIMIT):
        seen.add(rec.id)
        yield rec
    for rec in store.list(limit=RECENT_LIMIT, newest_first=True):
        if rec.id not in seen and rec.created_at >= since:
            yield rec


def _test_line(
    store: Store, settings: Settings, state: RulesState, rec: ProposalRecord
) -> list[str]:
    from placet.cli.proposals import _target
    from placet.executor import load_plan
    from placet.rules.deciding import judge

    head = f"{rec.id:>6}  {rec.status:<10} {inert(rec.kind):<8} {_target(rec)}"
    by = rule_of(rec.resolved_by)
    if by is not None:
        return [f"{head}", f"        approved by rule {inert(by)}"]
    try:
        ops = load_plan(store, rec).ops
        verdict, stopped = judge(store, settings, rec, ops, state, now=utcnow())
    except PlacetError as e:
        return [head, f"        no rule can judge it: {inert(e.message)}"]
    if verdict.effect == "forbid":
        return [head, f"        forbidden: {inert(verdict.reason)}"]
    if verdict.effect == "allow":
        rid = inert(verdict.rule_id or "")
        if stopped is not None:
            return [head, f"        rule {rid} covers it, but {inert(stopped)}"]
        return [head, f"        rule {rid} would approve it"]
    out = [head, f"        no rule: {inert(verdict.reason)}"]
    out += [f"          {inert(m.rule_id)}: {inert(m.condition)}" for m in verdict.misses]
    return out


def cmd_test(args: argparse.Namespace) -> int:
    def test(settings: Settings, store: Store, state: RulesState) -> int:
        lines: list[str] = []
        for rec in _chosen(store, list(args.ids)):
            lines += _test_line(store, settings, state, rec)
        print("\n".join(lines) if lines else "no pending or recent proposals")
        return EXIT_OK

    return _with_rules(test)


def cmd_resume(args: argparse.Namespace) -> int:
    settings = load_settings()
    with open_store(settings) as store:
        state = _state(settings, store)
        known = [r.id for r in state.rules if r.effect == "allow"]
        if args.rule not in known:
            where = "" if state.usable else f" ({inert(state.line())})"
            raise NotFound(
                f"no allow rule {inert(args.rule)!r} in the rules file{where}; the allow "
                f"rules are: {', '.join(map(inert, known)) or 'none'}",
                details={"rule": args.rule, "rules": known},
            )
        ledger = RuleLedger(store)
        failed = ledger.paused_by(args.rule)
        ledger.resume(args.rule, now=utcnow())
    if failed is None:
        print(f"rule {inert(args.rule)} was not paused; nothing changed")
    else:
        print(f"rule {inert(args.rule)} resumed (proposal {failed}'s failed run paused it)")
    return EXIT_OK


def cmd_sign(args: argparse.Namespace) -> int:
    """Say which file would be signed (its SHA-256, to compare with the page) and where:
    signing needs the owner's passkey, so it happens on `placet web`'s rules page."""
    import webbrowser

    from placet.config import approvals_mode
    from placet.rules.signing import signature_for

    def sign(settings: Settings, store: Store, state: RulesState) -> int:
        signed, why = signature_for(store, settings, state)
        url = f"http://localhost:{args.port}/rules"
        print(f"sha256 {state.sha256}")
        print("signed: yes" if signed is not None else f"signed: no ({inert(why)})")
        if approvals_mode(settings) != "signed":
            print('approvals = "terminal": rules approve unsigned; a signature matters only '
                  "in signed mode")  # fmt: skip
        print(f"sign it with your passkey at {url} (start `placet web` first if it is not "
              "running)")  # fmt: skip
        if args.open:
            webbrowser.open(url)
        return EXIT_OK

    return _with_rules(sign)
