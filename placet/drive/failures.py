"""Turn rclone's failures into placet's typed errors, with rclone's own words redacted.

rclone reports a failure as an exit code and a log line (CLI) or an HTTP status and an
``error`` string (rcd). Exit codes follow rclone's `lib/exitcode` (3, 4 not found; 5
retry; 7 fatal), but many failures exit 1 with the reason only in the message, which then
decides: `NotFound`, `AlreadyExists`, `DriveError` ``drive_locked`` (no config password),
`DriveUnavailable` (retryable: connection refused, reset or lost, timeouts, DNS, HTTP
429/5xx) or fatal `DriveError`. Every error carries rclone's message in
``details["rclone_message"]`` after `redact` (docs/decisions/0008-rclone-children.md)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from placet.drive.base import Entry
from placet.drive.spec import redact
from placet.errors import (
    AlreadyExists,
    DriveError,
    DriveUnavailable,
    NotFound,
    PlacetError,
    StaleEvidence,
    UsageError,
)
from placet.schema import DIGEST_PREFERENCE

_NOT_FOUND = re.compile(r"object not found|directory not found|file not found|no such file", re.I)
_EXISTS = re.compile(r"already exists|is a file not a directory|not a directory", re.I)
_RETRYABLE = re.compile(
    r"connection refused|connection reset|broken pipe|i/o timeout|timeout|timed out|"
    r"deadline exceeded|no such host|network is unreachable|no route to host|"
    # HTTP statuses by their reason phrase, never a bare number: rclone's messages carry
    # paths, and a folder named `pytest-429` is no rate limit.
    r"temporary failure|too many requests|rate limit|service unavailable|gateway timeout|"
    r"bad gateway|unexpected EOF|TLS handshake|connection was closed|server misbehaving|"
    r"connection lost",  # sftp: its server went away (SSH_FX_CONNECTION_LOST)
    re.I,
)
_CONFIG_LOCKED = re.compile(
    r"unable to decrypt configuration|RCLONE_CONFIG_PASS|password command failed", re.I
)
_NO_REMOTE = re.compile(r"didn't find section in config file|didn't find backend called", re.I)
_LOG_PREFIX = re.compile(r"^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d (?:\w+\s*:\s*)?")


def last_message(stderr: str) -> str:
    """The most telling line of rclone's stderr (the last CRITICAL/ERROR/NOTICE line)."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    for level in ("CRITICAL", "ERROR", "NOTICE: Failed"):
        for ln in reversed(lines):
            if level in ln:
                return _LOG_PREFIX.sub("", ln)
    return _LOG_PREFIX.sub("", lines[-1]) if lines else ""


def rclone_failure(
    action: str,
    target: str,
    message: str,
    *,
    secrets: Iterable[str] = (),
    exit_code: int | None = None,
    http_status: int | None = None,
) -> PlacetError:
    """Build the typed error for a failed rclone call.

    Args:
        action: what placet attempted, e.g. ``"upload to"``, ``"list"``.
        target: the drive-relative path (or the spec) it was attempted on.
        message: rclone's message (redacted here).
        secrets: strings to remove from the message (config password, spec options).
        exit_code: the CLI exit code, if a CLI call failed.
        http_status: the rc HTTP status, if an rcd call failed.
    """
    secrets = list(secrets)
    clean = redact(message.strip(), secrets) or "no message from rclone"
    shown_target = redact(target, secrets)
    details: dict[str, Any] = {"path": shown_target, "rclone_message": clean}
    if exit_code is not None:
        details["exit_code"] = exit_code
    if http_status is not None:
        details["http_status"] = http_status
    head = f"{action} {shown_target!r} failed: {clean}"
    cls: type[PlacetError]
    if _CONFIG_LOCKED.search(message):
        return DriveError(
            f"{head}; rclone's config is encrypted and its password was not available: "
            "run `placet drive login` to store it in the keyring (`placet doctor` checks "
            "the keyring), or set RCLONE_CONFIG_PASS in placet's environment",
            code="drive_locked",
            details=details,
        )
    if _NO_REMOTE.search(message):
        return DriveError(
            f"{head}; define the remote with `rclone config` or fix the drive spec with "
            "`placet drive set`",
            code="drive_misconfigured",
            details=details,
        )
    if exit_code in (3, 4) or http_status == 404 or _NOT_FOUND.search(message):
        cls, hint = NotFound, "check the path with a listing of its folder"
    elif exit_code == 5 or _RETRYABLE.search(message):
        cls, hint = DriveUnavailable, "the remote could not be reached; try again later"
    elif exit_code == 7:
        cls, hint = DriveError, "rclone reported a fatal error; check the remote's account"
    elif _EXISTS.search(message):
        cls, hint = AlreadyExists, "something else already occupies that name"
    else:
        cls, hint = DriveError, "see rclone's message; `placet drive show` checks the remote"
    return cls(f"{head}; {hint}", details=details)


def size_mismatch(path: str, size: int, got: Entry | None) -> DriveError:
    """`verify_failed`: the object stored at `path` is missing, a folder, or not `size`
    bytes long, after an upload of `size` bytes."""
    return DriveError(
        f"verifying {path!r} failed: the remote holds "
        f"{'nothing' if got is None else got.size} bytes, expected {size}; the upload "
        "was not kept, accept the proposal again to retry",
        code="verify_failed",
        details={
            "path": path,
            "expected_size": size,
            "remote_size": None if got is None else got.size,
        },
    )


def digest_mismatch(path: str, digest_type: str, remote: str | None, sent: str) -> DriveError:
    """`verify_failed`: the remote's `digest_type` digest of the object at `path` is not
    the digest of the bytes sent (hex)."""
    return DriveError(
        f"verifying {path!r} failed: the remote's {digest_type} is {remote}, the bytes sent "
        f"hash to {sent}; accept the proposal again to retry",
        code="verify_failed",
        details={"path": path, "digest_type": digest_type, "remote": remote, "sent": sent},
    )


def check_expected(
    streamed: dict[str, str], sha256: str, digest: tuple[str, str] | None, target: str
) -> None:
    """Refuse bytes read for `target` whose digests `streamed` ({type: hex}) are not the
    approved `sha256` (and `digest`, (type, hex)): the local file changed since the
    proposal, and nothing of it may be kept.

    Raises:
        StaleEvidence: a digest differs (details ``digest_type``, ``approved``, ``now``).
    """
    pairs = [("sha256", sha256.lower())]
    if digest is not None:
        pairs.append((digest[0].lower(), digest[1].lower()))
    for t, want in pairs:
        if streamed[t] != want:
            raise StaleEvidence(
                f"the local file's {t} is now {streamed[t]}, the proposal approved {want}: "
                f"it changed since the proposal; nothing was written to {target!r}; "
                "propose the upload again",
                details={"digest_type": t, "approved": want, "now": streamed[t]},
            )


def check_digest_type(digest: tuple[str, str] | None) -> None:
    """Refuse an approved `digest` (type, hex) of a type placet cannot compute.

    Raises:
        UsageError: its type is not one of `DIGEST_PREFERENCE`.
    """
    if digest is not None and digest[0].lower() not in DIGEST_PREFERENCE:
        raise UsageError(f"expected_digest type {digest[0]!r} is not one of {DIGEST_PREFERENCE}")
