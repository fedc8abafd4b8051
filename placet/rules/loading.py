"""Reading `rules.toml` beside `config.toml`: the file's state, and its rules when usable.

`load_rules` never raises for the file's sake: it answers a `RulesState` that is
``absent`` (no file: no rule, as before rules existed), ``usable`` (its rules, its path,
the SHA-256 of the exact bytes read) or ``refused`` (a code and a message with the fix:
`placet.rules.safety`, or a file that does not parse). The bytes are read from the
descriptor whose status the safety checks judged, so the file judged is the file read.

A file with any mistake is refused whole, not rule by rule: dropping a forbid whose
examples failed would widen what the allows approve, and a rule the owner misspelt is
not the rule the owner meant. The parsed rules are kept per SHA-256 (`_PARSED`), so a
proposal pays for reading and hashing the file, not for parsing it again.
"""

from __future__ import annotations

import hashlib
import os
import stat
import threading
import tomllib
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from placet.config import Settings, toml_key
from placet.rules.model import Rule
from placet.rules.safety import Refusal, env_problem, problem
from placet.text import inert, quote

__all__ = [
    "RULES_FILE",
    "RulesInvalid",
    "RulesState",
    "load_rules",
    "owner_drive",
    "parse_rules",
    "rules_path",
]

RULES_FILE = "rules.toml"
MAX_RULES_BYTES = 1024 * 1024
"""A larger rules file is refused (nobody writes a megabyte of rules by hand)."""

_PARSED: OrderedDict[str, tuple[Rule, ...]] = OrderedDict()
_PARSED_LOCK = threading.Lock()
_PARSED_KEEP = 8


class RulesInvalid(ValueError):
    """The rules file does not parse; the message names the rule and the key."""


@dataclass(frozen=True)
class RulesState:
    """The rules file as placet found it (module docstring)."""

    path: Path
    status: Literal["absent", "usable", "refused"]
    rules: tuple[Rule, ...] = ()
    sha256: str | None = None
    data: bytes | None = field(default=None, repr=False)
    refusal: Refusal | None = None

    @property
    def usable(self) -> bool:
        return self.status == "usable"

    def line(self) -> str:
        """One line for the owner: where the file is and whether rules apply."""
        if self.status == "absent":
            return f"{self.path}: no rules file (every proposal waits for you)"
        if self.status == "usable":
            digest = self.sha256 or ""
            return f"{self.path}: {len(self.rules)} rule(s), sha256 {digest[:16]}…"
        why = self.refusal.message if self.refusal is not None else "refused"
        return f"{self.path}: refused, no rule applies: {why}"


def rules_path(settings: Settings) -> Path:
    """`rules.toml` in the folder of `config.toml`."""
    return settings.config_file.parent / RULES_FILE


def owner_drive(settings: Settings, env: Mapping[str, str] | None = None) -> str:
    """The drive `config.toml` names (else the default drive folder): what a rule
    without `drive` is about. `PLACET_DRIVE`, which the environment sets, is not
    consulted: a host's configuration may set it."""
    env = os.environ if env is None else env
    drive = settings.drive
    if env.get("PLACET_DRIVE"):
        try:
            values = tomllib.loads(settings.config_file.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
            values = {}
        named = values.get("drive")
        drive = named if isinstance(named, str) and named else None
    return drive or str(settings.default_drive_dir)


def _refused(path: Path, code: str, message: str) -> RulesState:
    return RulesState(path, "refused", refusal=Refusal(code, message))


def load_rules(
    settings: Settings, *, roots: Sequence[Path] = (), env: Mapping[str, str] | None = None
) -> RulesState:
    """The state of the owner's rules file (module docstring). `roots`: the local roots
    an agent may use (the file must lie outside each); `env`: the environment placet
    runs in (default `os.environ`)."""
    path = rules_path(settings)
    moved = env_problem(os.environ if env is None else env)
    try:
        lst = os.lstat(path)
    except FileNotFoundError:
        return RulesState(path, "absent")
    except OSError as e:
        return _refused(path, "rules_unreadable", f"cannot stat it: {e.strerror}")
    if moved is not None:
        return RulesState(path, "refused", refusal=moved)
    if stat.S_ISLNK(lst.st_mode):
        return _refused(
            path,
            "rules_link",
            f"{quote(str(path))} is a link; placet reads rules only from a plain file it "
            "names itself: replace the link with the file",
        )
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        return _refused(path, "rules_unreadable", f"cannot open it: {e.strerror}")
    try:
        st = os.fstat(fd)
        found = problem(path, st, roots)
        if found is not None:
            return RulesState(path, "refused", refusal=found)
        if st.st_size > MAX_RULES_BYTES:
            return _refused(
                path, "rules_invalid", f"it is {st.st_size} bytes; at most {MAX_RULES_BYTES}"
            )
        data = _read_all(fd)
    except OSError as e:
        return _refused(path, "rules_unreadable", f"cannot read it: {e.strerror}")
    finally:
        os.close(fd)
    digest = hashlib.sha256(data).hexdigest()
    try:
        rules = _parsed(digest, data)
    except RulesInvalid as e:
        return _refused(path, "rules_invalid", f"{e}; fix the file (no rule applies until then)")
    return RulesState(path, "usable", rules=rules, sha256=digest, data=data)


def _read_all(fd: int) -> bytes:
    chunks: list[bytes] = []
    total = 0
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
        total += len(chunk)
        if total > MAX_RULES_BYTES:
            raise OSError(0, f"it grew past {MAX_RULES_BYTES} bytes while read")
    return b"".join(chunks)


def _parsed(digest: str, data: bytes) -> tuple[Rule, ...]:
    with _PARSED_LOCK:
        hit = _PARSED.get(digest)
        if hit is not None:
            _PARSED.move_to_end(digest)
            return hit
    rules = parse_rules(data)
    with _PARSED_LOCK:
        _PARSED[digest] = rules
        while len(_PARSED) > _PARSED_KEEP:
            _PARSED.popitem(last=False)
    return rules


_KNOWN = sorted(Rule.model_fields)


def _which(index: int, table: Any) -> str:
    rid = table.get("id") if isinstance(table, dict) else None
    named = f" {quote(rid)}" if isinstance(rid, str) else ""
    return f"rule{named} (the {_ordinal(index + 1)} [[rule]])"


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def parse_rules(data: bytes) -> tuple[Rule, ...]:
    """The rules of a `rules.toml` text, in file order.

    Raises:
        RulesInvalid: not UTF-8 TOML; a top-level key other than ``rule``; a rule with an
            unknown key (the known ones are named), a missing or invalid value, or
            examples that fail (`placet.rules.model.Rule`); two rules with one id.
    """
    try:
        doc = tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise RulesInvalid(f"not valid TOML: {e}") from None
    extra = sorted(set(doc) - {"rule"})
    if extra:
        raise RulesInvalid(
            f"unknown top-level key(s) {', '.join(map(quote, extra))}; the file holds only "
            "[[rule]] tables"
        )
    tables = doc.get("rule", [])
    if not isinstance(tables, list):
        raise RulesInvalid("'rule' must be [[rule]] tables")
    rules: list[Rule] = []
    seen: set[str] = set()
    for i, table in enumerate(tables):
        try:
            rule = Rule.model_validate(table)
        except ValidationError as e:
            raise RulesInvalid(f"{_which(i, table)}: {_first_error(e)}") from None
        if rule.id in seen:
            raise RulesInvalid(f"{_which(i, table)}: the id {quote(rule.id)} is used twice")
        seen.add(rule.id)
        rules.append(rule)
    return tuple(rules)


def _first_error(e: ValidationError) -> str:
    first = e.errors()[0]
    key = toml_key(first["loc"]) if first["loc"] else ""
    if first["type"] == "extra_forbidden":
        return f"unknown key {quote(key)}; the keys a rule takes: {', '.join(_KNOWN)}"
    if first["type"] == "missing":
        return f"{quote(key)} is missing"
    msg = str(first["msg"]).removeprefix("Value error, ")
    where = f"{quote(key)}: " if key else ""
    return inert(f"{where}{msg}")
