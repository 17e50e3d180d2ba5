"""Background tasks: incremental output by offset, stdin, kill, background timeout."""

from __future__ import annotations

import anyio
import pytest

from caisson import Session

pytestmark = pytest.mark.anyio


async def test_incremental_output_nothing_lost_or_duplicated(session: Session) -> None:
    task = await session.spawn("for i in $(seq 1 200); do echo line-$i; sleep 0.005; done")
    collected, offset = "", 0
    with anyio.fail_after(20):
        while True:
            out = await session.task_read(task.task_id, stdout_offset=offset, max_bytes=97, wait=1.0)
            collected += out.stdout
            offset = out.stdout_offset
            if not out.running and not out.stdout:
                break
    assert collected == "".join(f"line-{i}\n" for i in range(1, 201))
    assert out.exit_code == 0
    # A reader that comes back later (a reconnecting client) can read it all again.
    again = await session.task_read(task.task_id, stdout_offset=0)
    assert again.stdout == collected


async def test_stdin_and_kill(session: Session) -> None:
    task = await session.spawn(["cat"])
    await session.task_write(task.task_id, "ping\n")
    out = await session.task_read(task.task_id, wait=5)
    assert out.stdout == "ping\n" and out.running
    await session.task_signal(task.task_id, "KILL")
    done = await session.task_wait(task.task_id, timeout=10)
    assert not done.running and done.signal == 9
    tasks = {t.task_id: t for t in await session.task_list()}
    assert not tasks[task.task_id].running


async def test_stdin_close_ends_reader(session: Session) -> None:
    task = await session.spawn(["wc", "-l"])
    await session.task_write(task.task_id, "a\nb\nc\n", close=True)
    done = await session.task_wait(task.task_id, timeout=10)
    assert done.exit_code == 0
    out = await session.task_read(task.task_id)
    assert out.stdout.strip() == "3"


async def test_background_timeout_kills_task(session: Session) -> None:
    task = await session.spawn("echo begun; sleep 60", timeout=1)
    done = await session.task_wait(task.task_id, timeout=15)
    assert done.timed_out and not done.running
    out = await session.task_read(task.task_id)
    assert out.stdout == "begun\n"
