"""Downloads that would replace local files, against the root's `downloads` policy.

A sync plan may download onto an existing local file: a fast-forward download (the
drive's copy is newer than the baseline) or a conflict decided `keep_remote`. Under the
default policy `downloads = "new-only"` (docs/design.md section 6) the executor refuses such a
download, so a proposal holding one could only fail after the owner accepted it. This
module decides which plan entries are such downloads, so `sync_plan` marks them and
`propose_sync` refuses the whole proposal up front (as `propose_download` does), saying
how the owner allows it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from placet.errors import PolicyRefused
from placet.proposals.context import ProposeContext
from placet.sync.model import PlanOp, SyncPlan
from placet.sync.ops import check_decisions
from placet.text import inert

if TYPE_CHECKING:
    from placet.sync.service import SyncService


def replaces_local(o: PlanOp) -> bool:
    """A download onto an existing local file (the executor's `replace`)."""
    return o.kind == "download" and o.local is not None


def replacing_downloads(
    plan: SyncPlan, decided: Mapping[str, str] | None
) -> tuple[list[str], list[str]]:
    """(plain downloads replacing a local file, conflicts whose keep_remote would do so),
    as plan paths; with `decided`, only the conflicts decided keep_remote."""
    plain = [o.path for o in plan.ops if replaces_local(o)]
    kept = [
        r.path
        for r in plan.conflicts
        if r.local is not None
        and "keep_remote" in r.allowed_decisions
        and (decided is None or decided.get(r.path) == "keep_remote")
    ]
    return plain, kept


def policy_note(root_path: str) -> str:
    """How the owner lets a sync replace local files in the root at `root_path`."""
    return (
        f'the owner allows replacing local files by adding to config.toml [roots."{root_path}"] '
        'then downloads = "allow-overwrite"; else decide keep_local or skip for such conflicts'
    )


def refuse_blocked_downloads(
    svc: SyncService, who_ctx: ProposeContext, plan_id: int, decisions: Mapping[str, str]
) -> None:
    """Refuse up front a sync whose downloads would replace local files against the root's
    `downloads` policy (docs/design.md section 6), as `propose_download` does, rather than let
    them fail `refused` when the owner has accepted.

    Raises:
        PolicyRefused (`refused`): details name the root, the policy and the paths.
        UsageError: a decision refused (as `propose_sync`).
    """
    stored = svc.load_plan(plan_id)
    if stored.pair.drive_spec != who_ctx.drive_spec:
        return  # propose_sync refuses it as drive_changed
    policy = svc.settings.download_policy(Path(stored.pair.root_path))
    if policy == "allow-overwrite":
        return
    plain, kept = replacing_downloads(stored.plan, check_decisions(stored.plan, decisions))
    if not plain and not kept:
        return
    paths = sorted(plain + kept)
    shown = ", ".join(repr(x) for x in paths[:10]) + (
        f" and {len(paths) - 10} more" if len(paths) > 10 else ""
    )
    advice = (
        f'to allow it, the owner adds to config.toml [roots."{stored.pair.root_path}"] then '
        'downloads = "allow-overwrite"'
    )
    if kept:
        advice += "; or decide skip (or keep_local) for the conflicts decided keep_remote"
    raise PolicyRefused(
        inert(
            f"refusing to propose sync plan {plan_id}: {len(paths)} download(s) would replace "
            f"existing local files ({shown}) and the owner's policy for root "
            f"{stored.root_name} is downloads = {policy!r} (new files only); {advice}"
        ),
        details={
            "plan_id": plan_id,
            "root": stored.root_name,
            "root_path": stored.pair.root_path,
            "policy": policy,
            "paths": plain[:100],
            "keep_remote_paths": kept[:100],
        },
    )
