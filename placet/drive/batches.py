"""Many small new files of one folder, or many folders, at once: one rcd request per step.

Each step is one request for a whole batch: the bytes as one `operations/uploadfile` with
a part per file, the checks as listings of the folder, the moves and deletes as one
`job/batch` each (one result per call, in order). The rules are
`Transfers.upload_from_fd`'s for a new file, per file (docs/decisions/0027-sync-execution.md,
docs/decisions/0007-upload-checks.md): a normalization twin is that file's
`AlreadyExists` (`placet.drive.twins`); every byte is matched to the approved digests
before any is sent; temporary names are journaled before the request; each temporary
object is checked, each target found absent just before the moves, and each moved name
proven to hold the approved bytes (a target that does not is deleted, `verify_failed`).
A file that does not end moved has its temporary object deleted. Folders: a mkdir each,
the executor deciding per folder as for one (`run_mkdir`)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from placet.drive import pumps
from placet.drive.base import (
    Entry,
    UploadResult,
    preferred_digest,
)
from placet.drive.calls import LONG_CALL_SECONDS, RcloneCalls
from placet.drive.failures import (
    check_digest_type,
    check_expected,
    digest_mismatch,
    rclone_failure,
    size_mismatch,
)
from placet.drive.listing import Listing
from placet.drive.spec import check_drive_path
from placet.drive.temps import Temps, temp_name
from placet.drive.transfers import Transfers
from placet.drive.twins import normalization_twins, twin_free, twin_refused
from placet.errors import AlreadyExists, DriveError, NotFound, PlacetError, UsageError
from placet.names import TEMP_PREFIX

BATCH_MAX_FILES = 200
"""Most files one batch uploads (the executor groups a folder's new files by this)."""
BATCH_MAX_BYTES = 8 << 20
"""Most bytes one batch holds in memory (rclone parses up to 10 MiB of a form in memory)."""


@dataclass(frozen=True)
class NewFile:
    """One file of a batch: `size` bytes of `fd` (from offset 0) for new object
    `remote_path`, approved as `expected_sha256` (and `expected_digest` (type, hex))."""

    fd: int
    size: int
    remote_path: str
    expected_sha256: str
    expected_digest: tuple[str, str] | None = None


BatchOutcome = UploadResult | PlacetError


def _split(path: str) -> tuple[str, str]:
    """(folder, name) of a checked drive path (`check_drive_path`: no empty, ``.`` or
    ``..`` segment), as `placet.drive.spec.split_path` gives it, without a PurePosixPath per
    call (three per file of a batch)."""
    folder, _, name = path.rpartition("/")
    return folder, name


def _not_kept(target: str, err: PlacetError) -> DriveError:
    """The `verify_failed` outcome of a new file whose target, after the move, did not
    hold the approved bytes (its temporary object was changed after it was verified)."""
    return DriveError(
        f"after the move, {target!r} did not hold the approved bytes (the temporary object "
        "was changed after it was verified); it was removed; accept the proposal again to "
        "retry",
        code="verify_failed",
        details={**err.details, "path": target, "restored": False},
    )


_REGEX_QUOTED = str.maketrans({c: "\\" + c for c in "\\.+*?()|[]{}^$"})
"""What Go's `regexp.QuoteMeta` escapes: every other character stands for itself."""


def _names_rule(names: Sequence[str]) -> str:
    """One rclone filter rule matching exactly the file names `names` in any folder: a
    ``{{regexp}}`` rule, an alternation of the names quoted as Go's `regexp.QuoteMeta`
    quotes them. rclone tests each listed entry against every rule, so a rule per name
    cost rcd more than the listing itself (~6 ms a folder of 100 names). No ``}}`` can
    end the regexp early: each ``}`` of a name is quoted (``\\}``) and the alternation
    ends with ``)``."""
    return "{{(?:" + "|".join(n.translate(_REGEX_QUOTED) for n in names) + ")}}"


def _every(out: list[BatchOutcome | None]) -> list[BatchOutcome]:
    done = [o for o in out if o is not None]
    assert len(done) == len(out), "a file of the batch was left without an outcome"
    return done


SPLIT_BYTES = 1 << 20
"""rclone buffers every part of an upload request in a buffer the size of its largest
part: parts go in another request once they would waste more than this together."""


def _by_cutoff(parts: list[tuple[str, list[bytes]]]) -> list[list[tuple[str, list[bytes]]]]:
    """`parts` (name, chunks) as upload requests, smallest first: a larger part starts
    a new request when the buffers of the parts before it would grow by `SPLIT_BYTES`
    in all (one request costs rcd about what 1 MiB of buffers does)."""
    sized = sorted(((sum(len(c) for c in chunks), name, chunks) for name, chunks in parts))
    groups: list[list[tuple[str, list[bytes]]]] = []
    largest = 0
    for size, name, chunks in sized:
        if not groups or len(groups[-1]) * (size - largest) > SPLIT_BYTES:
            groups.append([])
        groups[-1].append((name, chunks))
        largest = size
    return groups


def _verify_one(
    temp: str, size: int, streamed: dict[str, str], vtype: str, got: Entry | None
) -> PlacetError | None:
    """The stored temporary object against the bytes sent: None when it matches."""
    if got is None or got.is_dir or (got.size is not None and got.size != size):
        return size_mismatch(temp, size, got)
    remote = got.digests.get(vtype)
    if remote != streamed[vtype]:
        return digest_mismatch(temp, vtype, remote, streamed[vtype])
    return None


class Batches:
    """Batches of small new files of one folder (the ``batches`` part of `RcloneDrive`)."""

    def __init__(
        self, calls: RcloneCalls, listing: Listing, temps: Temps, transfers: Transfers
    ) -> None:
        self._calls = calls
        self._listing = listing
        self._temps = temps
        self._transfers = transfers

    @property
    def max_file_size(self) -> int:
        """Most bytes of one file of a batch (`Transfers.rcd_upload_max`)."""
        return self._transfers.rcd_upload_max

    def can_batch(self) -> bool:
        """True when the drive can take batches: a temporary object moves onto its name
        server-side, the remote reports a digest placet can compare, small files go by rcd."""
        caps = self._calls.capabilities()
        return (
            caps.server_side_replace
            and preferred_digest(caps) is not None
            and (self.max_file_size >= 0)
        )

    def _batch(
        self,
        inputs: list[dict[str, Any]],
        *,
        action: str,
        target: str,
        concurrency: int | None = None,
    ) -> list[Any]:
        """One `job/batch` of rc calls (`concurrency` at a time, rclone's `--transfers`
        unless given); their results in order (each a dict)."""
        params: dict[str, Any] = {"inputs": inputs}
        if concurrency is not None:
            params["concurrency"] = concurrency
        body = self._calls.rc(
            "job/batch", params, action=action, target=target, timeout=LONG_CALL_SECONDS
        )
        results = body.get("results") if isinstance(body, dict) else None
        if not isinstance(results, list) or len(results) != len(inputs):
            raise DriveError(
                f"rclone answered a batch of {len(inputs)} calls ({action} {target!r}) with "
                f"{len(results) if isinstance(results, list) else 'no'} results; try again",
                details={"path": target},
            )
        return [r if isinstance(r, dict) else {} for r in results]

    def _failure(self, res: dict[str, Any], action: str, path: str) -> PlacetError | None:
        """The mapped error of one `job/batch` result, None when it succeeded."""
        if "error" not in res:
            return None
        status = res.get("status")
        return rclone_failure(
            action,
            path,
            str(res.get("error") or ""),
            secrets=self._calls.secrets,
            http_status=status if isinstance(status, int) else 500,
        )

    def _delete_temps(self, temps: Sequence[str]) -> None:
        """Delete temporary objects, quietly (on the way out; the first error is reported)."""
        if not temps:
            return
        fs = self._calls.fs().raw
        inputs = [{"_path": "operations/deletefile", "fs": fs, "remote": t} for t in temps]
        try:
            self._batch(inputs, action="delete temp", target=temps[0])
        except PlacetError:
            for t in temps:  # one by one, so that each failure stays its own
                self._temps.remove_temp(t, quiet=True)

    def _delete_paths(self, paths: Sequence[str], action: str) -> None:
        """Delete objects `paths` (new files this batch moved into place that did not hold
        the approved bytes), quietly: their outcome already says `verify_failed`."""
        if not paths:
            return
        fs = self._calls.fs().raw
        inputs = [{"_path": "operations/deletefile", "fs": fs, "remote": p} for p in paths]
        with contextlib.suppress(PlacetError):
            self._batch(inputs, action=action, target=paths[0])

    def mkdir_many(self, paths: Sequence[str]) -> list[PlacetError | None]:
        """Create each of folders `paths` and its parents (an existing folder is fine), in
        order: per path None or the error it met. On a local folder, one `job/batch` run
        one call at a time (~0.1 ms of rcd's user CPU per folder; ~0.6 ms by a request
        each); on any other remote, one request each (rclone's sftp backend took seconds
        per folder in a `job/batch`). Callers check first what `Transfers.mkdir` checks
        (no file there, no normalization twin).

        Raises:
            PathRefused: a path placet refuses to pass on (nothing is created).
            On a local folder, whatever stops the whole request (DriveUnavailable...).
        """
        checked = [check_drive_path(p) for p in paths]
        fs = self._calls.fs().raw
        if checked and self._calls.capabilities().backend == "local":
            inputs = [{"_path": "operations/mkdir", "fs": fs, "remote": p} for p in checked]
            results = self._batch(inputs, action="create folder", target=checked[0], concurrency=1)
            return [
                self._failure(r, "create folder", p) for r, p in zip(results, checked, strict=True)
            ]
        out: list[PlacetError | None] = []
        for path in checked:
            try:
                params = {"fs": fs, "remote": path}
                self._calls.rc("operations/mkdir", params, action="create folder", target=path)
                out.append(None)
            except PlacetError as e:
                out.append(e)
        return out

    def targets_listed(self, paths: Sequence[str], digest_type: str) -> dict[str, Entry]:
        """The entries now at `paths` (files of a batch's targets) that are there, by
        path, each with its `digest_type` digest where the remote has one: one request
        listing each folder once, only those names (an absent one costs no hashing).

        Raises:
            PathRefused: a path placet refuses to pass on.
        """
        wanted = {check_drive_path(p) for p in paths}
        names: dict[str, list[str]] = {}
        for path in wanted:
            folder, name = _split(path)
            names.setdefault(folder, []).append(name)
        t = digest_type.lower()
        vtype = t if t in self._calls.capabilities().hash_types else None
        listed = self._listed_many([(f, vtype, n) for f, n in names.items()])
        return {p: e for p, e in listed.items() if p in wanted}

    def upload_new_batch(
        self,
        files: Sequence[NewFile],
        *,
        journal: Callable[[list[tuple[int, str]]], None] | None = None,
        ready: Callable[[int], None] | None = None,
    ) -> list[BatchOutcome]:
        """Upload new files of one or more folders, each verified, none over an existing name.

        Args:
            files: new files, each at most `Transfers.rcd_upload_max` bytes, at most
                `BATCH_MAX_FILES` / `BATCH_MAX_BYTES` in all.
            journal: called once with (file index, temporary path) of every file to be sent,
                before any byte is.
            ready: called with a file's index once its bytes were read and approved (it
                may raise to stop the batch before anything is sent).

        Returns:
            Per file, in order: its `UploadResult` (with the stored object's `mtime`), or
            the error that stopped it: `StaleEvidence` (its bytes are not the approved ones,
            or its size changed; nothing was sent), `AlreadyExists` (its target appeared),
            `DriveError` (``verify_failed``, ``local_io_error``, or rclone's).

        Raises:
            UsageError: too many files, one too big, or the drive cannot batch
                (`can_batch`). Whatever stops the whole request (DriveUnavailable...), after
                deleting every temporary object of the batch.
        """
        if not files:
            return []
        if not self.can_batch():
            raise UsageError("this drive cannot upload in batches; upload one file at a time")
        vtype = preferred_digest(self._calls.capabilities())
        assert vtype is not None
        targets = [check_drive_path(f.remote_path) for f in files]
        total = sum(f.size for f in files)
        if (
            any(not t for t in targets)
            or any(f.size > self.max_file_size for f in files)
            or len(files) > BATCH_MAX_FILES
            or total > BATCH_MAX_BYTES
        ):
            raise UsageError(
                f"a batch takes at most {BATCH_MAX_FILES} new files, each at most "
                f"{self.max_file_size} bytes, {BATCH_MAX_BYTES} bytes in all"
            )
        for f in files:
            check_digest_type(f.expected_digest)
        out: list[BatchOutcome | None] = [None] * len(files)
        folders: dict[str, list[int]] = {}  # folder -> indexes of its files, in order
        for i, t in enumerate(targets):
            folders.setdefault(_split(t)[0], []).append(i)
        for folder, indexes in folders.items():
            self._refuse_twins(folder, [targets[i] for i in indexes], indexes, out)
        held: list[tuple[int, str, list[bytes], dict[str, str]]] = []
        for i, (f, target) in enumerate(zip(files, targets, strict=True)):
            if out[i] is not None:
                continue
            types = [
                "sha256",
                vtype,
                *([f.expected_digest[0].lower()] if f.expected_digest else []),
            ]
            hs = pumps.hashers(types)

            def confirm(got: dict[str, str], f: NewFile = f, target: str = target) -> None:
                check_expected(got, f.expected_sha256, f.expected_digest, target)

            try:
                chunks = pumps.read_held(f.fd, f.size, hs, pumps.Ticker(None, f.size), confirm)
            except PlacetError as e:  # StaleEvidence, local_io_error: this file sends nothing
                out[i] = e
                continue
            if ready is not None:
                ready(i)
            folder, name = _split(target)
            temp = f"{folder}/{temp_name(name)}".lstrip("/")
            held.append((i, temp, chunks, {t: h.hexdigest() for t, h in hs.items()}))
        if not held:
            return _every(out)
        temps = [h[1] for h in held]
        if journal is not None:
            journal([(i, t) for i, t, _, _ in held])
        keep: set[str] = set()  # temps moved into place
        try:
            sent: dict[str, list[tuple[int, str, list[bytes], dict[str, str]]]] = {}
            for h in held:
                sent.setdefault(_split(h[1])[0], []).append(h)
            for folder, some in sent.items():
                for group in _by_cutoff([(_split(t)[1], c) for _, t, c, _ in some]):
                    self._calls.rc_upload_many(folder, group)
            movable = self._movable(sent, targets, [f.size for f in files], vtype, out)
            fs = self._calls.fs().raw
            moves = [
                {"_path": "operations/movefile", "srcFs": fs, "srcRemote": temp, "dstFs": fs,
                 "dstRemote": targets[i]}
                for i, temp, _ in movable
            ]  # fmt: skip
            moved = self._batch(moves, action="move into", target=targets[0]) if moves else []
            placed: list[tuple[int, str, dict[str, str]]] = []
            for (i, temp, streamed), res in zip(movable, moved, strict=True):
                err = self._failure(res, "move into", targets[i])
                if err is not None:
                    out[i] = err
                    continue
                keep.add(temp)
                placed.append((i, temp, streamed))
            # what a move took is what sat under the temporary name at that moment: prove
            # each target holds the approved bytes, and delete the ones that do not
            names: dict[str, list[str]] = {}
            for i, _, _ in placed:
                folder, name = _split(targets[i])
                names.setdefault(folder, []).append(name)
            after = self._listed_many([(f, vtype, n) for f, n in names.items()])
            wrong: list[str] = []
            for i, temp, streamed in placed:
                got = after.get(targets[i])
                err = _verify_one(targets[i], files[i].size, streamed, vtype, got)
                if err is not None:
                    wrong.append(targets[i])
                    out[i] = _not_kept(targets[i], err)
                    continue
                assert got is not None
                out[i] = UploadResult(
                    remote_path=targets[i],
                    size=files[i].size,
                    sha256=streamed["sha256"],
                    verification=f"digest:{vtype}",  # type: ignore[arg-type]
                    path_taken="temp+move",
                    digest_type=vtype,
                    digest=got.digests[vtype],
                    temp_path=temp,
                    mtime=got.mtime,  # a server-side move keeps the object's mtime
                )
            self._delete_paths(wrong, "remove unverified")
        except BaseException:
            self._delete_temps([t for t in temps if t not in keep])
            raise
        self._delete_temps([t for t in temps if t not in keep])
        return _every(out)

    def _movable(
        self,
        sent: dict[str, list[tuple[int, str, list[bytes], dict[str, str]]]],
        targets: Sequence[str],
        sizes: Sequence[int],
        vtype: str,
        out: list[BatchOutcome | None],
    ) -> list[tuple[int, str, dict[str, str]]]:
        """The sent files whose temporary object holds the bytes sent and whose target is
        still absent, from one request listing each folder; `out[i]` set for the others.
        A folder whose targets' names are all `twin_free`, on a remote that tells case
        apart, is listed once: these temporary objects and target names, with digests
        (only an entry of its very name is in such a name's way). Any other is listed
        twice: its temporary objects with digests, and every name, none hashed (twins and
        case-folded names are found among all of them)."""
        insensitive = self._calls.capabilities().case_insensitive
        specs: list[tuple[str, str | None, Sequence[str] | None]] = []
        for folder, some in sent.items():
            names = [_split(targets[h[0]])[1] for h in some]
            if insensitive or not all(twin_free(n) for n in names):
                specs += [(folder, vtype, None), (folder, None, None)]
            else:
                specs.append((folder, vtype, [*(_split(h[1])[1] for h in some), *names]))
        listed = self._listed_many(specs)
        fold = str.casefold if insensitive else str
        by_folder: dict[str, list[str]] = {}
        for path in listed:
            folder, name = _split(path)
            by_folder.setdefault(folder, []).append(name)
        movable: list[tuple[int, str, dict[str, str]]] = []
        for folder, some in sent.items():
            there = by_folder.get(folder, [])
            present = {fold(n) for n in there}
            twins = normalization_twins([_split(targets[h[0]])[1] for h in some], there)
            for (i, temp, _, streamed), twin in zip(some, twins, strict=True):
                got = listed.get(temp)
                err = _verify_one(temp, sizes[i], streamed, vtype, got)
                if err is not None:
                    out[i] = err
                elif twin is not None:  # it appeared during the upload
                    out[i] = twin_refused(targets[i], twin, "move the upload onto")
                elif fold(_split(targets[i])[1]) in present:
                    out[i] = AlreadyExists(
                        f"refusing to move the upload onto {targets[i]!r}: something appeared "
                        "there during the upload; propose a replacement",
                        details={"path": targets[i]},
                    )
                else:
                    movable.append((i, temp, streamed))
        return movable

    def _refuse_twins(
        self,
        folder: str,
        targets: Sequence[str],
        indexes: Sequence[int],
        out: list[BatchOutcome | None],
    ) -> None:
        """Set `out[indexes[k]]` to `AlreadyExists` for each of `targets` (all in `folder`)
        whose name differs only by Unicode normalization from a name in `folder` or an
        earlier target's (`placet.drive.twins`), before any byte is read or sent: one
        listing of the folder, none when every name is `twin_free`."""
        names = [_split(t)[1] for t in targets]
        if all(twin_free(n) for n in names):
            return
        try:
            there = [_split(row[0])[1] for row in self._listing.list_rows(folder, recurse=False)]
        except NotFound:
            there = []
        for k, twin in enumerate(normalization_twins(names, there)):
            if twin is not None:
                out[indexes[k]] = twin_refused(targets[k], twin)

    def _listed_many(
        self, specs: Sequence[tuple[str, str | None, Sequence[str] | None]]
    ) -> dict[str, Entry]:
        """The entries directly in each folder of `specs` by path, from one `job/batch` of
        `operations/list`: per (folder, vtype, names), with `vtype` only placet's temporary
        objects (or, given `names`, only the files of those names) with their `vtype`
        digests (the folder's other files are neither hashed nor sent); without, every
        entry, no digest. A folder gone lists nothing. (One listing costs rclone about
        what one `operations/stat` does, which lists the parent folder to find its entry.)
        """
        inputs: list[dict[str, Any]] = []
        for folder, vtype, names in specs:
            params = self._calls.listing_params(folder, (vtype,) if vtype else (), recurse=False)
            if names is not None:
                params["_filter"] = {"IncludeRule": [_names_rule(names)]}
            elif vtype:
                params["_filter"] = {"IncludeRule": [f"{TEMP_PREFIX}*"]}  # a name in any folder
            inputs.append({"_path": "operations/list", **params})
        if not inputs:
            return {}
        out: dict[str, Entry] = {}
        results = self._batch(inputs, action="list", target=specs[0][0])
        for (folder, _, _), res in zip(specs, results, strict=True):
            err = self._failure(res, "list", folder)
            if isinstance(err, NotFound):
                continue  # the folder is gone: nothing to verify, nothing in the way
            if err is not None:
                raise err
            items = res.get("list")
            for item in items if isinstance(items, list) else []:
                if isinstance(item, dict):
                    e = self._calls.entry(item)
                    if e.path not in out or e.digests:
                        out[e.path] = e
        return out
