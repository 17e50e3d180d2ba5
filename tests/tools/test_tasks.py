"""Background tasks end to end: incremental reads, offsets, stdin, kill, background
timeout, many tasks at once, listing, and a controller reconnect."""

from __future__ import annotations

import time
from typing import Any

import anyio
import pytest
from toolcall import call

from caisson import Runtime, RuntimeConfig, Session
from caisson.tools.base import ToolResult

pytestmark = pytest.mark.anyio


async def start(session: Session, command: str, **args: Any) -> str:
    r = await call(session, "bash", command=command, run_in_background=True, **args)
    assert r.ok, r.text
    return str(r.data["task_id"])


async def read_all(session: Session, task_id: str, deadline: float = 30) -> tuple[str, list[ToolResult]]:
    """Read with long polls until the task has exited and nothing new comes."""
    reads = []
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        r = await call(session, "task_output", task_id=task_id, wait=2)
        assert r.ok, r.text
        reads.append(r)
        if not r.data["running"] and not r.data["stdout"] and not r.data["stderr"]:
            break
    return "".join(r.data["stdout"] for r in reads), reads


async def test_incremental_reads_lose_and_repeat_nothing(shared_session: Session) -> None:
    task = await start(shared_session, "for i in $(seq 1 6); do echo line$i; echo err$i >&2; sleep 0.3; done")
    stdout, reads = await read_all(shared_session, task)
    assert stdout == "".join(f"line{i}\n" for i in range(1, 7))
    assert "".join(r.data["stderr"] for r in reads) == "".join(f"err{i}\n" for i in range(1, 7))
    assert sum(1 for r in reads if r.data["stdout"]) > 1  # it really came in pieces
    last = reads[-1]
    assert last.data["status"] == "exited" and last.data["exit_code"] == 0
    assert "exited with code 0" in last.text and "(no new output)" in last.text


async def test_explicit_offsets_reread_without_moving_the_cursor(shared_session: Session) -> None:
    task = await start(shared_session, "printf 'abcdefghij'")
    await read_all(shared_session, task)
    r = await call(shared_session, "task_output", task_id=task, stdout_offset=3, stderr_offset=0)
    assert r.data["stdout"] == "defghij" and r.data["stdout_offset"] == 10
    r = await call(shared_session, "task_output", task_id=task, stdout_offset=0, max_bytes=4)
    assert r.data["stdout"] == "abcd" and r.data["more"]
    r = await call(shared_session, "task_output", task_id=task)
    assert r.data["stdout"] == ""
    bad = await call(shared_session, "task_output", task_id=task, stdout_offset=999)
    assert not bad.ok and bad.error and bad.error.code == "invalid_offset"


async def test_stdin_write_and_close(shared_session: Session) -> None:
    task = await start(shared_session, 'read -r first; echo "got:$first"; cat; echo "eof"')
    r = await call(shared_session, "task_input", task_id=task, input="hello\n")
    assert r.ok and r.data["written"] == 6
    r = await call(shared_session, "task_input", task_id=task, input="more\n", close=True)
    assert r.ok and "stdin closed" in r.text
    stdout, _ = await read_all(shared_session, task)
    assert stdout == "got:hello\nmore\neof\n"
    again = await call(shared_session, "task_input", task_id=task, input="late")
    assert not again.ok and again.error and again.error.code in ("stdin_closed", "no_such_task")


async def test_kill_stops_the_whole_tree(shared_session: Session) -> None:
    task = await start(shared_session, "sleep 311 & sleep 312 & echo up; wait")
    r = await call(shared_session, "task_output", task_id=task, wait=5)
    assert "up" in r.data["stdout"]
    r = await call(shared_session, "task_kill", task_id=task)
    assert r.ok and r.data["status"] == "exited"
    assert r.data["signal"] == 9
    left = await call(shared_session, "bash", command="ps -eo args | grep -c '^sleep 31[12]' || true")
    assert left.data["stdout"].strip() == "0"


async def test_background_timeout_kills_the_task(shared_session: Session) -> None:
    task = await start(shared_session, "echo begin; sleep 60", background_timeout=1)
    started = time.monotonic()
    stdout, reads = await read_all(shared_session, task)
    assert time.monotonic() - started < 15
    assert stdout == "begin\n"
    assert reads[-1].data["timed_out"]
    assert "background timeout" in reads[-1].text


async def test_many_tasks_at_once(shared_session: Session) -> None:
    ids: dict[int, str] = {}

    async def one(i: int) -> None:
        ids[i] = await start(shared_session, f"sleep 0.$((RANDOM % 5)); echo task-{i}")

    async with anyio.create_task_group() as tg:
        for i in range(20):
            tg.start_soon(one, i)
    assert len(set(ids.values())) == 20
    outputs: dict[int, str] = {}

    async def collect(i: int) -> None:
        outputs[i] = (await read_all(shared_session, ids[i]))[0]

    async with anyio.create_task_group() as tg:
        for i in ids:
            tg.start_soon(collect, i)
    assert outputs == {i: f"task-{i}\n" for i in range(20)}
    listed = await call(shared_session, "task_list")
    rows = {row["task_id"]: row for row in listed.data["tasks"]}
    for i, task_id in ids.items():
        assert rows[task_id]["status"] == "exited" and rows[task_id]["exit_code"] == 0
        assert rows[task_id]["command"].endswith(f"echo task-{i}")
    assert ids[0] in listed.text


async def test_unknown_task_is_a_clear_error(shared_session: Session) -> None:
    for name, extra in (("task_output", {}), ("task_input", {"input": "x"}), ("task_kill", {})):
        r = await call(shared_session, name, task_id="t-nope", **extra)
        assert not r.ok and r.error and r.error.code == "no_such_task"
        assert "task_list" in r.text


async def test_task_list_when_empty(session: Session) -> None:
    r = await call(session, "task_list")
    assert r.ok and r.text == "No background tasks." and r.data["tasks"] == []


async def test_output_and_shell_state_survive_a_controller_reconnect(rt: Runtime, tmp_path: object) -> None:
    first = Runtime(RuntimeConfig(state_dir=str(tmp_path), gc_on_start=False))
    await first.__aenter__()
    s = await first.open_session()
    task = await start(s, "echo one; echo two; sleep 60")
    await call(s, "task_output", task_id=task, wait=2)
    await call(s, "bash", command="mkdir -p /workspace/proj && cd /workspace/proj && export KEPT=yes")
    # The controller goes away without closing the session (a restart).
    await s.channel.aclose()
    first._sessions.clear()
    await first.__aexit__(None, None, None)

    again = await rt.reattach(s.id)
    try:
        r = await call(again, "task_output", task_id=task, wait=1)
        assert r.data["stdout"] == "one\ntwo\n" and r.data["running"]
        r = await call(again, "bash", command='pwd; echo "$KEPT"')
        assert r.data["stdout"] == "/workspace/proj\nyes\n"
        assert again.cwd == "/workspace/proj"
        await call(again, "task_kill", task_id=task)
    finally:
        await again.close()
