"""edit_file, multi_edit and undo_edit against a real session."""

from __future__ import annotations

import uuid

import pytest
from toolcall import call

from caisson import Session
from caisson.tools.base import ToolError
from caisson.tools.files.edit import commit, load_text

pytestmark = pytest.mark.anyio


async def put(session: Session, content: str | bytes) -> str:
    path = f"/workspace/e-{uuid.uuid4().hex[:8]}/file.py"
    await session.write_file(path, content)
    return path


async def text(session: Session, path: str) -> str:
    return (await session.read_file(path)).decode()


# ---- edit_file -----------------------------------------------------------------------------


async def test_exact_edit_returns_diff_and_line_range(shared_session: Session) -> None:
    path = await put(shared_session, "a = 1\nb = 2\nc = 3\n")
    r = await call(shared_session, "edit_file", path=path, old_string="b = 2", new_string="b = 20")
    assert r.text == f"Successfully made 1 replacement(s) in '{path}'"
    assert r.data["diff"] == f"--- {path}\n+++ {path}\n@@ -1,3 +1,3 @@\n a = 1\n-b = 2\n+b = 20\n c = 3\n"
    assert r.data["line_range"] == [2, 2] and r.data["match"] == {"stage": "exact", "similarity": 1.0}
    assert await text(shared_session, path) == "a = 1\nb = 20\nc = 3\n"


async def test_several_matches_need_replace_all_or_first(shared_session: Session) -> None:
    path = await put(shared_session, "x = 1\nx = 1\nx = 1\n")
    r = await call(shared_session, "edit_file", path=path, old_string="x = 1", new_string="x = 2")
    assert r.error.code == "multiple_matches" and "Found 3 matches" in r.text
    assert await text(shared_session, path) == "x = 1\nx = 1\nx = 1\n"
    first = await call(shared_session, "edit_file", path=path, old_string="x = 1", new_string="y", on_multiple="first")
    assert first.ok and await text(shared_session, path) == "y\nx = 1\nx = 1\n"
    every = await call(shared_session, "edit_file", path=path, old_string="x = 1", new_string="z", replace_all=True)
    assert (
        every.text.startswith("Successfully made 2 replacement(s)") and await text(shared_session, path) == "y\nz\nz\n"
    )


async def test_identical_strings_and_missing_text_are_rejected(shared_session: Session) -> None:
    path = await put(shared_session, "hello world\n")
    same = await call(shared_session, "edit_file", path=path, old_string="hello", new_string="hello")
    assert (same.error.code, same.text) == ("no_change", "old_string and new_string are identical")
    needle = "this text is not in the file and it is longer than fifty characters"
    missing = await call(shared_session, "edit_file", path=path, old_string=needle, new_string="x")
    assert missing.text == f"String not found in file: '{needle[:50]}...'"
    fuzzy = await call(shared_session, "edit_file", path=path, old_string="zzzz qqqq", new_string="x", fuzzy_match=True)
    assert fuzzy.text == "No match found for 'zzzz qqqq' with threshold 70%"
    gone = await call(shared_session, "edit_file", path=path + ".nope", old_string="a", new_string="b")
    assert (gone.error.code, gone.text) == ("not_found", f"File does not exist: {path}.nope")


async def test_whitespace_stage_matches_other_indentation(shared_session: Session) -> None:
    path = await put(shared_session, "def f():\n\tif ready:\n\t\tgo()\n")
    r = await call(
        shared_session,
        "edit_file",
        path=path,
        old_string="    if ready:\n        go()\n",
        new_string="    if ready:\n        go(fast=True)\n",
    )
    assert r.ok and "(match type: WhitespaceInsensitive, similarity: 95.0%)" in r.text
    assert await text(shared_session, path) == "def f():\n\tif ready:\n\t\tgo(fast=True)\n"


async def test_fuzzy_stage_threshold_edge(shared_session: Session) -> None:
    # "abcdefgXYZ" is exactly 70 % similar to "abcdefghij" (3 edits in 10).
    path = await put(shared_session, "keep\nabcdefgXYZ\nkeep\n")
    above = await call(
        shared_session,
        "edit_file",
        path=path,
        old_string="abcdefghij",
        new_string="new",
        fuzzy_match=True,
        fuzzy_threshold=0.71,
    )
    assert above.error.code == "no_match" and above.data == {"best_similarity": 0.7, "best_line": 2}
    at = await call(
        shared_session,
        "edit_file",
        path=path,
        old_string="abcdefghij",
        new_string="new",
        fuzzy_match=True,
        fuzzy_threshold=0.7,
    )
    assert at.ok and "(match type: Fuzzy, similarity: 70.0%)" in at.text
    assert await text(shared_session, path) == "keep\nnew\nkeep\n"


async def test_line_range_mode(shared_session: Session) -> None:
    path = await put(shared_session, "one\ntwo\nthree\nfour\n")
    r = await call(shared_session, "edit_file", path=path, start_line=2, end_line=3, new_string="TWO-THREE")
    assert r.text == f"Successfully replaced lines 2-3 in '{path}'" and r.data["line_range"] == [2, 2]
    assert await text(shared_session, path) == "one\nTWO-THREE\nfour\n"
    out = await call(shared_session, "edit_file", path=path, start_line=3, end_line=9, new_string="x")
    assert out.error.code == "invalid_range" and "(3 lines)" in out.text
    both = await call(
        shared_session, "edit_file", path=path, old_string="one", start_line=1, end_line=1, new_string="x"
    )
    assert both.error.code == "invalid_arguments"


async def test_crlf_no_final_newline_and_multibyte_survive(shared_session: Session) -> None:
    path = await put(shared_session, "first\r\nsecond\r\nnaïve 日本語 end".encode())
    r = await call(shared_session, "edit_file", path=path, old_string="first\nsecond\n", new_string="1st\n2nd\n")
    assert r.ok
    r = await call(shared_session, "edit_file", path=path, old_string="日本語", new_string="にほんご")
    assert r.ok
    assert await shared_session.read_file(path) == "1st\r\n2nd\r\nnaïve にほんご end".encode()
    r = await call(shared_session, "edit_file", path=path, start_line=1, end_line=1, new_string="one")
    assert await shared_session.read_file(path) == "one\r\n2nd\r\nnaïve にほんご end".encode()


async def test_invalid_utf8_bytes_elsewhere_are_kept(shared_session: Session) -> None:
    path = await put(shared_session, b"caf\xe9 = 1\nvalue = 2\n")
    r = await call(shared_session, "edit_file", path=path, old_string="value = 2", new_string="value = 3")
    assert r.ok and await shared_session.read_file(path) == b"caf\xe9 = 1\nvalue = 3\n"


async def test_stale_version_and_concurrent_change_are_conflicts(shared_session: Session) -> None:
    path = await put(shared_session, "v = 1\n")
    version = (await call(shared_session, "read_file", path=path)).data["version"]
    await shared_session.write_file(path, "v = 1\nw = 2\n")
    stale = await call(
        shared_session, "edit_file", path=path, old_string="v = 1", new_string="v = 9", expected_version=version
    )
    assert stale.error.code == "conflict" and await text(shared_session, path) == "v = 1\nw = 2\n"
    # A change landing between the edit's read and its write is not overwritten.
    loaded = await load_text(shared_session.tool_context(), path)
    await shared_session.write_file(path, "concurrent\n")
    with pytest.raises(ToolError) as err:
        await commit(shared_session.tool_context(), loaded, "v = 9\nw = 2\n")
    assert err.value.code == "conflict" and await text(shared_session, path) == "concurrent\n"


async def test_binary_file_is_not_edited(shared_session: Session) -> None:
    path = await put(shared_session, b"a\x00b")
    r = await call(shared_session, "edit_file", path=path, old_string="a", new_string="c")
    assert r.error.code == "binary_file" and await shared_session.read_file(path) == b"a\x00b"


# ---- multi_edit ----------------------------------------------------------------------------


async def test_multi_edit_applies_all_located_in_the_original(shared_session: Session) -> None:
    path = await put(shared_session, "use old_crate;\nfn main() { old_crate::init(); }\n")
    r = await call(
        shared_session,
        "multi_edit",
        path=path,
        edits=[
            {"old_string": "use old_crate;", "new_string": "use new_crate;"},
            {"old_string": "old_crate::init()", "new_string": "new_crate::init()"},
        ],
    )
    assert r.text == f"Successfully applied 2 edit(s) to '{path}'"
    assert await text(shared_session, path) == "use new_crate;\nfn main() { new_crate::init(); }\n"


async def test_multi_edit_is_atomic(shared_session: Session) -> None:
    original = "a = 1\nb = 2\nc = 3\n"
    path = await put(shared_session, original)
    r = await call(
        shared_session,
        "multi_edit",
        path=path,
        edits=[
            {"old_string": "a = 1", "new_string": "a = 10"},
            {"old_string": "not there", "new_string": "x"},
            {"old_string": "c = 3", "new_string": "c = 30"},
        ],
    )
    assert (r.error.code, r.text) == ("no_match", "Edit 2: String not found in file: 'not there'")
    assert await shared_session.read_file(path) == original.encode()


async def test_multi_edit_rejects_overlaps_and_too_many_edits(shared_session: Session) -> None:
    path = await put(shared_session, "foo bar baz\n")
    r = await call(
        shared_session,
        "multi_edit",
        path=path,
        edits=[
            {"old_string": "foo bar", "new_string": "x"},
            {"old_string": "bar baz", "new_string": "y"},
        ],
    )
    assert (r.error.code, r.text) == ("overlapping_edits", "Edits 1 and 2 have overlapping regions")
    many = await call(
        shared_session, "multi_edit", path=path, edits=[{"old_string": f"{i}", "new_string": "x"} for i in range(51)]
    )
    assert many.error.code == "invalid_arguments" and "at most 50" in many.text
    assert await text(shared_session, path) == "foo bar baz\n"


async def test_multi_edit_dry_run_reports_without_writing(shared_session: Session) -> None:
    path = await put(shared_session, "alpha\n  beta  gamma\ndelta\n")
    r = await call(
        shared_session,
        "multi_edit",
        path=path,
        dry_run=True,
        edits=[
            {"old_string": "alpha", "new_string": "ALPHA!"},
            {"old_string": "beta gamma", "new_string": "BG", "fuzzy_match": True},
        ],
    )
    assert r.ok and r.data["applied"] == 2 and r.data["fuzzy"] == 1 and r.data["mean_similarity"] == 0.95
    assert r.data["size_delta"] == -8
    assert r.text.startswith(
        f"Dry run: 2 edit(s) would be applied to '{path}'\n  (1 fuzzy matches, avg 95% similarity)"
    )
    assert "Delta: -8 bytes" in r.text
    assert await text(shared_session, path) == "alpha\n  beta  gamma\ndelta\n"


# ---- undo_edit -----------------------------------------------------------------------------


async def test_undo_walks_back_edits_writes_and_deletes(session: Session) -> None:
    path = "/workspace/undo/file.txt"
    await call(session, "write_file", path=path, content="v1\n")
    await call(session, "edit_file", path=path, old_string="v1", new_string="v2")
    await call(session, "write_file", path=path, content="v3\n")
    await call(session, "delete_file", path=path)
    r = await call(session, "undo_edit", path=path)
    assert r.ok and await session.read_file(path) == b"v3\n"
    await call(session, "undo_edit", path=path)
    assert await session.read_file(path) == b"v2\n"
    await call(session, "undo_edit", path=path)
    assert await session.read_file(path) == b"v1\n"
    created = await call(session, "undo_edit", path=path)
    assert created.ok and "did not exist before" in created.text
    assert not (await session.stat(path)).exists
    none_left = await call(session, "undo_edit", path=path)
    assert none_left.error.code == "no_history"


async def test_undo_refuses_to_lose_a_later_change(session: Session) -> None:
    path = "/workspace/undo2.txt"
    await session.write_file(path, "start\n")
    await call(session, "edit_file", path=path, old_string="start", new_string="edited")
    await session.write_file(path, "changed outside the tools\n")
    r = await call(session, "undo_edit", path=path)
    assert r.error.code == "conflict"
    assert await session.read_file(path) == b"changed outside the tools\n"
