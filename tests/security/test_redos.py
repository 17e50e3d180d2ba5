"""A regex that backtracks catastrophically (Aar's grep takes Python regexes) must not stall
the daemon: the search runs in a process of its own, and the session keeps answering."""

from __future__ import annotations

import time

import anyio
import pytest

from caisson import Runtime

pytestmark = pytest.mark.anyio


async def test_catastrophic_regex_does_not_stall_the_session(rt: Runtime) -> None:
    async with rt.session(profile="aar") as s:
        await s.write_file("/workspace/evil.txt", ("a" * 40 + "!\n") * 50)
        await s.write_file("/workspace/fine.txt", "needle\n")
        # An ordinary regex still answers from the daemon itself.
        ok = await s.call("grep", {"regex": "need(le)?"})
        assert ok.ok and "fine.txt:1:needle" in ok.text

        latencies: list[float] = []
        async with anyio.create_task_group() as tg:
            tg.start_soon(s.call, "grep", {"regex": "(a+)+$"})
            await anyio.sleep(1.0)  # the search is under way, burning CPU
            for _ in range(5):
                started = time.perf_counter()
                r = await s.exec(["echo", "alive"], timeout=10)
                latencies.append(time.perf_counter() - started)
                assert r.stdout == "alive\n"
            running = await s.exec("pgrep -fc sandbox.search_child", user="root")
            await s.exec("pkill -f sandbox.search_child", user="root")
            tg.cancel_scope.cancel()
        print(f"while a catastrophic search ran ({running.stdout.strip()} search process), "
              f"the slowest of 5 other calls took {max(latencies) * 1000:.0f} ms")
        assert running.stdout.strip() == "1"
        # Tens of ms on a quiet machine; a daemon stalled by the search would not answer before
        # the calls' 10 s timeout (the margin is for a loaded machine).
        assert max(latencies) < 8.0
