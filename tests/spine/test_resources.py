"""Memory pressure kills agent work, not the daemon; when the daemon does die of it, the
error says so. Default CPU share."""

from __future__ import annotations

import os

import anyio
import pytest

from caisson import DaemonDied, Runtime
from caisson.config import Limits

pytestmark = pytest.mark.anyio


async def test_noisy_tasks_and_a_memory_hog_do_not_kill_the_daemon(rt: Runtime) -> None:
    async with rt.session(limits=Limits(memory="512m", pids=1024)) as s:
        before = await s.ping()
        for i in range(150):
            await s.spawn(f"yes noisy-task-{i}", user=s.config.agent_user)
        hog = await s.spawn(
            ["python3", "-c", "b = []\nwhile True: b.append(bytearray(64 * 1024 * 1024))"], user=s.config.agent_user
        )
        status = await s.task_wait(hog.task_id, timeout=60)
        await anyio.sleep(2)
        after = await s.ping()
        alive = await s.exec(["echo", "alive"], timeout=30)
        tasks = await s.task_list()
        killed = sum(1 for t in tasks if t.signal == 9 or t.exit_code == -9)
        running = sum(1 for t in tasks if t.running)
        print(f"150 noisy tasks and a memory hog in 512 MB: the hog ended with signal {status.signal}, "
              f"{killed} agent processes killed, {running} still running, daemon pid {before.pid} -> {after.pid}")
        assert after.pid == before.pid and alive.stdout == "alive\n"
        assert status.signal == 9
        for t in tasks:
            if t.running:
                await s.task_signal(t.task_id, "KILL")


async def test_a_daemon_killed_by_the_oom_killer_says_so(rt: Runtime) -> None:
    async with rt.session(limits=Limits(memory="256m")) as s:
        # Every process the daemon starts is the OOM killer's first choice; to see the daemon
        # itself die, make it as likely a victim and the largest: ten replies of 30 MB at once.
        daemon = (await s.ping()).pid
        await s.exec(f"echo 1000 > /proc/{daemon}/oom_score_adj", user="root")
        errors: list[DaemonDied] = []

        async def big_reply() -> None:
            try:
                await s.exec(["head", "-c", "30M", "/dev/zero"], stdout_max=30 << 20, timeout=60)
            except DaemonDied as exc:
                errors.append(exc)

        async with anyio.create_task_group() as tg:
            for _ in range(10):
                tg.start_soon(big_reply)
        print(f"daemon OOM-killed: {errors[0] if errors else 'no error'}")
        assert errors and all("ran out of memory" in str(e) for e in errors)


def test_default_cpu_share_leaves_the_host_responsive() -> None:
    assert Limits().cpus == max(1.0, (os.cpu_count() or 2) / 2)
