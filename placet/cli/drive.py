"""`placet drive set | show | login`: choose the remote, inspect it, unlock rclone's config.

`set` writes ``drive = "..."`` into the owner's `config.toml` (other keys and comments
kept), after refusing a spec with an inline secret (docs/design.md section 9, "drive
binding": the spec is stored with every proposal) and, unless `--no-check`, asking
rclone whether the remote answers. `show` prints the spec in force and where it came
from, the rclone binary and version, the rclone config and whether its password is
available, and the remote's capabilities. `login` stores the password of an encrypted
rclone config in the keyring, after checking that it decrypts the config (the check
hands it to rclone on stdin, never in argv or the environment).

`drive password-for-rclone` is hidden from help: rclone runs it as its
``--password-command`` (`placet.config.password.print_for_rclone`; `placet.cli.main`
answers it before loading the other commands, so it starts fast).
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import re
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path
from typing import Any

from placet.config import Settings, ensure_data_dir, load_settings
from placet.config.password import (
    KEYRING_SERVICE,
    KEYRING_USERNAME,
    RCLONE_PASSWORD_ARGS,
    load_config_password,
    print_for_rclone,
    store_config_password,
)
from placet.drive import configured_spec, default_drive_spec, drive_for, validate_spec
from placet.drive.credentials import config_is_encrypted, rclone_config_path
from placet.drive.proc import child_env, rclone_version, resolve_rclone_path
from placet.drive.spec import DriveSpec, redact
from placet.errors import (
    EXIT_OK,
    EXIT_USAGE,
    ConfigError,
    DriveError,
    DriveUnavailable,
    NotFound,
    PlacetError,
)
from placet.store import open_store
from placet.text import inert


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `drive set`, `drive show` and `drive login` to the `placet` parser."""
    p = subparsers.add_parser("drive", help="choose and inspect the remote drive")
    sub = p.add_subparsers(dest="drive_command", metavar="ACTION")
    p.set_defaults(func=lambda _args: _usage(p))

    s = sub.add_parser("set", help="set the drive (an rclone path) in config.toml")
    s.add_argument("spec", help="'remote:folder', ':backend,opt=value:folder' or /abs/folder")
    s.add_argument("--no-check", action="store_true", help="do not ask rclone to reach it")
    s.add_argument(
        "--create", action="store_true", help="create a local folder spec that does not exist"
    )
    s.set_defaults(func=cmd_set)

    s = sub.add_parser("show", help="print the drive, rclone and the remote's capabilities")
    s.add_argument("--json", action="store_true", help="one JSON object")
    s.set_defaults(func=cmd_show)

    s = sub.add_parser("login", help="store the rclone config password in the keyring")
    s.add_argument(
        "--password-stdin", action="store_true", help="read the password from stdin (scripts)"
    )
    s.set_defaults(func=cmd_login)

    # Hidden (no help=, so not listed): rclone's --password-command. Usually answered by
    # the fast path in placet.cli.main; this entry keeps the argparse route identical.
    # Its own --help still says what it is.
    s = sub.add_parser(
        RCLONE_PASSWORD_ARGS[1],
        description="Internal: rclone's --password-command hook. Prints the rclone config "
        "password from the keyring for the rclone child placet starts; not for people.",
    )
    s.set_defaults(func=lambda _args: print_for_rclone())


def _usage(p: argparse.ArgumentParser) -> int:
    p.print_help(sys.stderr)
    return EXIT_USAGE


# ---- config.toml ---------------------------------------------------------------------

_TABLE = re.compile(r"^\s*\[")
_DRIVE_KEY = re.compile(r"^\s*drive\s*=")


def write_config_key(config_file: Path, key: str, value: str) -> None:
    """Set top-level `key = "value"` in `config_file`, keeping every other line.

    The file is rewritten atomically (temp file + rename, mode 0600) and re-parsed:
    if anything but `key` would change, nothing is written.

    Raises:
        ConfigError: the file is not valid TOML, or the edit cannot be made safely.
    """
    text = config_file.read_text(encoding="utf-8") if config_file.exists() else ""
    try:
        before = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"cannot edit {config_file}: it is not valid TOML ({e})") from e
    line = f"{key} = {json.dumps(value, ensure_ascii=False)}\n"
    lines = text.splitlines(keepends=True)
    first_table = next((i for i, ln in enumerate(lines) if _TABLE.match(ln)), len(lines))
    key_re = _DRIVE_KEY if key == "drive" else re.compile(rf"^\s*{re.escape(key)}\s*=")
    hit = next((i for i in range(first_table) if key_re.match(lines[i])), None)
    if hit is not None:
        lines[hit] = line
    else:
        if first_table and not lines[first_table - 1].endswith("\n"):
            lines[first_table - 1] += "\n"
        lines.insert(first_table, line)
    new = "".join(lines)
    after = tomllib.loads(new)
    if after.get(key) != value or {k: v for k, v in after.items() if k != key} != {
        k: v for k, v in before.items() if k != key
    }:
        raise ConfigError(
            f"cannot edit {config_file} safely (the '{key}' entry spans several lines?); "
            f"set it by hand: {line.strip()}"
        )
    config_file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(prefix=".config-", suffix=".toml", dir=config_file.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(new)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, config_file)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# ---- commands ------------------------------------------------------------------------


def _unreachable(e: PlacetError, spec: str) -> PlacetError:
    """A failure to reach the drive, as `drive_unavailable` (exit 5) for the CLI: a
    remote missing from rclone's config or refusing us cannot be reached either."""
    if isinstance(e, DriveError) and not isinstance(e, DriveUnavailable | NotFound):
        return DriveUnavailable(
            e.message,
            code=e.error_code,
            details={**e.details, "drive": redact(spec)},
            retryable=False,
        )
    return e


def local_folder_problem(spec: DriveSpec) -> str | None:
    """What is wrong with a local-folder drive's folder: ``"the folder does not exist"``,
    ``"it exists and is not a folder"``, or None (a folder, or not a local spec). Shared
    by `drive set` and `doctor`."""
    if spec.kind != "local":
        return None
    folder = Path(spec.root)
    if folder.is_dir():
        return None
    return "it exists and is not a folder" if folder.exists() else "the folder does not exist"


def _check_failed(e: PlacetError, spec: DriveSpec, settings: Settings) -> PlacetError:
    """`drive set`'s check failed: one sentence with one fix. A remote missing from
    rclone's config names the remote and the config file, not rclone's own wording and
    advice (which suggested the command just run)."""
    if e.error_code == "drive_misconfigured" and spec.kind == "remote" and spec.name:
        conf = rclone_config_path(os.environ, resolve_rclone_path(settings.rclone_path))
        return DriveUnavailable(
            f"refusing drive {redact(spec.raw)!r}: rclone's config {conf} has no remote "
            f"{spec.name!r}; define the remote {spec.name!r} with `rclone config`, or pass "
            "--no-check to set it anyway",
            code="drive_misconfigured",
            details={**e.details, "drive": redact(spec.raw), "remote": spec.name},
            retryable=False,
        )
    e = _unreachable(e, spec.raw)
    e.message += "; fix the remote, or pass --no-check to set it anyway"
    return e


def _local_folder(spec: DriveSpec, create: bool) -> None:
    """Refuse a local-folder spec that does not exist (a typo would otherwise become the
    drive), or create it (0700) with --create. Skipped by --no-check (a folder on a
    disk not mounted yet), which prints a note instead."""
    problem = local_folder_problem(spec)
    if problem is None:
        return
    folder = Path(spec.root)
    if folder.exists():
        raise ConfigError(
            f"refusing drive {spec.raw!r}: {folder}: {problem}; give a folder",
            details={"path": str(folder)},
        )
    if not create:
        raise ConfigError(
            f"refusing drive {spec.raw!r}: the local folder {folder} does not exist; check "
            "the path, or pass --create to create it",
            details={"path": str(folder)},
        )
    try:
        folder.mkdir(parents=True, mode=0o700)
    except OSError as e:
        raise ConfigError(
            f"cannot create the local drive folder {folder}: {e.strerror}; create it "
            "yourself or choose another folder",
            details={"path": str(folder)},
        ) from e
    print(f"created the local folder {inert(str(folder))}")


def _open_on_other_drives(settings: Settings, spec: str) -> int:
    """How many proposals that could still run were made against another drive (0 when
    there is no database yet: a first `drive set` creates none)."""
    if settings.database is None and not settings.db_path.exists():
        return 0
    with open_store(settings) as store:
        live = store.list(["pending", "approved", "failed", "interrupted"], limit=10_000)
    return sum(1 for rec in live if rec.drive_spec != spec)


def cmd_set(args: argparse.Namespace) -> int:
    settings = load_settings()
    ensure_data_dir(settings)  # 0700 before anything is written into it
    spec: str = args.spec
    parsed = validate_spec(spec)
    if args.create or not args.no_check:
        _local_folder(parsed, args.create)
    elif parsed.kind == "local" and not Path(parsed.root).is_dir():
        print(f"note: the local folder {inert(parsed.root)} does not exist", file=sys.stderr)
    if not args.no_check:
        candidate = settings.model_copy(update={"drive": spec})
        with drive_for(candidate) as drive:
            try:
                caps = drive.capabilities()
                try:
                    drive.list_folder("", limit=1)  # fsinfo alone does not reach the remote
                    state = "reached it"
                except NotFound:
                    state = "reached the remote (the folder does not exist yet)"
            except PlacetError as e:
                raise _check_failed(e, parsed, settings) from None
        digests = ", ".join(caps.hash_types) or "none (sizes only)"
        print(f"rclone {state}: backend {caps.backend or '?'}, digests {digests}")
    previous = configured_spec(settings)
    write_config_key(settings.config_file, "drive", spec)
    print(f"drive set to {inert(spec)} in {inert(str(settings.config_file))}")
    if os.environ.get("PLACET_DRIVE"):
        print(
            "note: PLACET_DRIVE is set in this environment and overrides config.toml",
            file=sys.stderr,
        )
    stale = _open_on_other_drives(settings, spec) if previous != spec else 0
    if stale:
        print(
            f"note: {stale} open proposal(s) were made against another drive "
            f"({inert(redact(previous))} or earlier); they will be refused at execution",
            file=sys.stderr,
        )
    return EXIT_OK


def _spec_source(settings: Settings) -> str:
    if os.environ.get("PLACET_DRIVE"):
        return "PLACET_DRIVE"
    return "config.toml" if settings.drive else "default"


def _password_state(environ: dict[str, str], conf: Path) -> str:
    if not config_is_encrypted(conf):
        return "not encrypted" if conf.exists() else "absent (no remotes configured)"
    if environ.get("RCLONE_CONFIG_PASS"):
        return "encrypted; password from RCLONE_CONFIG_PASS"
    try:
        found = load_config_password()
    except ConfigError as e:
        return f"encrypted; keyring unavailable ({e.error_code})"
    return "encrypted; password in keyring" if found else "encrypted; run `placet drive login`"


def cmd_show(args: argparse.Namespace) -> int:
    settings = load_settings()
    spec = configured_spec(settings)
    rclone = resolve_rclone_path(settings.rclone_path)
    environ = dict(os.environ)
    conf = rclone_config_path(environ, rclone)
    info: dict[str, Any] = {
        "drive": redact(spec),
        "source": _spec_source(settings),
        "default": spec == default_drive_spec(settings),
        "rclone_path": str(rclone),
        "rclone_version": rclone_version(rclone),
        "rclone_config": str(conf),
        "rclone_config_state": _password_state(environ, conf),
    }
    code = EXIT_OK
    try:
        with drive_for(settings) as drive:
            caps = drive.capabilities()
        info["capabilities"] = {
            "backend": caps.backend,
            "hash_types": list(caps.hash_types),
            "case_insensitive": caps.case_insensitive,
            "modtime_precision_ns": caps.modtime_precision_ns,
            "can_move": caps.can_move,
            "server_side_replace": caps.server_side_replace,
        }
    except PlacetError as e:
        e = _unreachable(e, spec)
        info["capabilities"] = None
        info["error"] = e.to_dict()
        code = e.exit_code
    if args.json:
        print(json.dumps(info, ensure_ascii=True, sort_keys=True))
        return code
    for key in ("drive", "source", "rclone_path", "rclone_version", "rclone_config"):
        print(f"{key}: {inert(str(info[key]))}")
    print(f"rclone_config_state: {info['rclone_config_state']}")
    if info["capabilities"] is not None:
        for key, value in info["capabilities"].items():
            shown = ", ".join(value) or "none" if isinstance(value, list) else value
            print(f"  {key}: {inert(str(shown))}")
    else:
        print(f"capabilities: unavailable: {inert(info['error']['message'])}")
    return code


def cmd_login(args: argparse.Namespace) -> int:
    settings = load_settings()
    rclone = resolve_rclone_path(settings.rclone_path)
    conf = rclone_config_path(os.environ, rclone)
    if not config_is_encrypted(conf):
        print(f"rclone config {inert(str(conf))} is not encrypted: no password to store")
        return EXIT_OK
    if args.password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    else:
        password = getpass.getpass(f"password for rclone config {conf}: ")
    if not password:
        raise ConfigError("no password given; nothing stored")
    # rclone reads the password from stdin when stdin is not a terminal and it may ask
    # (so no --ask-password=false here); a wrong one makes it ask again and hit EOF.
    r = subprocess.run(
        [str(rclone), "--low-level-retries", "3", "listremotes"],
        env=child_env({"RCLONE_CONFIG": str(conf)}),
        input=(password + "\n").encode(),
        capture_output=True,
        check=False,
        timeout=60,
    )
    if r.returncode != 0:
        raise ConfigError(
            f"that password does not decrypt {conf}; nothing stored. Try again, or check "
            "with `rclone config` which config file you encrypted",
            code="wrong_password",
        )
    store_config_password(password)
    print(
        f"stored the password for {inert(str(conf))} in the keyring "
        f"(service {KEYRING_SERVICE!r}, user {KEYRING_USERNAME!r})"
    )
    return EXIT_OK
