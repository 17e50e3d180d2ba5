"""Many calls on one session; many sessions side by side, isolated."""

from __future__ import annotations

import anyio
import pytest

from caisson import Runtime, Session

pytestmark = pytest.mark.anyio


async def test_50_concurrent_calls_on_one_session(shared_session: Session) -> None:
    results: dict[int, str] = {}

    async def one(i: int) -> None:
        if i % 2:
            r = await shared_session.exec(f"sleep 0.2; echo {i}", timeout=20)
            results[i] = r.stdout.strip()
        else:
            await shared_session.write_file(f"/workspace/conc/{i}.txt", str(i))
            results[i] = (await shared_session.read_file(f"/workspace/conc/{i}.txt")).decode()

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            for i in range(50):
                tg.start_soon(one, i)
    assert results == {i: str(i) for i in range(50)}


async def test_ten_sessions_in_parallel_are_isolated(rt: Runtime) -> None:
    seen: dict[int, list[str]] = {}

    async def one(i: int) -> None:
        async with rt.session() as s:
            await s.write_file(f"/workspace/only-{i}.txt", str(i))
            await anyio.sleep(0.5)  # let the others write theirs
            r = await s.exec("ls /workspace", timeout=10)
            seen[i] = r.stdout.split()

    async with anyio.create_task_group() as tg:
        for i in range(10):
            tg.start_soon(one, i)
    assert seen == {i: [f"only-{i}.txt"] for i in range(10)}
