"""exec_stream: a long command's output as it comes, with byte offsets, then its exit;
leaving early kills the command."""

from __future__ import annotations

import contextlib
import time

import anyio
import pytest

from caisson import Runtime

pytestmark = pytest.mark.anyio


async def test_output_arrives_while_the_command_runs(rt: Runtime) -> None:
    async with rt.session() as s:
        started = time.monotonic()
        seen: list[tuple[str, str, int, float]] = []
        exit_event = None
        exit_at = 0.0
        async for event in s.exec_stream("for i in 1 2 3; do echo out$i; echo err$i >&2; sleep 0.5; done; exit 4"):
            if event.kind == "exit":
                exit_event, exit_at = event, time.monotonic() - started
            else:
                seen.append((event.kind, event.data, event.offset, time.monotonic() - started))
        stdout = "".join(d for k, d, _, _ in seen if k == "stdout")
        assert stdout == "out1\nout2\nout3\n" and "".join(d for k, d, _, _ in seen if k == "stderr") == "err1\nerr2\nerr3\n"
        # Offsets are byte positions: each piece starts where the last ended.
        offsets = [o for k, _, o, _ in seen if k == "stdout"]
        assert offsets[0] == 0 and offsets == sorted(offsets)
        # The first line came long before the end: the command still slept 1.5 s after it (a
        # margin under that, as a loaded machine may deliver the first line late); output held back
        # until the end would arrive with the exit.
        assert exit_event is not None and exit_event.exit_code == 4
        assert exit_at - seen[0][3] > 0.75, (seen, exit_at)


async def test_leaving_the_stream_kills_the_command(rt: Runtime) -> None:
    async with rt.session() as s:
        async with contextlib.aclosing(s.exec_stream("echo first; sleep 30; touch /workspace/late")) as events:
            async for event in events:
                assert event.kind == "stdout" and event.data == "first\n"
                break
        await anyio.sleep(0.5)
        assert (await s.exec("pgrep -x sleep || true", user="root")).stdout.strip() == ""
        assert not (await s.stat("/workspace/late")).exists
