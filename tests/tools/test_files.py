"""read_file, write_file and delete_file against a real session."""

from __future__ import annotations

import base64
import hashlib

import pytest
from toolcall import call, fresh_dir

from caisson import Session
from caisson.tools.base import REGISTRY

pytestmark = pytest.mark.anyio

PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)


# ---- read_file -----------------------------------------------------------------------------


async def test_read_numbers_lines_and_reports_end_of_file(shared_session: Session) -> None:
    d = fresh_dir()
    await shared_session.write_file(f"{d}/a.txt", "alpha\nbeta\r\ngamma")
    r = await call(shared_session, "read_file", path=f"{d}/a.txt")
    assert r.ok
    assert r.text == "<file>\n00001| alpha\n00002| beta\n00003| gamma\n\n(End of file - 3 total lines)\n</file>"
    assert r.data["total_lines"] == 3 and not r.truncated
    assert r.data["version"] == hashlib.sha256(b"alpha\nbeta\r\ngamma").hexdigest()


async def test_read_offset_limit_and_line_range(shared_session: Session) -> None:
    d = fresh_dir()
    await shared_session.write_file(f"{d}/n.txt", "".join(f"line {i}\n" for i in range(1, 101)))
    r = await call(shared_session, "read_file", path=f"{d}/n.txt", offset=10, limit=5)
    assert r.text.splitlines()[1:6] == [f"{i:05}| line {i}" for i in range(11, 16)]
    assert "(File has 100 total lines. Use 'offset' parameter to read beyond line 15)" in r.text
    assert r.truncated and r.truncation == {"reason": "lines", "next_offset": 15, "total_lines": 100}
    ranged = await call(shared_session, "read_file", path=f"{d}/n.txt", start_line=98, end_line=120)
    assert ranged.text.splitlines()[1:4] == ["00098| line 98", "00099| line 99", "00100| line 100"]
    assert "(End of file - 100 total lines)" in ranged.text


async def test_relative_path_resolves_against_working_directory(shared_session: Session) -> None:
    d = fresh_dir()
    await shared_session.write_file(f"{d}/rel.txt", "hello\n")
    old = shared_session.cwd
    shared_session.cwd = d
    try:
        r = await call(shared_session, "read_file", path="rel.txt")
    finally:
        shared_session.cwd = old
    assert r.ok and "00001| hello" in r.text and r.data["path"] == f"{d}/rel.txt"


async def test_long_lines_are_cut_and_output_is_capped(shared_session: Session) -> None:
    d = fresh_dir()
    await shared_session.write_file(f"{d}/long.txt", "x" * 3000 + "\nshort\n")
    r = await call(shared_session, "read_file", path=f"{d}/long.txt")
    assert "00001| " + "x" * 2000 + "...\n00002| short" in r.text
    await shared_session.write_file(f"{d}/big.txt", ("y" * 99 + "\n") * 2000)
    capped = await call(shared_session, "read_file", path=f"{d}/big.txt")
    assert len(capped.text.encode()) < 52 * 1024
    last = capped.data["end_line"]
    assert last < 2000
    assert f"(Output truncated at 51200 bytes. Use 'offset' parameter to read beyond line {last})" in capped.text
    assert capped.truncation["reason"] == "bytes"


async def test_large_file_summary_mode(shared_session: Session) -> None:
    d = fresh_dir()
    await shared_session.write_file(f"{d}/big.py", "".join(f"x = {i}\n" for i in range(800)))
    r = await call(shared_session, "read_file", path=f"{d}/big.py", large_file_summary=True)
    assert r.data["summary"] and r.data["total_lines"] == 800
    assert "00050| x = 49" in r.text and "00051|" not in r.text and "Large file: 800 lines" in r.text
    # An explicit range reads normally; so does a small file.
    ranged = await call(shared_session, "read_file", path=f"{d}/big.py", large_file_summary=True, offset=700, limit=3)
    assert "00701| x = 700" in ranged.text and "summary" not in ranged.data


async def test_binary_files_are_refused_by_extension_and_content(shared_session: Session) -> None:
    d = fresh_dir()
    await shared_session.write_file(f"{d}/lib.so", b"ELF-but-text")
    await shared_session.write_file(f"{d}/data.txt", b"ab\x00cd" * 10)
    await shared_session.write_file(f"{d}/ctl.txt", bytes(range(1, 9)) * 20)
    for name in ("lib.so", "data.txt", "ctl.txt"):
        r = await call(shared_session, "read_file", path=f"{d}/{name}")
        assert (r.ok, r.error.code, r.text) == (False, "binary_file", f"Cannot read binary file: {d}/{name}")
    # The raw bytes stay available on request.
    raw = await call(shared_session, "read_file", path=f"{d}/data.txt", encoding="auto")
    assert raw.ok and base64.b64decode(raw.data["content"]) == b"ab\x00cd" * 10


async def test_images_come_back_as_base64_with_media_type(shared_session: Session) -> None:
    d = fresh_dir()
    await shared_session.write_file(f"{d}/pic.png", PNG)
    r = await call(shared_session, "read_file", path=f"{d}/pic.png")
    assert r.ok and r.data["type"] == "image" and r.data["media_type"] == "image/png"
    assert base64.b64decode(r.data["data"]) == PNG
    refused = await call(shared_session, "read_file", path=f"{d}/pic.png", images=False)
    assert refused.error.code == "binary_file"


async def test_directory_listing_or_pointer_to_ls(shared_session: Session) -> None:
    d = fresh_dir()
    await shared_session.write_file(f"{d}/sub/x.txt", "x")
    await shared_session.write_file(f"{d}/b.txt", "b")
    r = await call(shared_session, "read_file", path=d)
    assert r.ok and r.text == "b.txt\nsub/"
    e = await call(shared_session, "read_file", path=d, directory="error")
    assert e.error.code == "is_a_directory" and "Use a file listing tool instead" in e.text


async def test_missing_file_suggests_similar_paths(shared_session: Session) -> None:
    d = fresh_dir()
    for name in ("config.yaml", "config.yml.bak", "unrelated.md"):
        await shared_session.write_file(f"{d}/{name}", "x")
    r = await call(shared_session, "read_file", path=f"{d}/confg.yaml")
    assert r.error.code == "not_found"
    assert r.text.startswith(f"File not found: {d}/confg.yaml\n\nDid you mean one of these?\n{d}/config.yaml")
    assert f"{d}/unrelated.md" not in r.data["suggestions"]


# ---- write_file ----------------------------------------------------------------------------


async def test_write_creates_parents_then_overwrites(shared_session: Session) -> None:
    d = fresh_dir()
    r = await call(shared_session, "write_file", path=f"{d}/deep/er/f.txt", content="héllo")
    assert r.text == f"Successfully created '{d}/deep/er/f.txt' (6 bytes)" and r.data["created"]
    r = await call(shared_session, "write_file", path=f"{d}/deep/er/f.txt", content="bye\n")
    assert r.text == f"Successfully overwrote '{d}/deep/er/f.txt' (4 bytes)" and not r.data["created"]
    assert await shared_session.read_file(f"{d}/deep/er/f.txt") == b"bye\n"
    st = await shared_session.exec(["stat", "-c", "%U", f"{d}/deep/er/f.txt"])
    assert st.stdout.strip() == "agent"


async def test_write_without_parent_creation_fails_clearly(shared_session: Session) -> None:
    d = fresh_dir()
    r = await call(shared_session, "write_file", path=f"{d}/missing/f.txt", content="x", create_directories=False)
    assert (r.error.code, r.text) == ("not_found", f"Parent directory does not exist: {d}/missing")


async def test_write_base64_trailing_newline_and_size_cap(shared_session: Session) -> None:
    d = fresh_dir()
    r = await call(
        shared_session,
        "write_file",
        path=f"{d}/b.bin",
        content=base64.b64encode(b"\x00\xff").decode(),
        encoding="base64",
    )
    assert r.ok and await shared_session.read_file(f"{d}/b.bin") == b"\x00\xff"
    await call(shared_session, "write_file", path=f"{d}/n.txt", content="no newline", ensure_trailing_newline=True)
    assert await shared_session.read_file(f"{d}/n.txt") == b"no newline\n"
    big = await call(shared_session, "write_file", path=f"{d}/big.txt", content="x" * 101, max_bytes=100)
    assert big.error.code == "too_large"
    assert not (await shared_session.stat(f"{d}/big.txt")).exists


async def test_write_with_stale_version_writes_nothing(shared_session: Session) -> None:
    d = fresh_dir()
    await shared_session.write_file(f"{d}/v.txt", "one\n")
    version = (await call(shared_session, "read_file", path=f"{d}/v.txt")).data["version"]
    await shared_session.write_file(f"{d}/v.txt", "changed by someone else\n")
    r = await call(shared_session, "write_file", path=f"{d}/v.txt", content="mine\n", expected_version=version)
    assert r.error.code == "conflict"
    assert await shared_session.read_file(f"{d}/v.txt") == b"changed by someone else\n"
    fresh = (await call(shared_session, "read_file", path=f"{d}/v.txt")).data["version"]
    assert (await call(shared_session, "write_file", path=f"{d}/v.txt", content="mine\n", expected_version=fresh)).ok
    exists = await call(shared_session, "write_file", path=f"{d}/v.txt", content="new\n", expected_version="")
    assert exists.error.code == "conflict" and "already exists" in exists.text


# ---- delete_file ---------------------------------------------------------------------------


async def test_delete_removes_files_only(shared_session: Session) -> None:
    d = fresh_dir()
    await shared_session.write_file(f"{d}/gone.txt", "bye")
    r = await call(shared_session, "delete_file", path=f"{d}/gone.txt")
    assert r.text == f"Successfully deleted '{d}/gone.txt'"
    assert not (await shared_session.stat(f"{d}/gone.txt")).exists
    again = await call(shared_session, "delete_file", path=f"{d}/gone.txt")
    assert (again.error.code, again.text) == ("not_found", f"File does not exist: {d}/gone.txt")
    directory = await call(shared_session, "delete_file", path=d)
    assert directory.error.code == "is_a_directory" and (await shared_session.stat(d)).exists


def test_permission_levels() -> None:
    assert [REGISTRY[n].level.value for n in ("read_file", "write_file", "delete_file")] == [
        "safe",
        "cautious",
        "dangerous",
    ]


async def test_small_file_calls_make_one_round_trip(shared_session: Session, monkeypatch: pytest.MonkeyPatch) -> None:
    # read_file: the policy's stat of the path reads a small file's content too, and nothing
    # more is needed. write_file: the policy decides on the path as given, and the write both
    # checks it is the real one and returns the content it replaced, for undo.
    channel = shared_session._dispatcher.client.channel
    ops: list[str] = []
    real = channel.call

    async def counting(op: str, *args: object, **kwargs: object) -> object:
        ops.append(op)
        return await real(op, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(channel, "call", counting)
    directory = fresh_dir()
    path = f"{directory}/small.txt"
    # A parent directory still to be made: the plain write refuses, the dispatcher looks first.
    r = await shared_session.call("write_file", {"path": f"{directory}/new/first.txt", "content": "x"})
    assert r.ok and ops == ["write", "stat", "write"], (r.text, ops)
    for content, created in (("one\n", True), ("two\n", False)):
        ops.clear()
        r = await shared_session.call("write_file", {"path": path, "content": content})
        assert r.ok and r.data["created"] is created and ops == ["write"], (r.text, ops)
    ops.clear()
    r = await shared_session.call("read_file", {"path": path})
    assert r.ok and "00001| two" in r.text and ops == ["stat"], ops
    r = await shared_session.call("undo_edit", {"path": path})
    assert r.ok, r.text
    assert await shared_session.read_file(path) == b"one\n"
    r = await shared_session.call("undo_edit", {"path": path})
    assert r.ok, r.text
    assert not (await shared_session.stat(path)).exists  # the first write created it
