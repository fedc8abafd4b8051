"""The one decision core: accept, discard and extend one or several proposals.

Every way the owner decides (`placet accept` at a terminal, `placet review`, `placet
web` with a passkey, a standing rule) calls this package and keeps only its own input
and display: the state and binding checks, the request hash and selection shown, the
approval's proof and origin (`Proof`), the audit detail, the all-or-nothing decision on
a set and the hand-off to this process's executor or to the host a proposal was made on
all live here, so a cause is refused with one code everywhere (docs/errors.md). Below
the shells, above the executor (docs/design.md section 2); no user interface's
framework. The shells never call the store's accept, discard or extend themselves
(tests/project/test_decision_core.py).

    accepted = decisions.accept(store, settings, [Shown.of(record)], Proof.tui(fd))
    for a in accepted:
        final = decisions.run(store, settings, a) if a.runs_here else a.waiting
"""

from __future__ import annotations

from placet.decisions.checks import Checked, check, state_refusal
from placet.decisions.deciding import (
    Executor,
    accept,
    discard,
    extend,
    leave,
    run,
    set_entries,
)
from placet.decisions.model import Accepted, Proof, Shown, Via
from placet.decisions.warming import WarmDrive, warm_for, warms

__all__ = [
    "Accepted",
    "Checked",
    "Executor",
    "Proof",
    "Shown",
    "Via",
    "WarmDrive",
    "accept",
    "check",
    "discard",
    "extend",
    "leave",
    "run",
    "set_entries",
    "state_refusal",
    "warm_for",
    "warms",
]
