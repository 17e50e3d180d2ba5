"""Every member of ``SessionLike``, run against a local ``Session`` and against a ``RemoteSession``
talking to a real ``caisson serve``: each test asserts what a user sees, so both kinds must give
the same answers. Docker is required (a missing engine fails these tests)."""

from __future__ import annotations

import contextlib
import hashlib
import io
import tarfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from caisson import RemoteRuntime, Runtime, SessionLike
from caisson.errors import OpError
from tests.server.conftest import docker_engine, sandbox_image, sqlite_api  # noqa: F401 (fixtures)
from tests.server.harness import Api, tar_of

pytestmark = pytest.mark.anyio

W = "/workspace"


@dataclass
class Opened:
    kind: str
    rt: Any  # Runtime or RemoteRuntime: both open ``session(from_snapshot=...)``
    s: SessionLike


@pytest.fixture(params=["local", "remote"])
async def opened(request: pytest.FixtureRequest, rt: Runtime, sqlite_api: Api) -> AsyncIterator[Opened]:  # noqa: F811
    if request.param == "local":
        async with rt.session() as s:
            yield Opened("local", rt, s)
    else:
        key = sqlite_api.tenant("conformance")
        async with RemoteRuntime(sqlite_api.url, key.token) as remote, remote.session() as rs:
            yield Opened("remote", remote, rs)


async def test_commands_exec_and_stream(opened: Opened) -> None:
    s = opened.s
    info = await s.ping()
    assert info.protocol >= 1 and info.version
    ran = await s.exec('cat; echo "$X"; pwd; echo err >&2; exit 3', cwd=f"{W}/..", env={"X": "from env"}, stdin="in\n")
    assert (ran.stdout, ran.stderr, ran.exit_code) == ("in\nfrom env\n/\n", "err\n", 3)
    argv = await s.exec(["printf", "%s-%s", "a;b", "$HOME"])
    assert (argv.stdout, argv.exit_code) == ("a;b-$HOME", 0)
    slow = await s.exec("sleep 20", timeout=1)
    assert slow.timed_out and slow.exit_code is None
    events = []
    async with contextlib.aclosing(s.exec_stream("for i in 1 2 3; do echo $i; sleep 0.1; done; echo e >&2")) as stream:
        async for ev in stream:
            events.append(ev)
    assert "".join(e.data for e in events if e.kind == "stdout") == "1\n2\n3\n"
    assert "".join(e.data for e in events if e.kind == "stderr") == "e\n"
    assert (events[-1].kind, events[-1].exit_code) == ("exit", 0)


async def test_files(opened: Opened) -> None:
    s = opened.s
    data = bytes(range(256)) * 100
    written = await s.write_file(f"{W}/t/data.bin", data, mode=0o640)
    assert (written.created, written.size, written.sha256) == (True, len(data), hashlib.sha256(data).hexdigest())
    st = await s.stat(f"{W}/t/data.bin")
    assert (st.exists, st.type, st.size, st.mode & 0o777) == (True, "file", len(data), 0o640)
    assert not (await s.stat(f"{W}/t/missing")).exists
    assert await s.read_file(f"{W}/t/data.bin") == data
    assert await s.read_file(f"{W}/t/data.bin", 10, 5) == data[10:15]
    ranged = await s.read_range(f"{W}/t/data.bin", 25_000, 1000, hash=True)
    assert (ranged.data, ranged.size, ranged.eof) == (data[25_000:25_600], len(data), True)
    assert ranged.sha256 == hashlib.sha256(data).hexdigest()
    with pytest.raises(OpError) as missing:
        await s.read_file(f"{W}/t/missing.txt")
    assert missing.value.code == "not_found"

    # Compare-and-swap: a stale hash and "must not exist" both refuse; the right hash writes.
    with pytest.raises(OpError) as stale:
        await s.write_file(f"{W}/t/data.bin", "new", expected_sha256="0" * 64)
    assert stale.value.code == "conflict"
    with pytest.raises(OpError):
        await s.write_file(f"{W}/t/data.bin", "new", expected_sha256="")
    swapped = await s.write_file(f"{W}/t/data.bin", "new", expected_sha256=written.sha256)
    assert not swapped.created and await s.read_file(f"{W}/t/data.bin") == b"new"

    assert await s.mkdir(f"{W}/t/sub/deeper") is True
    assert await s.mkdir(f"{W}/t/sub/deeper") is False
    await s.write_file(f"{W}/t/sub/a.txt", "a")
    await s.write_file(f"{W}/t/.hidden", "h")
    listed = await s.list_dir(f"{W}/t")
    assert sorted((e.name, e.type) for e in listed) == [(".hidden", "file"), ("data.bin", "file"), ("sub", "dir")]
    walked = await s.walk(f"{W}/t")
    assert sorted(e.path for e in walked.entries) == ["data.bin", "sub", "sub/a.txt", "sub/deeper"]
    hidden = await s.walk(f"{W}/t", include_hidden=True, ignore_files=())
    assert ".hidden" in {e.path for e in hidden.entries}
    await s.rename(f"{W}/t/sub/a.txt", f"{W}/t/b.txt")
    assert await s.read_file(f"{W}/t/b.txt") == b"a" and not (await s.stat(f"{W}/t/sub/a.txt")).exists
    assert await s.remove(f"{W}/t/sub", recursive=True) is True
    assert await s.remove(f"{W}/t/sub", missing_ok=True) is False
    with pytest.raises(OpError) as gone:
        await s.remove(f"{W}/t/sub")
    assert gone.value.code == "not_found"


async def test_searches(opened: Opened) -> None:
    s = opened.s
    await s.write_file(f"{W}/q/a.py", "def alpha():\n    return 1\n")
    await s.write_file(f"{W}/q/sub/b.py", "alpha = 2\nbeta = 3\n")
    await s.write_file(f"{W}/q/notes.md", "nothing here\n")
    hits = await s.grep(f"{W}/q", "alpha", before=0)
    assert sorted((f.path, [m.line for m in f.matches]) for f in hits.files) == [("a.py", [1]), ("sub/b.py", [1])]
    counted = await s.grep(f"{W}/q", "a", mode="count", globs=["*.py"])
    assert dict(zip(counted.paths, counted.counts, strict=True)) == {"a.py": 1, "sub/b.py": 2}  # lines
    named = await s.grep(f"{W}/q", "BETA", mode="files", ignore_case=True)
    assert named.paths == ["sub/b.py"] and not named.truncated
    found = await s.find(f"{W}/q", r".*\.py", sort="path")
    assert (found.total, [p for p, _ in found.files]) == (2, ["a.py", "sub/b.py"])
    paged = await s.find(f"{W}/q", ".*", sort="path", offset=1, limit=1)
    assert (paged.total, [p for p, _ in paged.files]) == (3, ["notes.md"])


async def test_tasks(opened: Opened) -> None:
    s = opened.s
    cat = await s.spawn("cat", name="echoer", stdin="first ")
    assert await s.task_write(cat.task_id, "second") == len("second")
    await s.task_write(cat.task_id, "", close=True)
    ended = await s.task_wait(cat.task_id, timeout=30)
    assert (ended.running, ended.exit_code) == (False, 0)
    out = await s.task_read(cat.task_id)
    assert (out.stdout, out.stdout_offset) == ("first second", len("first second"))
    assert (await s.task_read(cat.task_id, stdout_offset=6, max_bytes=3)).stdout == "sec"

    sleeper = await s.spawn("sleep 60", name="sleeper")
    still = await s.task_wait(sleeper.task_id, timeout=0.5)
    assert still.running
    listed = {t.name: t for t in await s.task_list()}
    assert listed["echoer"].running is False and listed["sleeper"].running is True
    await s.task_signal(sleeper.task_id, "TERM")
    stopped = await s.task_wait(sleeper.task_id, timeout=30)
    assert (stopped.running, stopped.signal) == (False, 15)
    with pytest.raises(OpError) as unknown:
        await s.task_read("t-nosuchtask")
    assert unknown.value.code == "no_such_task"


async def test_tool_calls(opened: Opened) -> None:
    s = opened.s
    names = {t["function"]["name"] for t in s.tools("openai")}
    assert {"bash", "read_file", "write_file", "edit_file"} <= names
    assert {t["name"] for t in s.tools("anthropic")} == names
    wrote = await s.call("write_file", {"path": f"{W}/tool.txt", "content": "one\n"})
    assert wrote.ok, wrote.text
    assert await s.read_file(f"{W}/tool.txt") == b"one\n"
    ran = await s.call("bash", {"command": "cat tool.txt"})
    assert (ran.ok, ran.decision, ran.level) == (True, "allow", "safe") and "one" in ran.text
    refused = await s.call("bash", {"command": "rm -rf /"})
    assert not refused.ok and refused.decision == "denied"
    unknown = await s.call("no_such_tool", {})
    assert unknown.error is not None and unknown.error.code == "unknown_tool"


def _untar(data: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return {m.name.removeprefix("./"): tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]


async def test_copies_and_diff(opened: Opened, tmp_path: Path) -> None:
    s = opened.s
    src = tmp_path / "src"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "mod.py").write_text("x = 1\n")
    (src / "README").write_text("hello\n")
    await s.copy_in(src, f"{W}/repo")
    await s.copy_in(tar_of({"extra.txt": b"tar bytes\n"}), f"{W}/repo")
    assert await s.read_file(f"{W}/repo/pkg/mod.py") == b"x = 1\n"
    await s.write_file(f"{W}/repo/pkg/mod.py", "x = 2\n")

    archived = _untar(b"".join([chunk async for chunk in s.copy_out(f"{W}/repo")]))
    assert {k.split("repo/", 1)[-1]: v for k, v in archived.items()} == {
        "README": b"hello\n", "extra.txt": b"tar bytes\n", "pkg/mod.py": b"x = 2\n",
    }
    dest = tmp_path / "out"
    dest.mkdir()
    assert await s.copy_out_to(f"{W}/repo", dest) == []
    assert (dest / "pkg" / "mod.py").read_text() == "x = 2\n" and (dest / "README").read_text() == "hello\n"

    changes = await s.diff(f"{W}/repo")
    assert changes.root == f"{W}/repo"
    assert sorted((c.path, c.change) for c in changes.changes) == [
        ("README", "added"), ("extra.txt", "added"), ("pkg/mod.py", "added"),
    ]
    assert "+x = 2" in changes.patch() and "b/pkg/mod.py" in changes.patch()
    assert "repo/README" in {c.path for c in (await s.diff()).changes}  # the workdir's, by default




async def test_snapshot_fork_and_close(opened: Opened) -> None:
    s = opened.s
    await s.write_file(f"{W}/state.txt", "before\n")
    ref = await s.snapshot()
    await s.write_file(f"{W}/state.txt", "after\n")
    async with opened.rt.session(from_snapshot=ref) as restored:
        assert await restored.read_file(f"{W}/state.txt") == b"before\n"
    forks = await s.fork(2)
    try:
        assert len(forks) == 2 and len({f.id for f in forks} | {s.id}) == 3
        for i, f in enumerate(forks):
            assert await f.read_file(f"{W}/state.txt") == b"after\n"
            await f.write_file(f"{W}/state.txt", f"fork {i}\n")
        assert [await f.read_file(f"{W}/state.txt") for f in forks] == [b"fork 0\n", b"fork 1\n"]
        assert await s.read_file(f"{W}/state.txt") == b"after\n"
    finally:
        for f in forks:
            await f.close()
    assert all(f.closed for f in forks)
    assert not s.closed
    await s.close()
    await s.close()  # twice: no error
    assert s.closed
