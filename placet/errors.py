"""The domain errors of placet, and the CLI exit code each class maps to.

One small tree: every refusal or failure placet reports is a `PlacetError` carrying a
stable machine-readable `code`, a human `message` that says what was attempted, what
failed and what to do now, a `retryable` flag and JSON-safe `details`. The same object
feeds the MCP error result (`server/`), the review UI's error modal (`tui/`) and the
CLI's one line on stderr (`cli`), so a refusal reads the same everywhere.

Exit codes (docs/design.md section 9): 0 ok; 1 an op failed; 2 usage; 3 not found;
4 refused (expired, stale, wrong state, policy); 5 drive unavailable (retryable);
6 store error (locked, schema).

Every code placet raises or journals, by class (the class's default first; a code is
stable once shipped: agents and scripts match on it):

* `PlacetError` (exit 4): ``error`` (default, never raised bare); ``request_invalid`` (a stored
  request or evidence does not parse); ``cancelled`` (the owner stopped an op);
  ``internal_error`` (a bug: a tool or the executor crashed); ``local_io_error`` (a
  local read or write failed mid-op); ``unsupported_filesystem`` (no no-replace rename
  nor hard links: a download could overwrite); ``executor_unavailable`` (the review UI
  found no executor).
* `UsageError` (exit 2): ``invalid_argument`` (default; also an MCP tool's schema
  error); ``invalid_cursor``; ``invalid_anchor`` (not a `drive_changes` anchor, or
  another folder's); ``not_text`` (`drive_read` of a non-UTF-8 file);
  ``nothing_to_do`` (a sync plan with nothing to propose); ``skip_invalid`` /
  ``nothing_selected`` (an accept's skipped ops: wrong kind or index / every op);
  ``root_refused`` (a `--root` that is `/`, home, or overlaps placet's folders);
  ``decision_not_conflict`` / ``decision_not_allowed`` / ``undecided_conflict`` (a
  sync's conflict decisions).
* `PathRefused` (exit 4; docs/design.md section 6): ``path_outside_root`` (default);
  ``path_invalid`` (shape: ``..``, backslash, NUL, device name, length, depth, a
  remote ``:`` or leading ``-``); ``path_reserved`` (a component starts with
  ``.placet-tmp-``, placet's temporary names); ``symlink_refused``;
  ``not_regular_file``; ``hard_link_refused``; ``not_a_directory``;
  ``permission_denied``; ``root_changed`` (a root's device/inode moved);
  ``root_unknown``; ``placet_own_path`` (a download's destination folder is one of
  placet's own folders, checked by descriptor at execution); ``destination_moved``
  (a download's folder left the root, or was swapped, before the rename).
* `NotFound` (exit 3): ``not_found`` (default); ``not_a_file`` (a remote folder where a
  file was named); ``anchor_expired`` (a `drive_changes` anchor's listing was pruned).
* `AlreadyExists`: ``already_exists``. `Expired`: ``expired``. `WrongState`:
  ``wrong_state``. `StaleEvidence`: ``stale`` (also an op outcome); ``plan_superseded``
  (`propose_sync` of a plan made out of date by a newer plan of the same pair, or by an
  applied proposal).
* `LimitExceeded`: ``limit_exceeded`` (default: a cap on pending proposals, reads,
  plan entries; retryable when the cap frees itself, e.g. running long reads);
  ``server_busy`` (too many tool calls of one client in flight; retryable).
* `PolicyRefused` (exit 4): ``refused`` (default: a root's download policy forbids an
  overwrite; an agent withdrawing another bridge's proposal);
  ``yes_not_allowed`` (`--yes` without ``allow_yes``); ``no_terminal`` (no
  ``/dev/tty`` for the code); ``confirmation_mismatch``; ``request_altered`` (the
  stored request no longer hashes as shown); ``not_approved_as_shown`` (the approval
  bound another hash or selection); ``drive_changed`` (another drive than the
  proposal's); ``placet_own_path`` (`placet accept` and the review UI before the
  owner is asked, and the executor's `bind` before any op runs: an op would write into
  placet's data, config or database folder, `placet.proposals.vetting.refuse_own_paths`).
* `InProgress` (retryable): ``in_progress`` (a long read continues; also the journal
  detail of an op still running).
* `DriveError` (exit 1): ``drive_error`` (default); ``verify_failed`` (an upload's
  read-back did not match: not kept); ``drive_locked`` (encrypted rclone config, no
  password); ``drive_misconfigured`` (unknown remote, bad spec); ``local_io_error``
  (a local file failed during a transfer).
* `DriveUnavailable` (exit 5, retryable): ``drive_unavailable``.
* `StoreError` (exit 6): ``store_error`` (default); ``store_busy`` (locked past the
  busy timeout); ``audit_mismatch`` (`placet audit --verify` found a broken chain).
  `SchemaTooNew`: ``schema_too_new``.
* `ConfigError` (exit 2): ``config_error`` (default); ``no_keyring`` /
  ``keyring_error`` (the keyring is absent / refused); ``wrong_password`` (the
  password does not decrypt rclone's config).
* `placet.sync.model.EmptySideRefused` (a `PlacetError`): ``empty_side`` (a side
  listed empty while a baseline exists), ``listing_incomplete`` (a listing failed;
  retryable).
* Journal only (an op result's detail, never raised): ``skipped_by_owner`` (unticked
  when accepting).
"""

from __future__ import annotations

from typing import Any, ClassVar

EXIT_OK = 0
EXIT_OP_FAILED = 1
EXIT_USAGE = 2
EXIT_NOT_FOUND = 3
EXIT_REFUSED = 4
EXIT_DRIVE_UNAVAILABLE = 5
EXIT_STORE = 6


class PlacetError(Exception):
    """Base of every domain error.

    Args:
        message: one or two sentences: what was attempted, on what, what failed, and
            what to do instead.
        code: overrides the class's default code (e.g. `path_outside_root` for a
            `PathRefused`).
        details: JSON-serialisable facts (paths, digests, versions); never secrets.
        retryable: overrides the class default; True when the same call may succeed later.
    """

    code: ClassVar[str] = "error"
    retryable_default: ClassVar[bool] = False
    exit_code: ClassVar[int] = EXIT_REFUSED

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        details: dict[str, Any] | None = None,
        retryable: bool | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.error_code: str = code or type(self).code
        self.details: dict[str, Any] = details or {}
        self.retryable: bool = self.retryable_default if retryable is None else retryable

    def to_dict(self) -> dict[str, Any]:
        """The wire shape `{code, message, retryable, details}` (docs/design.md section 5)."""
        return {
            "code": self.error_code,
            "message": self.message,
            "retryable": self.retryable,
            "details": self.details,
        }


class UsageError(PlacetError):
    """A malformed request: wrong argument, bad value, unknown field."""

    code = "invalid_argument"
    exit_code = EXIT_USAGE


class PathRefused(PlacetError):
    """A local or remote path broke a rule of docs/design.md section 6.

    Codes used: `path_outside_root`, `path_invalid` (shape), `path_reserved`,
    `symlink_refused`, `not_regular_file`, `hard_link_refused`, `not_a_directory`,
    `permission_denied`, `root_changed`, `root_unknown`, `placet_own_path`,
    `destination_moved` (see the module docstring).
    """

    code = "path_outside_root"


class NotFound(PlacetError):
    code = "not_found"
    exit_code = EXIT_NOT_FOUND


class AlreadyExists(PlacetError):
    code = "already_exists"


class Expired(PlacetError):
    code = "expired"


class WrongState(PlacetError):
    """A lifecycle transition the proposal's current status does not allow."""

    code = "wrong_state"


class StaleEvidence(PlacetError):
    """What a proposal saw no longer holds (local file edited, remote target changed)."""

    code = "stale"


class LimitExceeded(PlacetError):
    """A cap was hit: pending proposals per bridge or in total, read size, plan entries."""

    code = "limit_exceeded"


class PolicyRefused(PlacetError):
    """The owner's configuration or placet's rules forbid this (download policy, `--yes`
    without opt-in, no terminal, a binding that does not hold, a write into placet's own
    folders); codes in the module docstring."""

    code = "refused"


class InProgress(PlacetError):
    """A long read continues in the background; call again."""

    code = "in_progress"
    retryable_default = True


class DriveError(PlacetError):
    """The remote (through rclone) failed in a way retrying will not fix."""

    code = "drive_error"
    exit_code = EXIT_OP_FAILED


class DriveUnavailable(DriveError):
    """The remote could not be reached or timed out; the same call may succeed later."""

    code = "drive_unavailable"
    retryable_default = True
    exit_code = EXIT_DRIVE_UNAVAILABLE


class StoreError(PlacetError):
    """The database refused: locked past the busy timeout, unreadable, wrong schema."""

    code = "store_error"
    exit_code = EXIT_STORE


class SchemaTooNew(StoreError):
    code = "schema_too_new"


class ConfigError(PlacetError):
    """The owner's configuration or the data directory is unusable."""

    code = "config_error"
    exit_code = EXIT_USAGE
