"""The daemon is out of the agent's reach: a grader that runs tests through the session can
trust what it is told. Attacks run through the bash tool with every approval granted (the
agent's full rights), and each names what it tried; none may land."""

from __future__ import annotations

import pytest

from caisson import Runtime
from caisson.policy import ApprovalAnswer, ApprovalRequest

pytestmark = pytest.mark.anyio


async def approve(request: ApprovalRequest) -> ApprovalAnswer:
    return ApprovalAnswer.allow_once(approver="test")


def attacks(pid: int, gvisor: bool) -> dict[str, str]:
    # A forged reply frame: a length prefix and a JSON body claiming success.
    frame = "\\x00\\x00\\x00\\x2a" + '{"id":1,"ok":true,"result":{"exit_code":0}}'
    found = {
        "write a frame to the daemon's stdout": f"printf '{frame}' > /proc/{pid}/fd/1",
        "open the daemon's stdout via /proc": f"exec 3>/proc/{pid}/fd/1 && echo opened",
        "write to the container's stdout": f"printf '{frame}' > /proc/1/fd/1",
        "signal the daemon (KILL)": f"kill -KILL {pid}",
        "signal the daemon (STOP)": f"kill -STOP {pid}",
        # Dressed up: the destructive-pattern filter would refuse the plain spelling.
        "signal every process": "k=ki; ${k}ll -KILL -1",
        "ptrace the daemon": (
            "python3 -c \"import ctypes,sys; l=ctypes.CDLL(None, use_errno=True); "
            f"r=l.ptrace(16, {pid}, 0, 0); sys.exit(0 if r == 0 else 1)\""
        ),
        "read the daemon's memory": f"head -c 16 /proc/{pid}/mem",
        # A command holds stdin, stdout and stderr, nothing of the daemon's (here ls's listing is 3).
        "hold a descriptor of the daemon's": "ls /proc/self/fd | grep -qvxE '[0-3]'",
    }
    if not gvisor:
        # gVisor's /proc skips the ptrace access check here; the daemon's environment holds
        # only the session's settings (no credential), as the README's known limits say.
        found["read the daemon's environment"] = f"cat /proc/{pid}/environ"
    return found


@pytest.mark.parametrize("gvisor", [False, True], ids=["runc", "gvisor"])
async def test_agent_cannot_reach_the_daemon(rt: Runtime, gvisor: bool) -> None:
    async with rt.session(gvisor=gvisor, approval_handler=approve) as s:
        info = await s.ping()
        landed: list[str] = []
        for name, command in attacks(info.pid, gvisor).items():
            r = await s.call("bash", {"command": f"{command}; echo rc=$?", "timeout": 10})
            assert r.decision in ("approved", "allow", "warn"), (name, r.text)
            # The command must have failed (kill -1 may succeed on the agent's own processes),
            # and the same daemon must still answer truthfully.
            alive = await s.exec(["echo", "alive"], timeout=10)
            succeeded = "rc=0" in r.text and name != "signal every process"
            if succeeded or alive.stdout != "alive\n" or (await s.ping()).pid != info.pid:
                landed.append(name)
        after = await s.ping()
        print(f"[{'gvisor' if gvisor else 'runc'}] {len(attacks(info.pid, gvisor))} attacks on the daemon, {len(landed)} landed: {landed}")
        assert landed == [] and after.pid == info.pid


async def test_no_tool_reaches_root(rt: Runtime) -> None:
    """Every command a tool runs is the agent's: the confined client refuses another user."""
    from caisson.errors import OpError

    async with rt.session(approval_handler=approve) as s:
        for tool, args in [
            ("bash", {"command": "id -u"}),
            ("exec", {"command": "id -u"}),
            ("run_code", {"mode": "command", "command": "id -u"}),
            ("bash", {"command": "id -u", "run_in_background": True}),
        ]:
            r = await s.call(tool, args)
            assert r.ok, r.text
            if "task_id" in (r.data or {}):
                out = await s.call("task_output", {"task_id": r.data["task_id"], "wait": 5})
                assert out.data["stdout"].strip() == "1000", out.text
            else:
                assert "1000" in r.text and "\n0\n" not in r.text, (tool, r.text)
        ctx = s.tool_context()
        with pytest.raises(OpError) as refused:
            await ctx.client.exec(["id", "-u"], user="root")
        assert refused.value.code == "permission_denied"
