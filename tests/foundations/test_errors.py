"""The error tree: each class names its code, exit code and retryable default in its
class line (`PlacetError.__init_subclass__`); the values are those docs/errors.md lists."""

from __future__ import annotations

import pytest

from placet import errors as e

# (class, code, exit code, retryable by default), as shipped: agents and scripts match on them.
TREE = [
    (e.UsageError, "invalid_argument", e.EXIT_USAGE, False),
    (e.PathRefused, "path_outside_root", e.EXIT_REFUSED, False),
    (e.NotFound, "not_found", e.EXIT_NOT_FOUND, False),
    (e.AlreadyExists, "already_exists", e.EXIT_REFUSED, False),
    (e.Expired, "expired", e.EXIT_REFUSED, False),
    (e.WrongState, "wrong_state", e.EXIT_REFUSED, False),
    (e.StaleEvidence, "stale", e.EXIT_REFUSED, False),
    (e.LimitExceeded, "limit_exceeded", e.EXIT_REFUSED, False),
    (e.PolicyRefused, "refused", e.EXIT_REFUSED, False),
    (e.InProgress, "in_progress", e.EXIT_REFUSED, True),
    (e.DriveError, "drive_error", e.EXIT_OP_FAILED, False),
    (e.DriveUnavailable, "drive_unavailable", e.EXIT_DRIVE_UNAVAILABLE, True),
    (e.StoreError, "store_error", e.EXIT_STORE, False),
    (e.SchemaTooNew, "schema_too_new", e.EXIT_STORE, False),
    (e.ConfigError, "config_error", e.EXIT_USAGE, False),
]


@pytest.mark.parametrize(("cls", "code", "exit_code", "retryable"), TREE)
def test_each_class_keeps_its_code_exit_code_and_retryable(
    cls: type[e.PlacetError], code: str, exit_code: int, retryable: bool
) -> None:
    err = cls("what was attempted failed")
    assert (err.error_code, err.exit_code, err.retryable) == (code, exit_code, retryable)
    assert err.to_dict()["code"] == code


def test_a_subclass_must_name_its_code() -> None:
    with pytest.raises(TypeError, match="code"):

        class Nameless(e.PlacetError):  # type: ignore[call-arg]
            pass


def test_a_subclass_inherits_what_it_does_not_name() -> None:
    class Flaky(e.DriveUnavailable, code="flaky"):
        pass

    assert (Flaky.code, Flaky.exit_code, Flaky.retryable_default) == (
        "flaky",
        e.EXIT_DRIVE_UNAVAILABLE,
        True,
    )
