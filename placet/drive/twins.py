"""Names that differ only by Unicode normalization (``café`` NFC beside ``café`` NFD).

rclone serve sftp (and any remote that matches names by normal form) resolves such a
name to either object from one call to the next: an upload's check after the move then
hashed the other object and the undo deleted it, a file the owner never approved to
touch; a batch's move onto the name replaced the other object
(docs/decisions/0010-names-on-the-drive.md). placet refuses to write a name beside its
twin: uploads (`Transfers.upload_from_fd`), batches of new files
(`placet.drive.batches`) and mkdir (`Transfers.mkdir`) share this rule.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Sequence

from placet.errors import AlreadyExists

_ASCII_IMAGES = frozenset("K;`")
"""The ASCII characters that are another character's NFC form: KELVIN SIGN (U+212A),
GREEK QUESTION MARK (U+037E) and GREEK VARIA (U+1FEF) normalize to them."""


def twin_free(name: str) -> bool:
    """Whether no other name has `name`'s NFC form: an ASCII name without ``K``, ``;`` or
    a backquote (``K.txt`` with U+212A for its ``K`` is the twin of ``K.txt``, and rclone
    serve sftp resolves one to the other)."""
    return name.isascii() and _ASCII_IMAGES.isdisjoint(name)


def normalization_twins(names: Sequence[str], siblings: Iterable[str]) -> list[str | None]:
    """Per name of `names` (new names of one folder, in order): the first of `siblings`
    (the names in that folder), or of the names before it, that is not that name but
    has its NFC form; None when there is none. A `twin_free` name has none. Each sibling
    is normalized once (a folder of 10,000 names costs milliseconds)."""
    if all(twin_free(n) for n in names):
        return [None] * len(names)
    by_form: dict[str, list[str]] = {}
    for other in siblings:
        forms = by_form.setdefault(unicodedata.normalize("NFC", other), [])
        if other not in forms:
            forms.append(other)
    out: list[str | None] = []
    for name in names:
        key = unicodedata.normalize("NFC", name)
        forms = by_form.setdefault(key, [])
        twin = None if twin_free(name) else next((o for o in forms if o != name), None)
        out.append(twin)
        if name not in forms:
            forms.append(name)
    return out


def normalization_twin(name: str, siblings: Iterable[str]) -> str | None:
    """`name`'s twin among `siblings`, as `normalization_twins` finds it."""
    return normalization_twins([name], siblings)[0]


def twin_refused(path: str, twin: str, action: str = "upload to") -> AlreadyExists:
    """The refusal of `action` on drive path `path` beside its twin `twin` (a name);
    details ``path`` and ``existing_name``."""
    return AlreadyExists(
        f"refusing to {action} {path!r}: {twin!r} is there, a name that differs only by "
        "Unicode normalization, and the remote may take one for the other; choose another "
        "name or propose the change under that name",
        details={"path": path, "existing_name": twin},
    )
