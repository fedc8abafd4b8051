"""`placet show ID --diff [--op N]`: a proposal's content as the installed command prints
it, checked against the evidence, every byte of the files inert.

Real parts: the proposing core over a real root and a local-folder drive (rclone), the
`placet` command as a child process reading the same store and drive.
"""

from __future__ import annotations

import os

from tests.support.rig import Rig, placet_cli

HOSTILE = (
    b"\x1b]52;c;cm0gLXJmIH4=\x07 \x1b[2J\x1b[31mred\x1b[0m evil\xe2\x80\xaetxt.exe "
    b"[bold]markup[/] <script>alert(1)</script>\n"
)


def _show(pid: int, *args: str) -> str:
    r = placet_cli("show", str(pid), "--diff", *args, env=dict(os.environ))
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_a_replacement_s_diff_is_printed_with_its_counts(configured_rig: Rig) -> None:
    rig = configured_rig
    assert rig.remote_dir is not None
    (rig.remote_dir / "report.md").write_bytes(b"# Report\n\nTotal: 3\nOwner: ana\n")
    rig.write("report.md", b"# Report\n\nTotal: 4\nOwner: ana\nReviewed: yes\n")
    rec = rig.upload("report.md", replace_existing=True)
    out = _show(rec.id)
    assert "op #0 upload_revision: report.md -> report.md" in out
    assert "text (UTF-8), +2 -1 lines, 30 B -> 44 B" in out
    body = out[out.index("@@") :].splitlines()
    assert body == [
        "@@ -1,4 +1,5 @@",
        "   # Report",
        "   ",
        "  -Total: 3",
        "  +Total: 4",
        "   Owner: ana",
        "  +Reviewed: yes",
    ]
    assert "# the file it replaces (on the drive): read whole; its digest matches" in out


def test_hostile_bytes_and_a_10_mb_line_print_inert_and_cut(configured_rig: Rig) -> None:
    rig = configured_rig
    rig.write("hostile.txt", HOSTILE + b"A" * (10 * 1024 * 1024) + b"\n")
    rec = rig.upload("hostile.txt")
    out = _show(rec.id, "--op", "0")
    assert "\x1b" not in out and "\u202e" not in out and "\x07" not in out
    assert "\\x1b]52;c;cm0gLXJmIH4=\\x07 \\x1b[2J\\x1b[31mred\\x1b[0m evil\\u202etxt.exe" in out
    assert "[bold]markup[/] <script>alert(1)</script>" in out
    assert "more characters]" in out and len(out) < 4000
    assert "only the first 64.0 KiB (65536 bytes) of 10.0 MiB (10485856 bytes) were read" in out


def test_an_op_that_does_not_exist_is_refused(configured_rig: Rig) -> None:
    configured_rig.write("a.txt", b"a\n")
    rec = configured_rig.upload("a.txt")
    r = placet_cli("show", str(rec.id), "--diff", "--op", "7", env=dict(os.environ))
    assert r.returncode == 3 and "has no op #7" in r.stderr and r.stdout == ""
    r = placet_cli("show", str(rec.id), "--op", "0", env=dict(os.environ))
    assert r.returncode == 2 and "--op N goes with --diff" in r.stderr
