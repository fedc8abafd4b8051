"""The lifecycle table names each transition's target once (`placet.store.lifecycle`);
the store's compare-and-set takes it from there unless the caller names it."""

from __future__ import annotations

import pytest

from placet.store import lifecycle as lc


def test_a_transition_with_one_target_names_it() -> None:
    assert lc.target_of("accept") == lc.APPROVED
    assert lc.target_of("extend") == lc.PENDING
    assert lc.target_of("interrupt") == lc.INTERRUPTED


def test_finish_has_two_targets_and_must_be_told_which() -> None:
    with pytest.raises(ValueError, match="finish has 2 targets"):
        lc.target_of("finish")
