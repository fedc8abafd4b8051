"""`refuse_own_paths` resolves each folder of a sync's targets once (a 100,000-op sync
shares a few thousand folders) and still finds a write into placet's own folders through
a symlinked folder or a symlinked last name (docs/design.md section 6)."""

from __future__ import annotations

import os

import pytest

from placet.errors import PolicyRefused
from placet.executor import load_plan
from placet.proposals.vetting import refuse_own_paths
from placet.schema import Op, RemoteEvidence
from tests.support.rig import Rig, mkdir_ops


@pytest.mark.parametrize("target", ["alias/x", "real/alias", "real/alias/y", "real/x/../alias"])
def test_a_symlink_anywhere_in_the_target_into_placet_data_is_refused(
    rig: Rig, target: str
) -> None:
    assert rig.remote_dir is not None
    (rig.remote_dir / "real").mkdir()
    os.symlink(rig.settings.data_dir, rig.remote_dir / "alias")
    os.symlink(rig.settings.data_dir, rig.remote_dir / "real" / "alias")
    fine = [f"real/f{i}" for i in range(50)]  # many targets in one folder first
    ops = [*mkdir_ops([*fine, target])]
    rec, _ = rig.propose_ops(ops)
    plan = load_plan(rig.store, rec)
    with pytest.raises(PolicyRefused) as refused:
        refuse_own_paths(rig.settings, rec, plan.ops)
    assert refused.value.error_code == "placet_own_path"
    assert refused.value.details["op_index"] == len(fine)


def test_targets_beside_a_symlink_are_not_refused(rig: Rig) -> None:
    assert rig.remote_dir is not None
    (rig.remote_dir / "real").mkdir()
    os.symlink(rig.settings.data_dir, rig.remote_dir / "real" / "alias")
    absent = RemoteEvidence(exists=False)
    ops = [Op(index=i, kind="mkdir", remote_path=f"real/alias{i}", expected_remote=absent)
           for i in range(3)]  # fmt: skip
    rec, _ = rig.propose_ops(ops)
    refuse_own_paths(rig.settings, rec, load_plan(rig.store, rec).ops)
