"""Signed rules: with ``approvals = "signed"``, a rule approves only while the rules file's
current bytes carry the owner's passkey signature."""

from __future__ import annotations

from typing import Any

from placet.config import Settings
from placet.rules.loading import RulesState
from placet.store import Store

__all__ = ["signature_for"]


def signature_for(
    store: Store, settings: Settings, state: RulesState
) -> tuple[dict[str, Any] | None, str]:
    """(the stored signature over `state`'s bytes, "") or (None, why there is none)."""
    return None, "the rules file is not signed (`placet rules sign`)"
