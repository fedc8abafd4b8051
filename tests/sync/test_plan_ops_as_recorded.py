"""The plan of 20,000 files in one folder, and of 20,000 files in 2,000 nested folders
of 10, is the plan the whole-tree planner made of the same listings: the SHA-256 of its
ops, reports and counts (fingerprints aside, which hash the listings another way) equals
the one recorded from that planner (placet's `plan` at commit c495412, which held both
trees). The shapes are those of a folder of 200,000 files and of 1,000,000 files in
100,000 folders, scaled down; the listings hold hostile names (NFC and NFD twins, case
twins, names sorting around "/", hidden and refused names, long and non-Latin ones),
edits and deletions on either side, conflicts of content and of type, and folders on one
side.

`python -m tests.sync.test_plan_ops_as_recorded` prints the digests of whatever planner
`placet` imports, which is how they were recorded."""

from __future__ import annotations

import hashlib
import json
import unicodedata

import pytest

from placet.sync import plan
from placet.sync.entries import BaselineEntry, LocalEntry, PlanCapabilities, RemoteEntry
from placet.sync.model import SyncPlan
from tests.support.listings import B, L, R

FILES = 20_000

RECORDED = {
    ("one-folder", False): "32fda15883980baa47e31037318511b2e6a1c3f11e8461a8fb86a0861564329a",
    ("one-folder", True): "3898700295c3b878e88827a5874d6bcd7f452aab1b8af478d4782b391d5a7471",
    ("nested", False): "72b00d62bf05460543888ed84baa7ce97c07054bfd5db2b06bb335e9f9e14167",
    ("nested", True): "6d7a8b5b615316f4d6d981132e39ee3be8367124bcf974007fbea7ab69577207",
}
"""(shape, case-insensitive remote) -> SHA-256 of the plan's ops, reports and counts."""

_NAMES = [
    "café", unicodedata.normalize("NFD", "café"), "Read.md", "read.md", "a-b", "a.b",
    "a b", "a0", "a", "Ω≈ç√", "日本語.txt", "x" * 200, "con", "trailing. ", "back\\slash",
    "new\nline", ".hidden", "emoji-🙂",
]  # fmt: skip


def _folder(i: int, shape: str) -> str:
    if shape == "one-folder":
        return "big"
    n = i // 10  # 10 files a folder, three levels
    return f"d{n // 100:02d}/e{n // 10 % 10}/f{n % 10}"


def listings(
    shape: str,
) -> tuple[list[LocalEntry], list[RemoteEntry], dict[str, BaselineEntry]]:
    """`FILES` files in `shape`, every 50th file of a case below, then the odd names."""
    local: list[LocalEntry] = []
    remote: list[RemoteEntry] = []
    baseline: dict[str, BaselineEntry] = {}

    def put(path: str, lc: str | None, rc: str | None, bc: str | None = None) -> None:
        if lc is not None:
            local.append(L(unicodedata.normalize("NFC", path), lc, raw=path))
        if rc is not None:
            remote.append(R(path, rc))
        if bc is not None:
            baseline[unicodedata.normalize("NFC", path)] = B(path, bc)

    for i in range(FILES):
        p = f"{_folder(i, shape)}/f{i:05d}.txt"
        n = i % 50
        if n < 12:  # an odd name in place of the plain one
            p = f"{_folder(i, shape)}/{i:05d}-{_NAMES[(i // 50) % len(_NAMES)]}"
        case = (i // 50 + n) % 10
        if n % 5 or case == 0:
            put(p, f"same {i}", f"same {i}", f"same {i}" if i % 3 else None)
        elif case == 1:
            put(p, f"new {i}", None)  # new here
        elif case == 2:
            put(p, None, f"theirs {i}")  # new there
        elif case == 3:
            put(p, f"edited {i}", f"old {i}", f"old {i}")  # edited here
        elif case == 4:
            put(p, f"old {i}", f"theirs {i}", f"old {i}")  # edited there
        elif case == 5:
            put(p, f"mine {i}", f"theirs {i}", f"old {i}")  # edited on both: a conflict
        elif case == 6:
            put(p, f"same {i}", None, f"same {i}")  # deleted there
        elif case == 7:
            put(p, None, f"same {i}", f"same {i}")  # deleted here
        elif case == 8:
            put(p, f"mine {i}", f"theirs {i}")  # differ, no baseline: a conflict
        else:
            put(p, f"one {i}", f"one {i}", f"old {i}")  # the same change on both
    folders = sorted({_folder(i, shape) for i in range(FILES)})
    for d in sorted({"/".join(f.split("/")[:k]) for f in folders for k in (1, 2, 3)}):
        local.append(L(d, kind="dir"))
        remote.append(R(d, kind="dir"))
    for j, f in enumerate(folders[:40]):  # type conflicts, folders on one side
        local += [L(f"{f}/tc{j}", "a file here"), L(f"{f}/tc{j}x", kind="dir"),
                  L(f"{f}/tc{j}x/in", "in"), L(f"{f}/only-here{j}", kind="dir"),
                  L(f"{f}/only-here{j}/new", "n"), L(f"{f}/empty{j}", kind="dir")]  # fmt: skip
        remote += [R(f"{f}/tc{j}", kind="dir"), R(f"{f}/tc{j}/under", "u"),
                   R(f"{f}/tc{j}x", "a file there"), R(f"{f}/only-there{j}", kind="dir"),
                   R(f"{f}/only-there{j}/new", "t")]  # fmt: skip
        baseline[f"{f}/gone{j}"] = B(f"{f}/gone{j}", None)
        nfd_e, nfd_u = (unicodedata.normalize("NFD", f"{c}{j}") for c in "éü")
        local += [L(f"{f}/Twin{j}", "1"), L(f"{f}/twin{j}", "2"),  # case twins here
                  L(f"{f}/é{j}", "nfc"), L(f"{f}/é{j}", "nfd", raw=f"{f}/{nfd_e}"),
                  L(f"{f}/ü{j}", "same", raw=f"{f}/{nfd_u}")]  # fmt: skip
        remote += [R(f"{f}/README{j}", "r"), R(f"{f}/readme{j}", "r2"),  # case twins there
                   R(f"{f}/ü{j}", "same"), R(f"{f}/Twin{j}", "1")]  # fmt: skip
        for name in (f"ab{j}-c", f"ab{j}.d", f"ab{j} e", f"ab{j}0"):  # around "/"
            local.append(L(f"{f}/{name}", name))
            if name[-1] in "d0":
                remote.append(R(f"{f}/{name}", name))
        local += [L(f"{f}/ab{j}", kind="dir"), L(f"{f}/ab{j}/in", "here")]
        remote += [R(f"{f}/ab{j}", kind="dir"), R(f"{f}/ab{j}/out", "there")]
    local += [L("link", kind="skipped", note="symlink"), L("bad", kind="error", note="why")]
    remote += [R("link", kind="dir"), R("link/inside", "i"), R("bad/inside", "j")]
    return local, remote, baseline


def digest(p: SyncPlan) -> str:
    d = p.to_dict()
    body = {"ops": d["ops"], "reports": d["reports"], "summary": d["summary"]}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def planned(shape: str, ci: bool) -> SyncPlan:
    local, remote, baseline = listings(shape)
    caps = PlanCapabilities(hash_types=("sha1",), case_insensitive=ci)
    return plan(local, remote, baseline, caps)


@pytest.mark.parametrize("ci", [False, True], ids=["case-sensitive", "case-insensitive"])
@pytest.mark.parametrize("shape", ["one-folder", "nested"])
def test_the_plan_is_the_recorded_one(shape: str, ci: bool) -> None:
    p = planned(shape, ci)
    kinds = {o.kind for o in p.ops}
    assert kinds == {"mkdir", "upload", "upload_revision", "download"}
    assert p.summary["conflict"] > 400
    assert p.summary["deleted_remote"] > 0 and p.summary["deleted_local"] > 0
    assert digest(p) == RECORDED[(shape, ci)]


if __name__ == "__main__":  # pragma: no cover
    for shape, ci in RECORDED:
        print(f"    ({shape!r}, {ci}): {digest(planned(shape, ci))!r},")
