"""One standing rule as the owner writes it in `rules.toml`: a typed, frozen value.

A rule names an `effect` (`allow` or `forbid`), the proposal `kinds` it is about, and the
conditions a proposal's facts must meet (docs/decisions/0038-standing-rules.md). Kinds are
narrow on purpose: `upload` is a new file only; replacing one (`upload_replace`),
downloading (`download`, `download_replace`) and a sync (`sync`, whose replacements and
downloads need their own kinds named too) are covered only when the rule names them.

Every key is checked here, when the file is loaded: an unknown key (the known ones are
named in the refusal), a remote prefix the path rules refuse (`..`, a leading `/`...), a
local root that is not absolute, a `max_*` key on a forbid (a cap cannot make a forbid
narrower: forbid what you mean), `runs_code` or `secret_name` in `allow_flags` (no rule
ever approves those), an expiry without a time zone, and `match`/`not_match` examples
that the rule's remote prefix does not treat as the owner said.
"""

from __future__ import annotations

import functools
import os
from datetime import UTC, date, datetime, time
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from placet.errors import PathRefused
from placet.paths.local import check_local_shape
from placet.paths.remote import check_remote_path
from placet.rules.prefix import clean_segments, within_exactly, within_folded

__all__ = [
    "LISTABLE_FLAGS",
    "NEVER_BY_RULE",
    "Effect",
    "Rule",
    "RuleKind",
]

RuleKind = Literal["mkdir", "upload", "upload_replace", "download", "download_replace", "sync"]
Effect = Literal["allow", "forbid"]

NEVER_BY_RULE: tuple[str, ...] = ("runs_code", "secret_name")
"""Risk flags no rule approves, whatever it says: the proposal waits for the owner."""
LISTABLE_FLAGS: tuple[str, ...] = (
    "name_changed",
    "non_ascii_name",
    "confusable_name",
    "bidi_or_invisible",
)
"""Risk flags an allow may accept by naming them in `allow_flags`; `replaces_existing`
is accepted by the `*_replace` kinds instead."""

RULE_ID = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"


def _remote_prefix(value: str) -> str:
    try:
        return check_remote_path(value)
    except PathRefused as e:
        raise ValueError(e.message) from None


class Rule(BaseModel):
    """One `[[rule]]` table of `rules.toml` (the module docstring says what is refused)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=RULE_ID)
    """Letters, digits, `_`, `.`, `-`; at most 64; unique in the file."""
    effect: Effect
    kinds: tuple[RuleKind, ...] = Field(min_length=1)
    drive: str | None = None
    """The drive spec exactly as placet records it on a proposal; None: the drive
    `config.toml` names (or the default drive), never one the environment chose."""
    remote_prefix: str = ""
    """The remote folder the rule is about; ``""`` is the whole drive."""
    local_root: str | None = None
    """An absolute folder (``~`` expanded); ops that read or write a local file must lie
    under it (and under `local_prefix` in it)."""
    local_prefix: str = ""
    max_bytes: int | None = Field(default=None, ge=0)
    """Most bytes of one op (a file's size when proposed)."""
    max_bytes_per_proposal: int | None = Field(default=None, ge=0)
    max_per_hour: int | None = Field(default=None, ge=1)
    """Most proposals this rule approves in any 60 minutes (counted in the store)."""
    expires: datetime | date | None = None
    """From this time on the rule applies no more; a bare date is its first instant, UTC."""
    clients: tuple[str, ...] | None = None
    """Client names (as the MCP client reports them: a claim, not an identity)."""
    allow_flags: tuple[str, ...] = ()
    match: tuple[str, ...] = ()
    """Drive paths the rule's remote prefix must cover (checked when the file is loaded)."""
    not_match: tuple[str, ...] = ()
    """Drive paths the rule's remote prefix must not cover."""

    @field_validator("kinds")
    @classmethod
    def _distinct_kinds(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(value)) != len(value):
            raise ValueError("names a kind twice")
        return value

    @field_validator("remote_prefix")
    @classmethod
    def _check_remote_prefix(cls, value: str) -> str:
        return _remote_prefix(value)

    @field_validator("local_root")
    @classmethod
    def _check_local_root(cls, value: str | None) -> str | None:
        if value is None:
            return None
        path = os.path.expanduser(value)
        if not path.startswith("/"):
            raise ValueError("must be an absolute folder (or start with ~)")
        return os.path.realpath(path)

    @field_validator("local_prefix")
    @classmethod
    def _check_local_prefix(cls, value: str) -> str:
        if value in ("", "."):
            return ""
        try:
            return str(check_local_shape(value))
        except PathRefused as e:
            raise ValueError(e.message) from None

    @field_validator("expires")
    @classmethod
    def _aware(cls, value: datetime | date | None) -> datetime | date | None:
        if isinstance(value, datetime) and value.tzinfo is None:
            raise ValueError("a date and time needs its offset (e.g. 2027-01-31T18:00:00Z)")
        return value

    @field_validator("allow_flags")
    @classmethod
    def _listable(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for flag in value:
            if flag in NEVER_BY_RULE:
                raise ValueError(f"{flag!r} is never approved by a rule; remove it")
            if flag not in LISTABLE_FLAGS:
                raise ValueError(
                    f"unknown flag {flag!r}; flags a rule may accept: {', '.join(LISTABLE_FLAGS)}"
                )
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Rule:
        if self.local_prefix and self.local_root is None:
            raise ValueError("local_prefix needs local_root")
        if self.effect == "forbid":
            caps = [k for k in ("max_bytes", "max_bytes_per_proposal", "max_per_hour")
                    if getattr(self, k) is not None]  # fmt: skip
            if caps or self.allow_flags:
                named = ", ".join(caps + (["allow_flags"] if self.allow_flags else []))
                raise ValueError(
                    f"a forbid takes no {named}: it forbids whatever its other keys cover"
                )
        for example in self.match:
            if not self.covers_example(example):
                raise ValueError(
                    f"its example {example!r} in match is not covered by remote_prefix "
                    f"{self.remote_prefix!r}"
                )
        for example in self.not_match:
            if self.covers_example(example):
                raise ValueError(
                    f"its example {example!r} in not_match is covered by remote_prefix "
                    f"{self.remote_prefix!r}"
                )
        return self

    @functools.cached_property
    def remote_segments(self) -> tuple[str, ...]:
        return clean_segments(self.remote_prefix) or ()

    @functools.cached_property
    def local_segments(self) -> tuple[str, ...] | None:
        """The segments of `local_folder` (absolute, so without the leading ``/``)."""
        folder = self.local_folder
        return None if folder is None else tuple(p for p in folder.split("/") if p)

    @property
    def local_folder(self) -> str | None:
        """The absolute local folder (`local_root` joined with `local_prefix`), or None."""
        if self.local_root is None:
            return None
        return (
            os.path.join(self.local_root, self.local_prefix)
            if self.local_prefix
            else (self.local_root)
        )

    def covers_example(self, path: str) -> bool:
        """Whether the remote prefix covers the drive path `path`, as this rule's effect
        compares (`placet.rules.prefix`)."""
        if self.effect == "forbid":
            return within_folded(path, self.remote_segments)
        return within_exactly(path, self.remote_segments)

    def expires_at(self) -> datetime | None:
        """`expires` as an aware datetime (a date: its first instant, UTC)."""
        if self.expires is None or isinstance(self.expires, datetime):
            return self.expires
        return datetime.combine(self.expires, time(0), tzinfo=UTC)
