"""Cancelling a call stops its work: the command's whole tree is killed, its side effects
never happen, and (persistent bash) its state is not saved over a newer call's."""

from __future__ import annotations

import anyio
import pytest

from caisson import Runtime

pytestmark = pytest.mark.anyio


async def test_a_cancelled_exec_leaves_nothing_running(rt: Runtime) -> None:
    async with rt.session() as s:
        with anyio.move_on_after(1):
            await s.exec("sleep 30; touch /workspace/x", timeout=60)
        await anyio.sleep(0.5)
        left = await s.exec("pgrep -x sleep || true", user="root")
        print(f"cancelled exec: processes left {left.stdout.split()}")
        assert left.stdout.strip() == ""
        await anyio.sleep(1)
        assert not (await s.stat("/workspace/x")).exists


async def test_a_cancelled_bash_call_saves_no_state(rt: Runtime) -> None:
    async with rt.session() as s:
        assert (await s.call("bash", {"command": "export MARK=before"})).ok
        with anyio.move_on_after(1):
            await s.call("bash", {"command": "export MARK=cancelled; cd /tmp; sleep 30; touch /workspace/y"})
        after = await s.call("bash", {"command": "echo $MARK; pwd"})
        assert after.text.split() == ["before", "/workspace"]
        assert not (await s.stat("/workspace/y")).exists
        left = await s.exec("pgrep -x sleep || true", user="root")
        assert left.stdout.strip() == ""


async def test_a_call_past_its_deadline_is_stopped_too(rt: Runtime) -> None:
    from caisson.errors import CallTimeout

    async with rt.session(call_timeout=1) as s:
        with pytest.raises(CallTimeout):
            await s.op("exec", {"command": "sleep 30; touch /workspace/z", "timeout": None})
        await anyio.sleep(0.5)
        assert (await s.exec("pgrep -x sleep || true", user="root")).stdout.strip() == ""
