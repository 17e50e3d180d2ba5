"""Round trips through a real container: exec, files, compare-and-swap."""

from __future__ import annotations

import hashlib
import os

import pytest

from caisson import OpError, Session

pytestmark = pytest.mark.anyio


async def test_exec_exit_code_and_streams(shared_session: Session) -> None:
    r = await shared_session.exec("echo out; echo err >&2; exit 3", timeout=10)
    assert (r.stdout, r.stderr, r.exit_code, r.timed_out) == ("out\n", "err\n", 3, False)


async def test_exec_argv_env_cwd_stdin(shared_session: Session) -> None:
    r = await shared_session.exec(
        ["bash", "-c", 'echo "$GREETING from $(pwd)"; cat'],
        env={"GREETING": "hello"},
        cwd="/tmp",
        stdin="piped input\n",
        timeout=10,
    )
    assert r.exit_code == 0
    assert r.stdout == "hello from /tmp\npiped input\n"


async def test_exec_reports_missing_program(shared_session: Session) -> None:
    r = await shared_session.exec("definitely-not-a-program", timeout=10)
    assert r.exit_code == 127
    assert "not found" in r.stderr


async def test_exec_output_cap_keeps_total(shared_session: Session) -> None:
    r = await shared_session.exec("head -c 300000 /dev/zero | tr '\\0' x", stdout_max=1000, timeout=10)
    assert len(r.stdout) == 1000 and r.stdout_truncated and r.stdout_total == 300000


async def test_binary_round_trip(shared_session: Session) -> None:
    await shared_session.write_file("/workspace/a.bin", b"\x00\x01" * 10)
    assert await shared_session.read_file("/workspace/a.bin") == b"\x00\x01" * 10
    assert await shared_session.read_file("/workspace/a.bin", offset=3, length=4) == b"\x01\x00\x01\x00"


async def test_50mb_file_round_trip(shared_session: Session) -> None:
    data = os.urandom(1024 * 1024) * 50
    w = await shared_session.write_file("/workspace/big.bin", data)
    assert w.size == len(data) and w.sha256 == hashlib.sha256(data).hexdigest()
    back = await shared_session.read_file("/workspace/big.bin")
    assert back == data
    r = await shared_session.exec(["sha256sum", "/workspace/big.bin"], timeout=30)
    assert r.stdout.split()[0] == hashlib.sha256(data).hexdigest()


async def test_new_files_belong_to_the_agent(shared_session: Session) -> None:
    await shared_session.write_file("/workspace/owned/x.txt", "x")
    r = await shared_session.exec("stat -c %U /workspace/owned/x.txt /workspace/owned; echo more >> /workspace/owned/x.txt")
    assert r.stdout.split() == ["agent", "agent"] and r.exit_code == 0


async def test_compare_and_swap_rejects_stale_hash(shared_session: Session) -> None:
    first = await shared_session.write_file("/workspace/cas.txt", "one")
    await shared_session.write_file("/workspace/cas.txt", "two", expected_sha256=first.sha256)
    with pytest.raises(OpError) as err:
        await shared_session.write_file("/workspace/cas.txt", "three", expected_sha256=first.sha256)
    assert err.value.code == "conflict"
    assert await shared_session.read_file("/workspace/cas.txt") == b"two"
    with pytest.raises(OpError):
        await shared_session.write_file("/workspace/cas.txt", "new", expected_sha256="")


async def test_failed_write_leaves_no_partial_file(shared_session: Session) -> None:
    await shared_session.mkdir("/workspace/atomic")
    original = await shared_session.write_file("/workspace/atomic/f.txt", "original")
    big = b"y" * (20 * 1024 * 1024)  # several chunks: the last one is refused by the hash check
    with pytest.raises(OpError):
        await shared_session.write_file("/workspace/atomic/f.txt", big, expected_sha256="0" * 64)
    assert await shared_session.read_file("/workspace/atomic/f.txt") == b"original"
    names = [e.name for e in await shared_session.list_dir("/workspace/atomic")]
    assert names == ["f.txt"], names
    assert original.created


async def test_write_keeps_mode_of_existing_file(shared_session: Session) -> None:
    await shared_session.write_file("/workspace/run.sh", "#!/bin/sh\necho a\n", mode=0o755)
    await shared_session.write_file("/workspace/run.sh", "#!/bin/sh\necho b\n")
    r = await shared_session.exec("/workspace/run.sh")
    assert r.stdout == "b\n"


async def test_fs_primitives(shared_session: Session) -> None:
    await shared_session.mkdir("/workspace/d/e/f")
    await shared_session.write_file("/workspace/d/e/f/g.txt", "g")
    st = await shared_session.stat("/workspace/d/e/f/g.txt")
    assert st.exists and st.type == "file" and st.size == 1
    await shared_session.rename("/workspace/d/e/f/g.txt", "/workspace/d/h.txt")
    assert not (await shared_session.stat("/workspace/d/e/f/g.txt")).exists
    walk = await shared_session.walk("/workspace/d")
    assert {e.path for e in walk.entries} >= {"e", "e/f", "h.txt"}
    with pytest.raises(OpError) as err:
        await shared_session.remove("/workspace/d")
    assert err.value.code in ("is_a_directory", "io_error", "not_empty")
    assert await shared_session.remove("/workspace/d", recursive=True)
    with pytest.raises(OpError) as err:
        await shared_session.read_file("/workspace/d/h.txt")
    assert err.value.code == "not_found"
