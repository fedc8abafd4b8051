"""Verifying the audit as a whole: the hash chain, and each rule approval against the
signed rules it used.

`Store.verify_audit` walks the chain and the anchor file and re-verifies every passkey
signature (`placet.store.audit`); a rule approval made in signed mode is then checked
against the signed rules it names (`placet.rules.signing.verify_rule_approvals`), with the
proposal's ops read as the executor reads them. `placet audit --verify`, the review UI
and the web page's audit call `verify_audit`, so all three report the same.
"""

from __future__ import annotations

from placet.executor.ops import load_plan
from placet.rules.signing import verify_rule_approvals
from placet.store import AuditVerification, Store

__all__ = ["verify_audit"]


def verify_audit(store: Store) -> AuditVerification:
    """The chain's verification, failed at the first rule approval whose signed rules
    (hash, signature, the rule covering the proposal) no longer hold."""
    chain = store.verify_audit()
    if not chain.ok:
        return chain
    rules = verify_rule_approvals(
        store, store.settings, store.audit_events(), lambda r: load_plan(store, r).ops
    )
    if not rules.ok:
        eid = rules.first_bad[0] if rules.first_bad else None
        return AuditVerification(False, chain.count, eid, rules.message())
    if not rules.checked and not rules.unsigned:
        return chain
    return AuditVerification(True, chain.count, None, f"{chain.message}; {rules.message()}")
