"""rclone plumbing and metadata for the drive: rcd calls, capabilities, stat, temps.

`RcloneCore` holds what every drive operation needs: the parsed spec (with Proton
Drive's cache turned off and `replace_existing_draft` on, docs/design.md section 3), the
allowlisted child environment, the lazily started `rclone rcd` (`placet.drive.proc`),
error mapping with redaction (`placet.drive.failures`), and the small metadata calls
(fsinfo, stat, mkdir, hashsum, delete of temp objects). Listings with their digests
build on it in `placet.drive.rclone_listing`, transfers in `placet.drive.rclone`.

Metadata goes through rcd because a call there costs well under a millisecond against
~45 ms for a fresh `rclone` process (measured; docs/decisions/0006-rcd-and-uploads.md),
and an evidence check or a sync plan makes many of them.
"""

from __future__ import annotations

import contextlib
import json
import secrets
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path, PurePosixPath
from typing import Any, Self

from placet.config.password import CALLER_ENV, remove_token, write_token
from placet.drive.base import (
    Capabilities,
    DigestStore,
    Entry,
    ListRow,
    MemoryDigestStore,
)
from placet.drive.failures import last_message, rclone_failure
from placet.drive.proc import COMMON_FLAGS, child_env
from placet.drive.rcd import Rcd, RcFailure
from placet.drive.spec import DriveSpec, check_drive_path, parse_spec, redact
from placet.drive.twins import normalization_twin, twin_refused
from placet.errors import (
    AlreadyExists,
    ConfigError,
    DriveError,
    DriveUnavailable,
    NotFound,
    PlacetError,
    UsageError,
)
from placet.names import (
    BACKUP_PREFIX,
    TEMP_PREFIX,
    has_placet_temp,
    is_placet_backup,
    is_placet_temp,
)
from placet.schema import DIGEST_PREFERENCE

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


RCD_UPLOAD_MAX = 2 << 20
"""New files of at most this many bytes are uploaded through rcd (`operations/uploadfile`),
larger ones and direct replacements through `rclone rcat` (bench/sync_apply.py in
docs/performance.md: a small file costs ~70 ms of rcat start-up against a few ms through
rcd)."""


RCD_STREAM_BACKENDS = frozenset({"sftp", "local"})
"""Backends whose uploads above `RCD_UPLOAD_MAX` stream through rcd (`Rcd.upload_stream`)
instead of an `rclone rcat` process (and, on sftp, an SSH handshake) per file: rcd
stores a streamed body with `PutStream` (size unknown), which sftp and a local folder
write as they read it. Others size a chunked upload by the known size (S3: an unknown
size caps a file at chunk size x 10,000) or spool a stream to a local temporary file,
so they keep `rclone rcat --size`. On a local folder the rcat process costs ~40-60 ms
of wall and CPU per file, a third of a 32 MiB upload, up to `RCD_STREAM_LOCAL_MAX`
(bench/sync_apply.py in docs/performance.md)."""

RCD_STREAM_MAX = 256 << 20
"""Uploads above this many bytes go through `rclone rcat` even on `RCD_STREAM_BACKENDS`:
rcd reads a multipart body in 4 KiB pieces (Go's multipart reader), ~0.35 s more CPU
per GiB than rcat reading its pipe, against ~0.1 s for an rcat process and SSH handshake
per file (bench/big_upload_floor.py in docs/performance.md)."""

RCD_STREAM_LOCAL_MAX = 48 << 20
"""On a local folder, uploads above this many bytes go through `rclone rcat`: rcd's 4 KiB
reads cost more CPU than the rcat process saves from ~48 MiB on (measured per file,
alternating: 32 MiB -40 ms of CPU through rcd, 64 MiB +57 ms, 256 MiB +357 ms)."""


def temp_name(name: str, prefix: str = TEMP_PREFIX) -> str:
    """A fresh temporary name for `name`: `prefix`, 12 random hex digits, a dash, then
    as much of `name` as fits in 255 bytes."""
    head = f"{prefix}{secrets.token_hex(6)}-"
    room = 255 - len(head.encode())
    return head + name.encode()[:room].decode("utf-8", "ignore")


def backup_name(name: str) -> str:
    """A fresh name for the previous content of replaced object `name` (`BACKUP_PREFIX`)."""
    return temp_name(name, BACKUP_PREFIX)


def is_temp(path: str) -> bool:
    """True when a component of `path` is a temp name placet made (`placet.names`)."""
    return has_placet_temp(path)


def split_path(path: str) -> tuple[str, str]:
    p = PurePosixPath(path)
    parent = str(p.parent)
    return ("" if parent == "." else parent), p.name


class RcloneCore:
    """A `Drive` over rclone. See the module docstring for the transfer rules.

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
        verify_readback: on a remote without digests, read an upload back to verify it
            (True) or trust the size alone (False; the result says ``size``).
    """

    def __init__(
        self,
        spec: str,
        *,
        rclone_path: Path,
        env: Mapping[str, str],
        run_dir: Path,
        flags: Sequence[str] = (),
        verify_readback: bool = True,
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
        self._env = child_env(env)
        self._secrets = self._parsed.secret_values() + [
            v for k, v in env.items() if any(w in k.upper() for w in _SECRET_ENV_WORDS)
        ]
        # rcd buffers an uploaded part up to this size and stores it with one known-size
        # Put (as `rcat --size` does), never a streamed or disk-spooled upload
        cutoff = ("--streaming-upload-cutoff", f"{RCD_UPLOAD_MAX + 1}B")
        self._rcd = Rcd(rclone_path, self._env, run_dir, self.redact, flags=(*self._flags, *cutoff))
        self._verify_readback = verify_readback
        self._eff: DriveSpec | None = None  # the spec handed to rclone (Proton options added)
        self._caps: Capabilities | None = None
        self._digests: DigestStore = MemoryDigestStore()

    # ----- plumbing -------------------------------------------------------------------

    def redact(self, text: str) -> str:
        """`placet.drive.spec.redact` with this drive's secrets."""
        return redact(text, self._secrets)

    @property
    def rcd_pid(self) -> int | None:
        """pid of the running `rclone rcd`, None before the first metadata call."""
        return self._rcd.pid

    def _rc(
        self,
        method: str,
        params: dict[str, Any],
        *,
        action: str,
        target: str,
        timeout: float = SHORT_CALL_SECONDS,
    ) -> Any:
        return self._mapped(
            lambda: self._rcd.call(method, params, timeout=timeout), action=action, target=target
        )

    def _rc_upload(self, dest: str, chunks: Sequence[bytes]) -> None:
        """Store `chunks` (approved bytes, held in memory) at `dest` through rcd's
        `operations/uploadfile` (`Rcd.upload`); errors mapped as for `_rc`."""
        folder, name = split_path(dest)
        fs = self._fs().raw
        self._mapped(
            lambda: self._rcd.upload(fs, folder, name, chunks, timeout=LONG_CALL_SECONDS),
            action="upload to",
            target=dest,
        )

    def _rc_upload_stream(
        self, dest: str, size: int, pump: Callable[[Callable[[bytes], None]], object]
    ) -> None:
        """Store the `size` bytes `pump(write)` produces at temporary object `dest`
        through rcd, sent as they are read (`Rcd.upload_stream`); errors mapped as for
        `_rc`, what `pump` raised passes through."""
        folder, name = split_path(dest)
        fs = self._fs().raw
        self._mapped(
            lambda: self._rcd.upload_stream(
                fs, folder, name, size, pump, timeout=SHORT_CALL_SECONDS
            ),
            action="upload to",
            target=dest,
        )

    def _rc_upload_many(self, folder: str, files: Sequence[tuple[str, Sequence[bytes]]]) -> None:
        """`_rc_upload` of several (name, chunks) files into `folder` as one request."""
        fs = self._fs().raw
        self._mapped(
            lambda: self._rcd.upload_many(fs, folder, files, timeout=LONG_CALL_SECONDS),
            action="upload to",
            target=folder,
        )

    def _mapped(self, fn: Callable[[], Any], *, action: str, target: str) -> Any:
        try:
            return fn()
        except RcFailure as e:
            err = rclone_failure(
                action, target, e.message, secrets=self._secrets, http_status=e.status
            )
        if isinstance(err, DriveUnavailable):
            # rcd caches the backend with its pacer, whose back-off after failures would
            # make every later call wait seconds; a fresh backend starts from zero.
            with contextlib.suppress(RcFailure, PlacetError):
                self._rcd.call("fscache/clear", {}, timeout=10)
        raise err

    def _backend(self) -> str | None:
        hint = self._parsed.backend_hint
        if hint is not None or self._parsed.name is None:
            return hint
        env_type = self._env.get(f"RCLONE_CONFIG_{self._parsed.name.upper()}_TYPE")
        if env_type:  # a remote defined through the (explicitly passed) environment
            return env_type
        try:  # a configured remote: its type is in rclone's config (other keys ignored)
            conf = self._rcd.call("config/get", {"name": self._parsed.name})
        except RcFailure:
            return None
        kind = conf.get("type")
        return kind if isinstance(kind, str) and kind else None

    def _fs(self) -> DriveSpec:
        if self._eff is None:
            eff = self._parsed
            if self._backend() in NO_SERVER_SIDE_REPLACE:
                eff = parse_spec(self._parsed.with_options(_PROTON_OPTIONS))
            self._eff = eff
        return self._eff

    def _argv(self, *args: str) -> list[str]:
        return [str(self._rclone), *self._flags, *args]

    def _cli_failure(self, action: str, target: str, code: int, stderr: bytes) -> PlacetError:
        msg = last_message(stderr.decode(errors="replace"))
        return rclone_failure(action, target, msg, secrets=self._secrets, exit_code=code)

    # ----- metadata -------------------------------------------------------------------

    def capabilities(self) -> Capabilities:
        """What the remote supports (`operations/fsinfo`); cached for the drive's life."""
        if self._caps is None:
            fs = self._fs().raw
            info = self._rc(
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

    def _entry(self, item: Mapping[str, Any]) -> Entry:
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

    def _listing_params(self, path: str, types: Sequence[str], **opt: Any) -> dict[str, Any]:
        """`operations/list` and `operations/stat` parameters for `path`: `opt` plus no
        MIME types, and rclone's digests of `types` when any are asked for."""
        opt["noMimeType"] = True
        if types:
            opt.update(showHash=True, hashTypes=list(types))
        return {"fs": self._fs().raw, "remote": path, "opt": opt}

    def _items(self, path: str, *, recurse: bool, types: Sequence[str] = ()) -> list[Any]:
        """rclone's `operations/list` items of `path` (temp objects included)."""
        params = self._listing_params(path, types, recurse=recurse)
        try:
            body = self._rc(
                "operations/list", params, action="list", target=path, timeout=LONG_CALL_SECONDS
            )
        except AlreadyExists as e:  # "not a directory": the path names a file
            raise NotFound(
                f"cannot list {path!r}: it is a file, not a folder; stat it or list its parent",
                details=e.details,
            ) from None
        except NotFound:
            if path:
                raise
            return []  # the drive root not created yet is an empty drive
        items = body.get("list")
        return items if isinstance(items, list) else []

    def _list(self, path: str, *, recurse: bool, types: tuple[str, ...] = ()) -> list[Entry]:
        return [
            self._entry(i)
            for i in self._items(path, recurse=recurse, types=types)
            if not is_temp(i.get("Path", ""))
        ]

    def list_rows(
        self, path: str, *, recurse: bool = True, digest_type: str | None = None
    ) -> list[ListRow]:
        """The lean listing a sync plan reads: every entry under `path` (recursively
        unless `recurse` is false) as `ListRow` tuples, in rclone's order, temp objects
        left out, with the `digest_type` digest straight from rclone when asked (on a
        `hashes_on_demand` remote that reads every file; nothing is cached here: the
        caller keeps its own digest cache). No `Entry` objects: 100,000 of them cost
        about 0.3 s and 30 MiB more than these tuples (docs/performance.md).

        Raises:
            NotFound: no such folder (or it is a file). PathRefused: a path placet
                refuses to pass on. DriveUnavailable / DriveError: as rclone failed.
        """
        path = check_drive_path(path)
        dtype = digest_type.lower() if digest_type else None
        items = self._items(path, recurse=recurse, types=(dtype,) if dtype else ())
        return _list_rows(items, dtype)

    def list_folders_rows(
        self, paths: Sequence[str], *, digest_type: str | None = None, concurrency: int = 4
    ) -> list[list[ListRow] | PlacetError]:
        """`list_rows(path, recurse=False)` of each of `paths`, in one rcd request (a
        `job/batch` of listings, `concurrency` at a time): per path its rows, or the
        error its listing met (`NotFound`: no such folder, or a file). Batched, a
        listing of a folder of 100 files costs rclone about what its share of one
        recursive listing does; alone, about twice that.

        Raises:
            PathRefused: a path placet refuses to pass on (nothing is listed).
                DriveUnavailable / DriveError: the request as a whole failed.
        """
        raw = self.list_folders_raw(paths, digest_type=digest_type, concurrency=concurrency)
        return self.folders_from_raw(raw, paths, digest_type=digest_type)

    def list_folders_raw(
        self, paths: Sequence[str], *, digest_type: str | None = None, concurrency: int = 4
    ) -> bytes:
        """The request of `list_folders_rows`, its answer undecoded (`folders_from_raw`
        decodes it): the I/O alone, for a thread that should leave the interpreter lock
        to the one that decodes. Raises what `list_folders_rows` raises."""
        checked = [check_drive_path(p) for p in paths]
        dtype = digest_type.lower() if digest_type else None
        types = (dtype,) if dtype else ()
        inputs = [
            {"_path": "operations/list", **self._listing_params(p, types, recurse=False)}
            for p in checked
        ]
        target = checked[0] if checked else ""
        raw: bytes = self._mapped(
            lambda: self._rcd.call_raw(
                "job/batch",
                {"inputs": inputs, "concurrency": concurrency},
                timeout=LONG_CALL_SECONDS,
            ),
            action="list",
            target=target,
        )
        return raw

    def folders_from_raw(
        self, raw: bytes, paths: Sequence[str], *, digest_type: str | None = None
    ) -> list[list[ListRow] | PlacetError]:
        """`list_folders_rows`' result from the answer `list_folders_raw` got for the
        same `paths` and `digest_type`.

        Raises:
            DriveError: the answer is not one result per path.
        """
        dtype = digest_type.lower() if digest_type else None
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = {}
        results = body.get("results") if isinstance(body, dict) else None
        if not isinstance(results, list) or len(results) != len(paths):
            raise DriveError(
                f"rclone answered a batch of {len(paths)} listings with "
                f"{len(results) if isinstance(results, list) else 'no'} results; try again",
                details={"path": paths[0] if paths else ""},
            )
        out: list[list[ListRow] | PlacetError] = []
        for path, res in zip(paths, results, strict=True):
            p = path[:-1] if path.endswith("/") else path
            res = res if isinstance(res, dict) else {}
            if "error" in res:
                status = res.get("status")
                err = rclone_failure(
                    "list", p, str(res.get("error") or ""), secrets=self._secrets,
                    http_status=status if isinstance(status, int) else 500,
                )  # fmt: skip
                if isinstance(err, AlreadyExists):  # "not a directory": the path names a file
                    err = NotFound(f"cannot list {p!r}: it is a file, not a folder",
                                   details=err.details)  # fmt: skip
                # The drive root not created yet is an empty drive (as `list_rows` says).
                out.append([] if isinstance(err, NotFound) and not p else err)
                continue
            items = res.get("list")
            out.append(_list_rows(items if isinstance(items, list) else [], dtype))
        return out

    def soft_memory_limit(self, limit: int) -> int | None:
        """Set rcd's soft memory limit to `limit` bytes (Go's `SetMemoryLimit`: the
        collector runs more often near it; a negative `limit` only reads it) and return
        the one before, or None when this rclone cannot (the call is then a no-op). A
        plan sets one while it lists (docs/decisions/0026-plan-memory.md): rcd's heap grew
        past its live data while hashing.
        rclone reads JSON numbers as float64: a limit past 2**62 (none, in effect) is sent
        as 2**62."""
        try:
            body = self._rcd.call(
                "debug/set-soft-memory-limit", {"mem-limit": min(limit, 1 << 62)}, timeout=10
            )
        except (RcFailure, PlacetError):
            return None
        prev = body.get("existing-mem-limit") if isinstance(body, dict) else None
        return prev if isinstance(prev, int) else None

    def use_digest_store(self, store: DigestStore) -> None:
        """Keep the digests this drive computes by reading the data in `store` (see
        `placet.drive.base.DigestStore`) instead of its own in-memory one."""
        self._digests = store

    def stat(self, path: str, *, include_digest: bool = False) -> Entry | None:
        """The entry at `path`, or None if absent (also when a parent is a file).

        With `include_digest`, digests of every type in `capabilities().hash_types`,
        computed fresh (never from the listing cache): this is the evidence check.
        """
        path = check_drive_path(path)
        return self._stat(path, self.capabilities().hash_types if include_digest else ())

    def _stat(self, path: str, types: Sequence[str]) -> Entry | None:
        """`stat` of a checked `path` with fresh digests of `types` (none: no digest)."""
        params = self._listing_params(path, types)
        try:
            body = self._rc(
                "operations/stat",
                params,
                action="stat",
                target=path,
                timeout=LONG_CALL_SECONDS if types else SHORT_CALL_SECONDS,
            )
            item = body.get("item")
        except AlreadyExists:  # "not a directory": a parent is a file, so nothing is here
            return None
        return self._entry(item) if item else None

    def mkdir(self, path: str) -> None:
        """Create folder `path` and its parents; an existing folder is fine.

        Raises:
            AlreadyExists: a file occupies `path` or one of its parents, or `path`'s
                name differs only by Unicode normalization from a name in its folder
                (details ``existing_name``; `placet.drive.twins`).
        """
        path = check_drive_path(path)
        found = self.stat(path) if path else None
        if path:
            self._refuse_normalization_twin(path, found, action="create folder")
        if found is not None and not found.is_dir:
            raise AlreadyExists(
                f"cannot create folder {path!r}: a file has that name; choose another name",
                details={"path": path},
            )
        params = {"fs": self._fs().raw, "remote": path}
        self._rc("operations/mkdir", params, action="create folder", target=path)

    def _refuse_normalization_twin(
        self, path: str, existing: Entry | None, *, action: str = "upload to"
    ) -> None:
        """Refuse to write `path` when its folder holds another name equal to its name
        only under Unicode normalization (`placet.drive.twins`): `existing` is the stat
        of `path` (a remote may answer it with the twin); a non-ASCII name costs one
        listing of the folder. Only the last component is checked.

        Raises:
            AlreadyExists: such a twin exists (details ``path``, ``existing_name``).
        """
        parent, name = split_path(path)
        # the stat's answer under another name: a twin only if the NFC forms match (a
        # case-folding remote answering ``foo`` for ``Foo`` is not this rule's concern)
        twin = normalization_twin(name, [existing.name]) if existing is not None else None
        if twin is None and not name.isascii():
            try:
                rows = self.list_rows(parent, recurse=False)
            except NotFound:
                rows = []
            twin = normalization_twin(name, (split_path(row[0])[1] for row in rows))
        if twin is not None:
            raise twin_refused(path, twin, action)

    def digest_of(self, path: str, digest_type: str) -> str | None:
        """The remote's own `digest_type` digest of file `path` (hex, lower-case).

        Returns None when the remote does not offer that type, or not for this object.
        Raises NotFound when there is no such file.
        """
        path = check_drive_path(path)
        if digest_type.lower() not in self.capabilities().hash_types:
            return None
        params = {"fs": self._fs().raw, "remote": path, "hashType": digest_type.lower()}
        body = self._rc(
            "operations/hashsumfile", params, action="hash", target=path, timeout=LONG_CALL_SECONDS
        )
        value = str(body.get("hash") or "").strip().lower()
        return value or None

    def content_sha256(self, path: str) -> str:
        """SHA-256 (hex, lower-case) of the bytes of file `path`, read now through rcd
        (`operations/hashsumfile` with ``download``): the content itself, never a digest
        the remote stores, in one rcd call and no rclone child (a `download_to_fd` into
        /dev/null spawns `rclone cat`: about 20 times slower per small file on WebDAV,
        docs/performance.md). What binds a transfer to content on a remote without
        digests (docs/decisions/0011-no-digest-binding.md).

        Raises:
            NotFound: no such file. DriveUnavailable / DriveError.
        """
        path = check_drive_path(path)
        params = {"fs": self._fs().raw, "remote": path, "hashType": "sha256", "download": True}
        body = self._rc(
            "operations/hashsumfile", params, action="read", target=path, timeout=LONG_CALL_SECONDS
        )
        value = str(body.get("hash") or "").strip().lower()
        if len(value) != 64:
            raise DriveError(
                f"rclone read {path!r} but gave no SHA-256 of it ({value[:80]!r}); nothing "
                "was changed: try again, and report it if it persists",
                details={"path": path},
            )
        return value

    def clear_caches(self) -> None:
        """Drop rcd's cached backends, so the next call sees the remote as it is now."""
        self._rc("fscache/clear", {}, action="clear caches of", target="")

    def _require_file(self, path: str, action: str) -> Entry:
        found = self.stat(path)
        if found is None:
            raise NotFound(
                f"cannot {action} {path!r}: no such file on the drive", details={"path": path}
            )
        if found.is_dir:
            raise NotFound(
                f"cannot {action} {path!r}: it is a folder, not a file",
                code="not_a_file",
                details={"path": path},
            )
        return found

    # ----- temporary objects ----------------------------------------------------------

    def remove_temp(self, path: str, *, quiet: bool = False) -> bool:
        """Delete temporary object `path` (its name must have the shape of a name placet
        made, `placet.names`).

        Returns True if it existed. With `quiet`, rclone failures are swallowed (used on
        the way out of a failed upload, where the first error is the one to report).
        """
        path = check_drive_path(path)
        if not is_placet_temp(split_path(path)[1]):
            raise UsageError(f"refusing to delete {path!r}: it is not a placet temp object")
        try:
            params = {"fs": self._fs().raw, "remote": path}
            self._rc("operations/deletefile", params, action="delete temp", target=path)
        except NotFound:
            return False
        except PlacetError:
            if quiet:
                return False
            raise
        return True

    def _move(self, src: str, dst: str) -> None:
        """Server-side move of object `src` onto `dst` (replacing it) through rcd."""
        fs = self._fs().raw
        params = {"srcFs": fs, "srcRemote": src, "dstFs": fs, "dstRemote": dst}
        self._rc(
            "operations/movefile", params, action="move into", target=dst, timeout=LONG_CALL_SECONDS
        )

    def _delete(self, path: str, action: str) -> None:
        """Delete object `path` through rcd (a missing object raises NotFound)."""
        params = {"fs": self._fs().raw, "remote": path}
        self._rc("operations/deletefile", params, action=action, target=path)

    def restore_backup(self, backup: str, target: str) -> bool:
        """Put back a replaced object's previous content that a stopped upload left at
        `backup` (a name of `placet.names.is_placet_backup` shape): moved onto `target`
        when nothing is there; left in place (listed, for the owner to look at) when
        something is, because that may be newer content this process cannot judge.

        Returns True when nothing more is to be done (restored, left for the owner, or
        no backup there), False when the drive failed (the caller retries later). A
        replacement proven complete deletes its backup instead (`discard_backup`).
        """
        backup, target = check_drive_path(backup), check_drive_path(target)
        if not is_placet_backup(split_path(backup)[1]):
            raise UsageError(f"refusing to restore {backup!r}: it is not a placet backup")
        try:
            if self._stat(backup, ()) is None:
                return True
            if self._stat(target, ()) is None:
                self._move(backup, target)
        except PlacetError:
            return False
        return True

    def discard_backup(self, backup: str) -> bool:
        """Delete a replaced object's previous content left at `backup` (a name of
        `placet.names.is_placet_backup` shape), once the caller has proven that the
        replacement it belongs to is complete (`placet.executor.temps.remove_temp`).

        Returns True when it is gone (or was never there), False when the drive failed.

        Raises:
            UsageError: `backup` is not of the backup shape.
        """
        backup = check_drive_path(backup)
        if not is_placet_backup(split_path(backup)[1]):
            raise UsageError(f"refusing to delete {backup!r}: it is not a placet backup")
        try:
            self._delete(backup, "delete backup")
        except NotFound:
            return True
        except PlacetError:
            return False
        return True

    def cleanup_temps(
        self,
        folder: str,
        *,
        older_than: timedelta = timedelta(minutes=15),
        now: datetime | None = None,
    ) -> list[str]:
        """Delete temp objects directly in `folder` last modified before now - `older_than`.

        Only names of the exact shape placet generates count (`placet.names`): an
        owner's object that merely starts with ``.placet-tmp-`` is never deleted. A younger
        temp may belong to an upload still running in another placet process.
        Returns the deleted paths.
        """
        folder = check_drive_path(folder)
        cutoff = (now or datetime.now(UTC)) - older_than
        opt = {"recurse": False, "noMimeType": True, "filesOnly": True}
        params = {"fs": self._fs().raw, "remote": folder, "opt": opt}
        items = self._rc("operations/list", params, action="list", target=folder).get("list")
        removed = []
        for item in items or []:
            e = self._entry(item)
            if not is_placet_temp(e.name) or not e.mtime:
                continue
            stale = datetime.fromisoformat(e.mtime.replace("Z", "+00:00")) <= cutoff
            if stale and self.remove_temp(e.path):
                removed.append(e.path)
        return removed

    def close(self) -> None:
        """Stop rclone rcd. Idempotent; the drive cannot be used afterwards."""
        self._rcd.close()
        if self._token is not None:
            remove_token(self._token)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"RcloneDrive({self.redact(self.spec)!r})"


def _list_rows(items: list[Any], dtype: str | None) -> list[ListRow]:
    """rclone's `operations/list` items as `ListRow`s, temp objects left out."""
    out: list[ListRow] = []
    append = out.append
    tmp = TEMP_PREFIX
    for it in items:
        p = it.get("Path")
        if not isinstance(p, str) or (tmp in p and is_temp(p)):
            continue
        if it.get("IsDir"):
            append((p, True, -1, it.get("ModTime"), None))
            continue
        size = it.get("Size")
        d = None
        if dtype is not None and (h := it.get("Hashes")):
            d = h.get(dtype) or None
            if d is not None:
                d = str(d).lower()
        ok = isinstance(size, int) and size >= 0
        append((p, False, size if ok else -1, it.get("ModTime"), d))
    return out
