"""The domain errors of placet, and the CLI exit code each class maps to.

One small tree: every refusal or failure placet reports is a `PlacetError` carrying a
stable machine-readable `code`, a human `message` that says what was attempted, what
failed and what to do now, a `retryable` flag and JSON-safe `details`. The same object
feeds the MCP error result (`server/`, docs/design.md section 5), the review UI's error
modal (`tui/`) and the CLI's one line on stderr (`cli/`), so a refusal reads the same
everywhere.

Exit codes (docs/design.md section 9): 0 ok; 1 an op failed; 2 usage; 3 not found;
4 refused; 5 drive unavailable; 6 store error. Every code placet raises or journals, with
its class and exit code, is listed in docs/errors.md (checked against the source by
tests/project/test_errors_doc.py); a code is stable once shipped: agents and scripts match on it.
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

    def __init_subclass__(
        cls,
        *,
        code: str,
        exit_code: int | None = None,
        retryable: bool | None = None,
        **kwargs: Any,
    ) -> None:
        """A subclass names its default code in its class line, `class X(PlacetError,
        code="x")`, and its exit code and default `retryable` there when they differ
        from its base's."""
        super().__init_subclass__(**kwargs)
        cls.code = code
        if exit_code is not None:
            cls.exit_code = exit_code
        if retryable is not None:
            cls.retryable_default = retryable

    def to_dict(self) -> dict[str, Any]:
        """The wire shape `{code, message, retryable, details}` (docs/design.md section 5)."""
        return {
            "code": self.error_code,
            "message": self.message,
            "retryable": self.retryable,
            "details": self.details,
        }


class UsageError(PlacetError, code="invalid_argument", exit_code=EXIT_USAGE):
    """A malformed request: wrong argument, bad value, unknown field."""


class PathRefused(PlacetError, code="path_outside_root"):
    """A local or remote path broke a rule of docs/design.md section 6.

    Codes used: `path_outside_root`, `path_invalid` (shape), `path_reserved`,
    `symlink_refused`, `not_regular_file`, `hard_link_refused`, `not_a_directory`,
    `permission_denied`, `root_changed`, `root_unknown`, `placet_own_path`,
    `destination_moved` (docs/errors.md).
    """


class NotFound(PlacetError, code="not_found", exit_code=EXIT_NOT_FOUND):
    """The named proposal, plan, passkey, local or remote path does not exist."""


class AlreadyExists(PlacetError, code="already_exists"):
    """A write's target exists and replacing it was not asked for."""


class Expired(PlacetError, code="expired"):
    """A proposal's TTL (or a stored plan's retention) ran out."""


class WrongState(PlacetError, code="wrong_state"):
    """A lifecycle transition the proposal's current status does not allow."""


class StaleEvidence(PlacetError, code="stale"):
    """What a proposal saw no longer holds (local file edited, remote target changed)."""


class LimitExceeded(PlacetError, code="limit_exceeded"):
    """A cap was hit: pending proposals per bridge or in total, read size, plan entries."""


class PolicyRefused(PlacetError, code="refused"):
    """The owner's configuration or placet's rules forbid this (download policy, `--yes`
    without opt-in, no terminal, a binding that does not hold, a write into placet's own
    folders); codes in docs/errors.md."""


class SetRefused(PolicyRefused, code="set_refused"):
    """A decision on several proposals at once, refused whole: nothing of the set was
    decided. `refusals` holds each refused proposal's id and its own error (the same
    error, with the same code, that deciding it alone gives); `details["refused"]` lists
    them as ``{proposal_id, code, message}``."""

    def __init__(self, verb: str, size: int, refusals: list[tuple[int, PlacetError]]) -> None:
        self.refusals = refusals
        said = "; ".join(f"#{pid}: {e.message}" for pid, e in refusals)
        super().__init__(
            f"refusing to {verb} the {size} proposals shown: {len(refusals)} of them "
            f"cannot be decided as shown, so none was ({said}); review the set again",
            details={
                "size": size,
                "refused": [
                    {"proposal_id": pid, "code": e.error_code, "message": e.message}
                    for pid, e in refusals
                ],
            },
        )


def one_or_set(verb: str, size: int, refusals: list[tuple[int, PlacetError]]) -> PlacetError:
    """The error for `refusals` among `size` proposals decided together: the proposal's
    own error when it was decided alone, else `SetRefused` listing each."""
    if size == 1 and len(refusals) == 1:
        return refusals[0][1]
    return SetRefused(verb, size, refusals)


class InProgress(PlacetError, code="in_progress", retryable=True):
    """A long read continues in the background; call again."""


class DriveError(PlacetError, code="drive_error", exit_code=EXIT_OP_FAILED):
    """The remote (through rclone) failed in a way retrying will not fix."""


class DriveUnavailable(
    DriveError, code="drive_unavailable", exit_code=EXIT_DRIVE_UNAVAILABLE, retryable=True
):
    """The remote could not be reached or timed out; the same call may succeed later."""


class StoreError(PlacetError, code="store_error", exit_code=EXIT_STORE):
    """The database refused: locked past the busy timeout, unreadable, wrong schema."""


class SchemaTooNew(StoreError, code="schema_too_new"):
    """The database has a schema version newer than this placet's."""


class ConfigError(PlacetError, code="config_error", exit_code=EXIT_USAGE):
    """The owner's configuration or the data directory is unusable."""
