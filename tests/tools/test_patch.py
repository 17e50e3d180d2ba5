"""diff and apply_patch against a real session."""

from __future__ import annotations

import pytest
from toolcall import call, fresh_dir

from caisson import Session
from caisson.tools.base import REGISTRY

pytestmark = pytest.mark.anyio

ORIGINAL = "".join(f"line {i}\n" for i in range(1, 41))


async def test_diff_of_strings_with_labels(shared_session: Session) -> None:
    r = await call(
        shared_session, "diff", original="foo\nbar\n", modified="foo\nbaz\n", original_label="a/x", modified_label="b/x"
    )
    assert r.text == "--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n foo\n-bar\n+baz\n"
    assert (r.data["added"], r.data["removed"], r.data["identical"]) == (1, 1, False)
    same = await call(shared_session, "diff", original="same\n", modified="same\n")
    assert same.ok and same.text == "(no differences)" and same.data["identical"]


async def test_diff_of_files(shared_session: Session) -> None:
    d = fresh_dir()
    await shared_session.write_file(f"{d}/a.txt", ORIGINAL)
    await shared_session.write_file(f"{d}/b.txt", ORIGINAL.replace("line 20\n", "line twenty\n"))
    r = await call(shared_session, "diff", original=f"{d}/a.txt", modified=f"{d}/b.txt", mode="files", context_lines=1)
    assert r.text == f"--- {d}/a.txt\n+++ {d}/b.txt\n@@ -19,3 +19,3 @@\n line 19\n-line 20\n+line twenty\n line 21\n"
    missing = await call(shared_session, "diff", original=f"{d}/nope.txt", modified=f"{d}/b.txt", mode="files")
    assert missing.error.code == "not_found"


async def test_patch_from_diff_applies(shared_session: Session) -> None:
    d = fresh_dir()
    await shared_session.write_file(f"{d}/f.txt", ORIGINAL)
    modified = ORIGINAL.replace("line 3\n", "line three\n").replace("line 35\n", "line 35\nline 35.5\n")
    patch = (
        await call(
            shared_session,
            "diff",
            original=ORIGINAL,
            modified=modified,
            original_label="a/f.txt",
            modified_label="b/f.txt",
        )
    ).text
    r = await call(shared_session, "apply_patch", path=f"{d}/f.txt", patch=patch)
    assert r.text == f"Successfully applied patch to '{d}/f.txt' (2 hunk(s))"
    assert (await shared_session.read_file(f"{d}/f.txt")).decode() == modified
    # Applying it again fails: its removed lines are gone.
    again = await call(shared_session, "apply_patch", path=f"{d}/f.txt", patch=patch)
    assert again.error.code == "patch_failed" and "Hunk 1 (@@ -1,6 +1,6 @@)" in again.text


async def test_failing_hunk_leaves_file_byte_identical(shared_session: Session) -> None:
    d = fresh_dir()
    current = ORIGINAL.replace("line 31\n", "someone changed this\n")
    await shared_session.write_file(f"{d}/f.txt", current)
    patch = (
        await call(
            shared_session,
            "diff",
            original=ORIGINAL,
            modified=ORIGINAL.replace("line 5\n", "five\n").replace("line 30\n", "thirty\n"),
        )
    ).text
    r = await call(shared_session, "apply_patch", path=f"{d}/f.txt", patch=patch)
    assert r.error.code == "patch_failed" and r.text.startswith("Hunk 2 (@@ -27,7 +27,7 @@) does not apply")
    assert (await shared_session.read_file(f"{d}/f.txt")).decode() == current


async def test_patch_names_its_file_creates_new_files_and_dry_runs(shared_session: Session) -> None:
    d = fresh_dir()
    await shared_session.write_file(f"{d}/src/app.py", "x = 1\n")
    old = shared_session.cwd
    shared_session.cwd = d
    try:
        patch = (
            "diff --git a/src/app.py b/src/app.py\n--- a/src/app.py\n+++ b/src/app.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"
            "diff --git a/src/new.py b/src/new.py\nnew file mode 100644\n--- /dev/null\n+++ b/src/new.py\n"
            "@@ -0,0 +1,2 @@\n+print('new')\n+print('file')\n"
        )
        dry = await call(shared_session, "apply_patch", patch=patch, dry_run=True)
        assert dry.ok and dry.text == (
            f"Patch applies cleanly to '{d}/src/app.py' (1 hunk(s))\n"
            f"Patch applies cleanly to '{d}/src/new.py' (1 hunk(s))"
        )
        assert not (await shared_session.stat(f"{d}/src/new.py")).exists
        r = await call(shared_session, "apply_patch", patch=patch)
        assert r.ok and [f["created"] for f in r.data["files"]] == [False, True]
    finally:
        shared_session.cwd = old
    assert await shared_session.read_file(f"{d}/src/app.py") == b"x = 2\n"
    assert await shared_session.read_file(f"{d}/src/new.py") == b"print('new')\nprint('file')\n"


async def test_multi_file_patch_is_all_or_nothing(shared_session: Session) -> None:
    d = fresh_dir()
    await shared_session.write_file(f"{d}/one.txt", "a\n")
    await shared_session.write_file(f"{d}/two.txt", "b\n")
    patch = (
        f"--- {d}/one.txt\n+++ {d}/one.txt\n@@ -1 +1 @@\n-a\n+A\n"
        f"--- {d}/two.txt\n+++ {d}/two.txt\n@@ -1 +1 @@\n-not b\n+B\n"
    )
    r = await call(shared_session, "apply_patch", patch=patch)
    assert r.error.code == "patch_failed"
    assert await shared_session.read_file(f"{d}/one.txt") == b"a\n"


async def test_patch_keeps_crlf_and_rejects_stale_version(shared_session: Session) -> None:
    d = fresh_dir()
    await shared_session.write_file(f"{d}/w.txt", b"one\r\ntwo\r\nthree\r\n")
    version = (await call(shared_session, "read_file", path=f"{d}/w.txt")).data["version"]
    patch = "@@ -1,3 +1,3 @@\n one\n-two\n+2\n three\n"
    stale = await call(shared_session, "apply_patch", path=f"{d}/w.txt", patch=patch, expected_version="0" * 64)
    assert stale.error.code == "conflict"
    r = await call(shared_session, "apply_patch", path=f"{d}/w.txt", patch=patch, expected_version=version)
    assert r.ok and await shared_session.read_file(f"{d}/w.txt") == b"one\r\n2\r\nthree\r\n"
    undo = await call(shared_session, "undo_edit", path=f"{d}/w.txt")
    assert undo.ok and await shared_session.read_file(f"{d}/w.txt") == b"one\r\ntwo\r\nthree\r\n"


async def test_patch_without_hunks_is_invalid(shared_session: Session) -> None:
    r = await call(shared_session, "apply_patch", path="/workspace/x.txt", patch="just some text\n")
    assert (r.error.code, r.text) == ("invalid_patch", "The patch contains no hunks")


def test_policy_sees_every_file_a_patch_writes() -> None:
    tool = REGISTRY["apply_patch"]
    patch = "--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n--- /dev/null\n+++ b/new/y.py\n@@ -0,0 +1 @@\n+c\n"
    assert tool.paths(tool.input_model.model_validate({"patch": patch})) == ["x.py", "new/y.py"]
    assert tool.paths(tool.input_model.model_validate({"patch": patch, "path": "/etc/z"})) == ["/etc/z"]
