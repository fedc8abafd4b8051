"""Standing rules benchmark: what judging every proposal costs, and how soon a rule's
approval has run.

Two real `placet serve` processes, each an owner's machine of its own (HOME and the XDG
folders in a temp dir, no `PLACET_HOME`: rules apply only from the default config
folder), driven with the official client over stdio:

- `propose_mkdir` round trip, interleaved call by call, on a server **without** a rules
  file and on one whose `rules.toml` holds **100 rules** that none of the proposals
  matches (98 allows with other prefixes, 2 forbids elsewhere): each proposal is read,
  hashed, and judged by all 100 (target: p50 at most 1.2x);
- the same judging **in-process** (`apply_rules` on a stored mkdir proposal: the rules
  file read, hashed and judged by the 100 rules, vs no rules file), without MCP, rclone
  or a second process in the figure;
- proposal to `succeeded` for a **rule-approved 4 KiB upload** on the default drive (the
  local folder in placet's data dir): from the `propose_upload` call until
  `proposal_wait` reports `succeeded`, each upload a new file.

Usage: .venv/bin/python bench/rules.py [--calls 300] [--uploads 50] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

PLACET = str(Path(sys.executable).parent / "placet")
RAISED_CAP = 10_000_000


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(q * (len(ordered) - 1))))]


def summary(values: list[float]) -> dict[str, float]:
    ms = [v * 1000 for v in values]
    return {
        "n": len(ms),
        "p50_ms": round(pct(ms, 0.50), 3),
        "p99_ms": round(pct(ms, 0.99), 3),
        "mean_ms": round(statistics.fmean(ms), 3),
    }


def hundred_rules() -> str:
    out = []
    for i in range(98):
        out.append(
            f'[[rule]]\nid = "allow-{i:03d}"\neffect = "allow"\n'
            f'kinds = ["mkdir", "upload"]\nremote_prefix = "projects/p{i:03d}"\n'
            f"max_bytes = 1048576\nmax_per_hour = 100\n"
            f'match = ["projects/p{i:03d}/a"]\nnot_match = ["projects/p{i:03d}-old/a"]\n'
        )
    for i in range(2):
        out.append(
            f'[[rule]]\nid = "forbid-{i}"\neffect = "forbid"\nkinds = ["upload", "mkdir"]\n'
            f'remote_prefix = "private{i}"\n'
        )
    return "\n".join(out)


UPLOAD_RULE = """[[rule]]
id = "small-uploads"
effect = "allow"
kinds = ["upload"]
remote_prefix = "up"
max_bytes = 4096
"""


def machine(base: Path, name: str, rules: str | None) -> tuple[dict[str, str], Path]:
    """An owner's environment under `base/name` (config with raised caps, `rules` as
    its rules.toml when given) and a project root; returns (env, root)."""
    home = base / name
    env = machine_env(home)
    config = home / ".config" / "placet"
    config.mkdir(parents=True, mode=0o700)
    (config / "config.toml").write_text(
        f"pending_per_session = {RAISED_CAP}\npending_total = {RAISED_CAP}\n"
    )
    if rules is not None:
        (config / "rules.toml").write_text(rules)
        (config / "rules.toml").chmod(0o600)
    root = home / "proj"
    root.mkdir()
    return env, root


def in_process(base: Path, n: int) -> dict[str, Any]:
    """`apply_rules` timed in this process: the owner's machine `hundred` (100 rules) and
    `none` (no rules file), on mkdir proposals of their own stores."""
    from placet.config import load_settings
    from placet.executor import load_plan
    from placet.rules.deciding import apply_rules
    from placet.store import open_store

    out: dict[str, Any] = {}
    for name in ("none", "hundred"):
        env = machine_env(base / name)
        os.environ.pop("PLACET_HOME", None)
        os.environ.update(env)  # platformdirs reads the process's environment
        settings = load_settings()
        if not settings.data_dir.is_relative_to(base / name):
            raise RuntimeError(f"the bench's settings left its folder: {settings.data_dir}")
        times: list[float] = []
        with open_store(settings) as store:
            for i in range(n + 20):
                rec, _ = store.create_proposal(
                    kind="mkdir",
                    request={"kind": "mkdir", "remote_parent": "inproc", "name": f"p{i:06d}"},
                    evidence={"remote": {"exists": False}},
                    reason="b", drive_spec=str(settings.default_drive_dir),
                    run_id=f"inproc-{i // 50}", ttl_seconds=600,
                )  # fmt: skip
                t0 = time.perf_counter()
                got = apply_rules(
                    store, settings, rec, ops_of=lambda r=rec: load_plan(store, r).ops,
                    roots=(), env=env,
                )  # fmt: skip
                if got.approved_by is not None:
                    raise RuntimeError("a bench proposal was approved")
                if i >= 20:
                    times.append(time.perf_counter() - t0)
        out["no_rules" if name == "none" else "100_rules"] = summary(times)
    return out


def machine_env(home: Path) -> dict[str, str]:
    """The environment of the owner's machine `home` (`machine`)."""
    return {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local/share"),
        "XDG_CACHE_HOME": str(home / ".cache"),
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    from mcp import Client, StdioServerParameters
    from mcp.types import Implementation

    base = Path(tempfile.mkdtemp(prefix="placet-bench-rules-"))
    info = Implementation(name="bench", version="1")
    plain_env, plain_root = machine(base, "none", None)
    rules_env, rules_root = machine(base, "hundred", hundred_rules())
    up_env, up_root = machine(base, "upload", UPLOAD_RULE)

    def params(env: dict[str, str], root: Path) -> StdioServerParameters:
        return StdioServerParameters(command=PLACET, args=["serve", "--root", str(root)], env=env)

    out: dict[str, Any] = {
        "machine": f"{os.cpu_count()} vCPU {platform.machine()}, "
        f"Python {platform.python_version()}",
        "calls": args.calls,
    }
    async with (
        Client(params(plain_env, plain_root), client_info=info) as none,
        Client(params(rules_env, rules_root), client_info=info) as hundred,
    ):
        times: dict[str, list[float]] = {"no_rules": [], "100_rules": []}
        pair = [("no_rules", none), ("100_rules", hundred)]
        for i in range(-args.warmup, args.calls):
            for key, client in pair if i % 2 else pair[::-1]:  # each goes first in turn
                t0 = time.perf_counter()
                r = await client.call_tool(
                    "propose_mkdir", {"remote_parent": "bench", "name": f"m{i + 100:07d}",
                                      "reason": "benchmark"},
                )  # fmt: skip
                took = time.perf_counter() - t0
                if r.is_error or (r.structured_content or {}).get("approved_by_rule"):
                    raise RuntimeError(f"{key}: unexpected reply {r.content[0].text}")  # type: ignore[union-attr]
                if i >= 0:
                    times[key].append(took)
        out["propose_mkdir"] = {k: summary(v) for k, v in times.items()}
        mk = out["propose_mkdir"]
        out["ratio_p50"] = round(mk["100_rules"]["p50_ms"] / mk["no_rules"]["p50_ms"], 3)

    out["apply_rules_in_process"] = in_process(base, args.calls)

    async with Client(params(up_env, up_root), client_info=info) as up:
        spans: list[float] = []
        for i in range(-3, args.uploads):
            name = f"r{i + 3:05d}.bin"
            (up_root / name).write_bytes(secrets.token_bytes(4096))
            t0 = time.perf_counter()
            made = await up.call_tool(
                "propose_upload", {"local_path": name, "remote_parent": "up", "reason": "b"}
            )
            sc = made.structured_content or {}
            if made.is_error or sc.get("approved_by_rule") != "small-uploads":
                raise RuntimeError(f"upload not approved by its rule: {made.content}")
            pid = sc["proposal"]["id"]
            while True:
                waited = await up.call_tool("proposal_wait", {"id": pid, "timeout_s": 20})
                status = (waited.structured_content or {})["proposal"]["status"]
                if status not in ("approved", "executing"):
                    break
            if status != "succeeded":
                raise RuntimeError(f"proposal {pid} ended {status}")
            if i >= 0:
                spans.append(time.perf_counter() - t0)
        out["rule_approved_4k_upload_to_succeeded"] = summary(spans)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--uploads", type=int, default=50)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    import anyio

    result = anyio.run(run, args)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"machine: {result['machine']}")
    for k, s in result["propose_mkdir"].items():
        print(f"propose_mkdir {k:10} p50 {s['p50_ms']:8.3f} ms  p99 {s['p99_ms']:8.3f} ms"
              f"  (n={s['n']})")  # fmt: skip
    print(f"p50 ratio, 100 rules vs none: {result['ratio_p50']} (target <= 1.2)")
    ip = result["apply_rules_in_process"]
    print(f"apply_rules in-process p50: no rules file {ip['no_rules']['p50_ms']:.3f} ms, "
          f"100 rules {ip['100_rules']['p50_ms']:.3f} ms")  # fmt: skip
    s = result["rule_approved_4k_upload_to_succeeded"]
    print(f"rule-approved 4 KiB upload, propose to succeeded: p50 {s['p50_ms']:.1f} ms, "
          f"p99 {s['p99_ms']:.1f} ms (n={s['n']})")  # fmt: skip


if __name__ == "__main__":
    main()
