"""`make demo`: a scripted agent proposes over MCP, you decide, files land on the drive.

What it does, all offline and with no account:

1. Creates a throwaway folder (`/tmp/placet-demo-XXXX`, or `--dir`) holding a small
   workspace (`workspace/`, the local root the agent may use) and a private placet data
   directory (`placet-home/`, used as `PLACET_HOME`). The demo never touches your real
   queue, database or drive (docs/decisions/0034-cli.md).
2. Puts one file on the default drive (`placet-home/drive/shared/readme-from-drive.txt`),
   written straight to disk as if it were already there, so the agent has something
   to download.
3. Runs the scripted agent (`examples/agent_session.py`): it starts `placet serve` over
   stdio with the official MCP client and proposes an upload, a new folder and a
   download. Nothing changes yet.
4. Opens `placet review` on that queue in your terminal: `a` accepts the selected
   proposal (confirm with `y` or Enter once the dialog is armed, half a second after
   it opens), `d` discards, `?` helps, `q` quits. Without a terminal (stdin or stdout
   not a tty, as in CI), or with `--auto`, it accepts every proposal through the
   executor instead, so it never waits for a person.
5. When you quit: the agent asks placet what became of its proposals, and the demo prints
   what is on the drive (path, size, SHA-256), what landed in the workspace, and the
   audit trail (`placet audit`, then `placet audit --verify`).

The folder is kept afterwards so you can look around; the last lines say how to use it
and how to remove it. Exit status: 0 when the demo ran (and, with `--auto`, every
proposal succeeded); 1 otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import agent_session as agent
import anyio

from placet.config import Settings, ensure_data_dir, load_settings

DRIVE_FILE = agent.DOWNLOAD
DRIVE_TEXT = (
    "Team readme (this file was on the drive before the demo started).\n"
    "Reports go in reports/, one file per week, in Markdown.\n"
)
WORKSPACE_FILES = {
    agent.UPLOAD: (
        "# Weekly report\n\n"
        "- Migrated the build to the new CI runner.\n"
        "- Closed 4 issues; 2 still need a decision.\n"
        "- Next week: ship the review UI.\n"
    ),
    "notes/todo.txt": "review placet proposals\nwrite next week's report\n",
    "src/hello.py": 'print("hello from the demo workspace")\n',
}


def out(line: str = "") -> None:
    print(line, flush=True)


def heading(text: str) -> None:
    out()
    out(f"== {text} ==")


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def make_base(requested: Path | None) -> Path:
    """The demo folder: `requested` (created, must be empty) or a new private temp dir."""
    if requested is None:
        return Path(tempfile.mkdtemp(prefix="placet-demo-"))
    base = requested.absolute()
    base.mkdir(parents=True, exist_ok=True, mode=0o700)
    if any(base.iterdir()):
        raise SystemExit(f"demo: refusing to use {base}: it is not empty; name a new folder")
    return base


def demo_env(home: Path) -> dict[str, str]:
    """This process's environment pointed at the demo home (and its default drive)."""
    env = {k: v for k, v in os.environ.items() if k not in agent.PLACET_ENV}
    env["PLACET_HOME"] = str(home)
    return env


def set_up(base: Path) -> tuple[Path, Settings]:
    """Write the workspace files and seed the default drive; return (workspace, settings)."""
    workspace = base / "workspace"
    for rel, text in WORKSPACE_FILES.items():
        path = workspace / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    settings = load_settings(demo_env(base / "placet-home"))
    ensure_data_dir(settings)
    seeded = settings.default_drive_dir / DRIVE_FILE
    seeded.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    settings.default_drive_dir.chmod(0o700)
    seeded.write_text(DRIVE_TEXT, encoding="utf-8")
    return workspace, settings


def list_tree(top: Path) -> list[tuple[str, int | None, str | None]]:
    """(relative path, size or None for folders, sha256 or None) under `top`, sorted."""
    rows: list[tuple[str, int | None, str | None]] = []
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames.sort()
        here = Path(dirpath)
        for d in dirnames:
            rows.append(((here / d).relative_to(top).as_posix() + "/", None, None))
        for f in sorted(filenames):
            p = here / f
            rows.append((p.relative_to(top).as_posix(), p.stat().st_size, sha256_file(p)))
    return sorted(rows)


def print_tree(title: str, top: Path) -> None:
    heading(title)
    out(f"({top})")
    for rel, size, sha in list_tree(top):
        if size is None:
            out(f"  {rel}")
        else:
            out(f"  {rel:<34} {size:>6} bytes  sha256 {sha}")


def review_interactively(placet: str, env: dict[str, str], ids: list[int]) -> None:
    heading("Your turn: placet review")
    out(f"The agent's proposals {', '.join(f'#{i}' for i in ids)} are waiting in the queue.")
    out("Keys: up/down select, a accept (then y or Enter, after a half-second guard),")
    out("      d discard, e extend, ? help, q quit when you are done.")
    with contextlib.suppress(EOFError):
        input("Press Enter to open placet review... ")
    # A stale exported COLUMNS/LINES would pin the UI's size (Textual reads them first).
    review_env = {k: v for k, v in env.items() if k not in ("COLUMNS", "LINES")}
    rc = subprocess.run([placet, "review"], env=review_env, check=False).returncode
    if rc != 0:
        out(f"(placet review exited with status {rc})")


def accept_all(settings: Settings, ids: list[int]) -> bool:
    """Accept each pending proposal in id order and run it through the executor."""
    from placet.executor import execute
    from placet.store import open_store

    heading("No terminal (or --auto): accepting every proposal through the executor")
    ok = True
    store = open_store(settings)
    try:
        for pid in ids:
            record = store.get(pid)
            if record.status != "pending":
                out(f"  #{pid} is {record.status}; left as it is")
                continue
            store.accept(
                pid,
                actor="owner",
                detail={"request_hash": record.request_hash, "via": "demo --auto", "tty": False},
            )
            final = execute(store, settings, pid)
            ops = ", ".join(f"{r.op.get('kind', '?')} {r.outcome}" for r in store.op_results(pid))
            out(f"  #{pid} {record.kind}: accepted, {final.status} ({ops})")
            ok = ok and final.status == "succeeded"
    finally:
        store.close()
    return ok


def print_audit(placet: str, env: dict[str, str]) -> None:
    heading("Audit trail (placet audit)")
    for args in (["audit"], ["audit", "--verify"]):
        done = subprocess.run([placet, *args], env=env, capture_output=True, text=True, check=False)
        text = (done.stdout + done.stderr).rstrip()
        if args[-1] == "--verify":
            out(f"placet audit --verify: {text}")
        else:
            out(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--auto", action="store_true", help="accept everything without opening the review UI"
    )
    parser.add_argument("--dir", type=Path, help="use this (new or empty) folder")
    parser.add_argument("--placet", default=agent.default_placet(), help="the placet command")
    args = parser.parse_args(argv)
    interactive = not args.auto and sys.stdin.isatty() and sys.stdout.isatty()
    placet = str(Path(args.placet).absolute())

    base = make_base(args.dir)
    workspace, settings = set_up(base)
    home = settings.data_dir
    env = demo_env(home)
    os.environ.update(PLACET_HOME=str(home))
    for key in ("PLACET_DB", "PLACET_DRIVE"):
        os.environ.pop(key, None)

    out("placet demo: an agent proposes, you decide, files land on the drive.")
    out(f"  demo folder   {base}")
    out(f"  workspace     {workspace}   (the only folder the agent may use)")
    out(f"  PLACET_HOME   {home}   (a throwaway home: your real queue is untouched)")
    out(f"  default drive {settings.default_drive_dir}   (a local folder; no account needed)")
    out(f"  seeded        drive {DRIVE_FILE}, as if it had always been on the drive")

    heading("The agent (examples/agent_session.py, over MCP stdio)")
    try:
        made, _ = anyio.run(lambda: agent.run(workspace, placet=placet, env=env))
    except agent.ToolFailed as e:
        out(f"demo: the agent's call failed: {e}")
        return 1
    ids = [p.id for p in made]

    ok = True
    if interactive:
        review_interactively(placet, env, ids)
    else:
        ok = accept_all(settings, ids)

    heading("What the agent learns afterwards (a new session, proposal_get)")
    anyio.run(lambda: agent.report(workspace, made, placet=placet, env=env))
    print_tree("The default drive now holds", settings.default_drive_dir)
    print_tree("The workspace now holds", workspace)
    print_audit(placet, env)

    heading("Done")
    out(f"The demo's files stay in {base}. To look around:")
    out(f"  PLACET_HOME={home} {placet} list")
    out(f"  PLACET_HOME={home} {placet} review")
    out(f"Remove it with: rm -rf {base}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
