"""How the drive talks to rclone: rcd calls with typed errors, and CLI children's argv.

`RcloneCalls` holds what every part of `placet.drive.rclone.RcloneDrive` needs: the
parsed spec (with Proton Drive's cache turned off and `replace_existing_draft` on,
docs/design.md section 3), the allowlisted child environment, the lazily started
`rclone rcd` (`placet.drive.rcd`; its uploads, `placet.drive.rcd_uploads`), error
mapping with redaction (`placet.drive.failures`), the remote's capabilities, and the
one-call moves and deletes.

Metadata goes through rcd because a call there costs well under a millisecond against
~45 ms for a fresh `rclone` process (measured; docs/decisions/0006-rcd-and-uploads.md),
and an evidence check or a sync plan makes many of them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Required, TypedDict

from placet.config.password import CALLER_ENV, remove_token, write_token
from placet.drive.base import Capabilities, Entry
from placet.drive.failures import last_message, rclone_failure
from placet.drive.proc import COMMON_FLAGS, child_env
from placet.drive.rcd import Rcd, RcFailure
from placet.drive.rcd_uploads import RcdUploads
from placet.drive.routes import RCD_UPLOAD_MAX
from placet.drive.spec import DriveSpec, parse_spec, redact, split_path
from placet.errors import ConfigError, DriveUnavailable, PlacetError
from placet.schema import DIGEST_PREFERENCE

__all__ = [
    "LONG_CALL_SECONDS",
    "NO_SERVER_SIDE_REPLACE",
    "SHORT_CALL_SECONDS",
    "RcloneAccess",
    "RcloneCalls",
]

NO_SERVER_SIDE_REPLACE = frozenset({"protondrive"})
"""Backends whose server-side move refuses an existing target (docs/design.md section 3)."""
_HASHES_ON_DEMAND = frozenset({"local", "sftp"})
_PROTON_OPTIONS = (("enable_caching", "false"), ("replace_existing_draft", "true"))
_SECRET_ENV_WORDS = ("PASS", "TOKEN", "KEY", "SECRET")
SHORT_CALL_SECONDS = 300.0
"""rcd calls that move no data (stat, mkdir, delete): no answer in 5 min is unavailable."""
LONG_CALL_SECONDS = 3600.0
"""rcd calls that may read every byte or every entry (listings, digests, moves that fall
back to copy + delete): rclone's own `--timeout` still stops a stalled connection."""


class RcloneAccess(TypedDict, total=False):
    """How a drive reaches rclone: the keyword arguments of `RcloneCalls` after `spec`."""

    rclone_path: Required[Path]
    env: Required[Mapping[str, str]]
    run_dir: Required[Path]
    flags: Sequence[str]


class RcloneCalls:
    """rclone as the drive's parts reach it (the ``calls`` part of `RcloneDrive`).

    Args:
        spec: the drive root as an rclone path (validated for secrets by `drive_for`,
            not here, so tests may hand an obscured password in a connection string).
        rclone_path: absolute path of the rclone binary.
        env: variables placet passes explicitly to rclone (`RCLONE_CONFIG`,
            `RCLONE_CONFIG_PASS`, ...); the rest of the child's environment is allowlisted
            from `os.environ` (`placet.drive.proc.child_env`).
        flags: global flags for every rclone child, rcd included (the
            ``--password-command`` of `placet.drive.credentials.rclone_access`).
        run_dir: private runtime directory; rcd's socket lives in a 0700 folder below it.
    """

    def __init__(
        self,
        spec: str,
        *,
        rclone_path: Path,
        env: Mapping[str, str],
        run_dir: Path,
        flags: Sequence[str] = (),
    ) -> None:
        if not rclone_path.is_absolute():
            raise ConfigError(f"rclone_path must be absolute, got {str(rclone_path)!r}")
        self.spec = spec
        self._parsed = parse_spec(spec)
        self._rclone = rclone_path
        self._flags = (*COMMON_FLAGS, *flags)
        # placet's password command answers only an rclone it can trace to this process
        # (`placet.config.password.check_caller`); the token file goes with `close`.
        self._token: Path | None = None
        if "--password-command" in self._flags:
            self._token = write_token(run_dir, rclone_path)
            env = {**env, CALLER_ENV: str(self._token)}
        self.env = child_env(env)
        self.secrets = self._parsed.secret_values() + [
            v for k, v in env.items() if any(w in k.upper() for w in _SECRET_ENV_WORDS)
        ]
        # rcd buffers an uploaded part up to this size and stores it with one known-size
        # Put (as `rcat --size` does), never a streamed or disk-spooled upload
        cutoff = ("--streaming-upload-cutoff", f"{RCD_UPLOAD_MAX + 1}B")
        self.rcd = Rcd(rclone_path, self.env, run_dir, self.redact, flags=(*self._flags, *cutoff))
        self.uploads = RcdUploads(self.rcd)
        self._eff: DriveSpec | None = None  # the spec handed to rclone (Proton options added)
        self._caps: Capabilities | None = None

    def redact(self, text: str) -> str:
        """`placet.drive.spec.redact` with this drive's secrets."""
        return redact(text, self.secrets)

    def rc(
        self,
        method: str,
        params: dict[str, Any],
        *,
        action: str,
        target: str,
        timeout: float = SHORT_CALL_SECONDS,
    ) -> Any:
        """rcd's answer to `method` with `params`; a failure raised as `mapped` says."""
        return self.mapped(
            lambda: self.rcd.call(method, params, timeout=timeout), action=action, target=target
        )

    def rc_upload(self, dest: str, chunks: Sequence[bytes]) -> None:
        """Store `chunks` (approved bytes, held in memory) at `dest` through rcd's
        `operations/uploadfile` (`RcdUploads.upload`); errors mapped as for `rc`."""
        folder, name = split_path(dest)
        fs = self.fs().raw
        self.mapped(
            lambda: self.uploads.upload(fs, folder, name, chunks, timeout=LONG_CALL_SECONDS),
            action="upload to",
            target=dest,
        )

    def rc_upload_stream(
        self, dest: str, size: int, pump: Callable[[Callable[[bytes], None]], object]
    ) -> None:
        """Store the `size` bytes `pump(write)` produces at temporary object `dest`
        through rcd, sent as they are read (`RcdUploads.upload_stream`); errors mapped as for
        `rc`, what `pump` raised passes through."""
        folder, name = split_path(dest)
        fs = self.fs().raw
        self.mapped(
            lambda: self.uploads.upload_stream(
                fs, folder, name, size, pump, timeout=SHORT_CALL_SECONDS
            ),
            action="upload to",
            target=dest,
        )

    def rc_upload_many(self, folder: str, files: Sequence[tuple[str, Sequence[bytes]]]) -> None:
        """`rc_upload` of several (name, chunks) files into `folder` as one request."""
        fs = self.fs().raw
        self.mapped(
            lambda: self.uploads.upload_many(fs, folder, files, timeout=LONG_CALL_SECONDS),
            action="upload to",
            target=folder,
        )

    def mapped(self, fn: Callable[[], Any], *, action: str, target: str) -> Any:
        """`fn()` (an rcd call), a failure raised as placet's typed error for "cannot
        `action` `target`" (`placet.drive.failures.rclone_failure`)."""
        try:
            return fn()
        except RcFailure as e:
            err = rclone_failure(
                action, target, e.message, secrets=self.secrets, http_status=e.status
            )
        if isinstance(err, DriveUnavailable):
            # rcd caches the backend with its pacer, whose back-off after failures would
            # make every later call wait seconds; a fresh backend starts from zero.
            with contextlib.suppress(RcFailure, PlacetError):
                self.rcd.call("fscache/clear", {}, timeout=10)
        raise err

    def _backend(self) -> str | None:
        hint = self._parsed.backend_hint
        if hint is not None or self._parsed.name is None:
            return hint
        env_type = self.env.get(f"RCLONE_CONFIG_{self._parsed.name.upper()}_TYPE")
        if env_type:  # a remote defined through the (explicitly passed) environment
            return env_type
        try:  # a configured remote: its type is in rclone's config (other keys ignored)
            conf = self.rcd.call("config/get", {"name": self._parsed.name})
        except RcFailure:
            return None
        kind = conf.get("type")
        return kind if isinstance(kind, str) and kind else None

    def fs(self) -> DriveSpec:
        """The spec handed to rclone: the configured one, with Proton Drive's options."""
        if self._eff is None:
            eff = self._parsed
            if self._backend() in NO_SERVER_SIDE_REPLACE:
                eff = parse_spec(self._parsed.with_options(_PROTON_OPTIONS))
            self._eff = eff
        return self._eff

    def argv(self, *args: str) -> list[str]:
        """The argv of an rclone CLI child: the binary, the global flags, `args`."""
        return [str(self._rclone), *self._flags, *args]

    def cli_failure(self, action: str, target: str, code: int, stderr: bytes) -> PlacetError:
        """The typed error of a CLI child that exited with `code` and wrote `stderr`."""
        msg = last_message(stderr.decode(errors="replace"))
        return rclone_failure(action, target, msg, secrets=self.secrets, exit_code=code)

    def capabilities(self) -> Capabilities:
        """What the remote supports (`operations/fsinfo`); cached until `clear_caches`."""
        if self._caps is None:
            fs = self.fs().raw
            info = self.rc(
                "operations/fsinfo", {"fs": fs}, action="inspect the drive", target=self.spec
            )
            reported = {str(h).lower() for h in info.get("Hashes") or []}
            feats = info.get("Features") or {}
            backend = self._backend()
            move = bool(feats.get("Move"))
            self._caps = Capabilities(
                hash_types=tuple(t for t in DIGEST_PREFERENCE if t in reported),
                case_insensitive=bool(feats.get("CaseInsensitive")),
                modtime_precision_ns=max(1, int(info.get("Precision") or 1)),
                can_move=move,
                server_side_replace=move and backend not in NO_SERVER_SIDE_REPLACE,
                backend=backend,
                hashes_on_demand=bool(feats.get("IsLocal")) or backend in _HASHES_ON_DEMAND,
            )
        return self._caps

    @staticmethod
    def entry(item: Mapping[str, Any]) -> Entry:
        """An `Entry` from one item of rcd's `operations/list` or `operations/stat`."""
        is_dir = bool(item.get("IsDir"))
        size = item.get("Size")
        hashes = item.get("Hashes") or {}
        return Entry(
            path=str(item.get("Path", "")),
            name=str(item.get("Name", "")),
            is_dir=is_dir,
            size=None if is_dir or not isinstance(size, int) or size < 0 else size,
            mtime=item.get("ModTime"),
            digests={str(k).lower(): str(v).lower() for k, v in hashes.items() if v},
        )

    def listing_params(self, path: str, types: Sequence[str], **opt: Any) -> dict[str, Any]:
        """`operations/list` and `operations/stat` parameters for `path`: `opt` plus no
        MIME types, and rclone's digests of `types` when any are asked for."""
        opt["noMimeType"] = True
        if types:
            opt.update(showHash=True, hashTypes=list(types))
        return {"fs": self.fs().raw, "remote": path, "opt": opt}

    def move(self, src: str, dst: str) -> None:
        """Server-side move of object `src` onto `dst` (replacing it) through rcd."""
        fs = self.fs().raw
        params = {"srcFs": fs, "srcRemote": src, "dstFs": fs, "dstRemote": dst}
        self.rc(
            "operations/movefile", params, action="move into", target=dst, timeout=LONG_CALL_SECONDS
        )

    def delete(self, path: str, action: str) -> None:
        """Delete object `path` through rcd (a missing object raises NotFound)."""
        params = {"fs": self.fs().raw, "remote": path}
        self.rc("operations/deletefile", params, action=action, target=path)

    def clear_caches(self) -> None:
        """Drop rcd's cached backends, and the capabilities and backend type read from
        them, so the next call sees the remote as it is now (rclone re-reads a changed
        config file): a drive opened long before, while the owner decided, included."""
        self._eff = self._caps = None
        self.rc("fscache/clear", {}, action="clear caches of", target="")

    def close(self) -> None:
        """Stop rclone rcd. Idempotent; the drive cannot be used afterwards."""
        self.rcd.close()
        if self._token is not None:
            remove_token(self._token)
