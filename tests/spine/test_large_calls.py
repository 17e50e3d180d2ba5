"""Stdin and output larger than a frame move in chunks; limits fail the call, never the
session; every refusal has its own code."""

from __future__ import annotations

import hashlib

import pytest

from caisson import Session
from caisson.errors import OpError

pytestmark = pytest.mark.anyio

MiB = 1024 * 1024


async def test_70_mib_of_stdin_reaches_the_command(session: Session) -> None:
    payload = bytes(range(256)) * (70 * MiB // 256)
    res = await session.exec(["wc", "-c"], stdin=payload, timeout=120)
    assert res.exit_code == 0 and int(res.stdout) == len(payload), res.stderr
    res = await session.exec(["sha256sum"], stdin=payload, timeout=120)
    assert res.stdout.split()[0] == hashlib.sha256(payload).hexdigest()
    assert (await session.exec("echo still here")).stdout == "still here\n"


async def test_output_larger_than_a_frame_arrives_whole_when_asked_for(session: Session) -> None:
    size = 40 * MiB  # beyond the 32 MiB reply frame
    res = await session.exec(
        ["sh", "-c", f"head -c {size} /dev/zero | tr '\\0' x; echo err >&2"], stdout_max=64 * MiB, timeout=120
    )
    assert res.exit_code == 0
    assert len(res.stdout) == size and set(res.stdout) == {"x"}
    assert res.stderr == "err\n" and not res.stdout_truncated
    assert (await session.exec("echo still here")).stdout == "still here\n"


async def test_output_over_the_callers_limit_is_cut_and_flagged(session: Session) -> None:
    res = await session.exec(["sh", "-c", "head -c 3000000 /dev/zero"], stdout_max=1000, timeout=60)
    assert len(res.stdout) == 1000 and res.stdout_truncated and res.stdout_total == 3_000_000
    chunked = await session.exec(
        ["sh", "-c", "head -c 3000000 /dev/zero; echo e >&2"], stdout_max=40 * MiB, stderr_max=1, timeout=60
    )
    assert len(chunked.stdout) == 3_000_000 and not chunked.stdout_truncated
    assert chunked.stderr == "e" and chunked.stderr_truncated and chunked.stderr_total == 2


async def test_chunked_exec_keeps_timeouts_and_leaves_no_task(session: Session) -> None:
    res = await session.exec(["sleep", "30"], stdin=b"x" * (9 * MiB), timeout=1)
    assert res.timed_out and res.exit_code is None
    assert await session.task_list() == []


async def test_read_size_limit_fails_the_call_only(session: Session) -> None:
    await session.write_file("/workspace/big.bin", b"a" * 5000)
    with pytest.raises(OpError) as caught:
        await session.read_file("/workspace/big.bin", max_size=4096)
    assert caught.value.code == "output_limit" and "4096" in caught.value.message
    assert await session.read_file("/workspace/big.bin", max_size=5000) == b"a" * 5000


@pytest.mark.parametrize(
    ("call", "code"),
    [
        ({"command": ["true"], "cwd": "/no/such/dir"}, "cwd_not_found"),
        ({"command": ["true"], "cwd": "/etc/passwd"}, "cwd_not_found"),
        ({"command": ["no-such-program"]}, "command_not_found"),
        ({"command": ["/etc/passwd"]}, "not_executable"),
        ({"command": ["true"], "user": "nobody-here"}, "no_such_user"),
    ],
)
async def test_each_failure_to_start_has_its_own_code(session: Session, call: dict[str, object], code: str) -> None:
    with pytest.raises(OpError) as caught:
        await session.exec(**call)  # type: ignore[arg-type]
    assert caught.value.code == code, caught.value.message


async def test_a_relative_cwd_resolves_against_the_working_directory_like_file_paths(session: Session) -> None:
    await session.write_file("sub/dir/f.txt", "x")
    assert (await session.exec(["ls"], cwd="sub/dir")).stdout == "f.txt\n"
    task = await session.spawn(["pwd"], cwd="sub")
    assert (await session.task_wait(task.task_id)).exit_code == 0
    assert (await session.task_read(task.task_id)).stdout == "/workspace/sub\n"
