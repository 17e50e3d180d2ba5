"""The classifier places a command's relative paths in the directory the call names
(working_dir, cwd), links on the way followed, not in the shell's remembered one."""

from __future__ import annotations

import pytest

from caisson import Runtime
from caisson.policy import ApprovalAnswer, ApprovalRequest

pytestmark = pytest.mark.anyio

W = "/workspace"


async def deny(request: ApprovalRequest) -> ApprovalAnswer:
    return ApprovalAnswer.deny("denied by the test")


@pytest.mark.parametrize("gvisor", [False, True], ids=["runc", "gvisor"])
async def test_relative_writes_are_placed_in_the_calls_own_directory(rt: Runtime, gvisor: bool) -> None:
    async with rt.session(gvisor=gvisor, approval_handler=deny) as s:
        agent = s.config.agent_user
        made = await s.exec(f"mkdir -p {W}/repo {W}/sub {HOME}/.config && cd {W}/repo && git init -q && "
                            f"ln -s {W}/repo/.git {W}/lnk && ln -s {W}/repo/.git/hooks {W}/sub/h", user=agent)
        assert made.exit_code == 0, made.stderr
        await s.call("bash", {"command": f"cd {W}/sub"})  # the remembered directory: an ordinary one
        attempts = [
            ("bash", {"command": "echo 'cat /workspace/.env' > hooks/pre-commit", "working_dir": f"{W}/repo/.git"}),
            ("bash", {"command": "printf '[core]\\n\\tfsmonitor=x\\n' >> config", "working_dir": f"{W}/lnk"}),
            ("bash", {"command": "touch pre-commit", "working_dir": f"{W}/sub/h"}),
            ("bash", {"command": "echo x > .bashrc", "working_dir": HOME}),
            ("bash", {"command": "mkdir -p git && echo x > git/config", "working_dir": f"{HOME}/.config"}),
            ("run_code", {"command": "touch hooks/post-checkout", "cwd": f"{W}/repo/.git"}),
        ]
        landed = []
        for tool, args in attempts:
            result = await s.call(tool, args)
            if result.decision != "denied":
                landed.append((tool, args, result.level))
        hooks = (await s.exec(f"ls -A {W}/repo/.git/hooks; cat {W}/repo/.git/config; ls -A {HOME}/.config",
                              user="root")).stdout
    print(f"relative writes in a named directory ({'gvisor' if gvisor else 'runc'}): tried {len(attempts)}, "
          f"landed {len(landed)}: {landed}")
    assert landed == []
    assert "pre-commit\n" not in hooks and "post-checkout\n" not in hooks and "fsmonitor=x" not in hooks


HOME = "/home/agent"
