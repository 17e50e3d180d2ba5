"""Files that run later are not plantable at cautious: with every approval denied, no file
tool and no auto-approved bash command writes the agent's shell start-up files, its git
configuration, Python's site hooks, ssh or package-manager settings, or its user site and
~/.local/bin (the home directory being a writable root)."""

from __future__ import annotations

import pytest

from caisson import Runtime
from caisson.policy import ApprovalAnswer, ApprovalRequest

pytestmark = pytest.mark.anyio

HOME = "/home/agent"
W = "/workspace"
CODE = "import os; os.system('id > /tmp/ran')\n"
TARGETS = [
    f"{HOME}/.bashrc", f"{HOME}/.profile", f"{HOME}/.bash_profile", f"{HOME}/.bash_logout", f"{HOME}/.zshenv",
    f"{HOME}/.inputrc", f"{HOME}/.vimrc", f"{HOME}/.lesskey", f"{HOME}/.npmrc", f"{HOME}/.yarnrc.yml",
    f"{HOME}/.config/git/config", f"{HOME}/.config/git/attributes", f"{HOME}/.config/pip/pip.conf",
    f"{HOME}/.config/lesskey", f"{HOME}/.local/lib/python3.11/site-packages/evil.pth",
    f"{HOME}/.local/lib/python3.11/site-packages/usercustomize.py", f"{HOME}/.local/bin/git",
    f"{HOME}/.ssh/config", f"{HOME}/.ssh/authorized_keys", f"{HOME}/.docker/config.json", f"{HOME}/.kube/config",
    f"{HOME}/.aws/config", f"{HOME}/.gitconfig", f"{W}/.venv/lib/python3.11/site-packages/evil.pth",
    f"{W}/sitecustomize.py", f"{W}/.bashrc",
]


async def deny(request: ApprovalRequest) -> ApprovalAnswer:
    return ApprovalAnswer.deny("denied by the test")


def attempts(target: str) -> list[tuple[str, dict[str, object]]]:
    parent = target.rsplit("/", 1)[0]
    return [
        ("write_file", {"path": target, "content": CODE}),
        ("bash", {"command": f"mkdir -p {parent} && printf '%s' x > {target}"}),
        ("bash", {"command": f"echo x >> {target}"}),
        ("bash", {"command": f"tee {target} < /dev/null"}),
        ("bash", {"command": f"cp {W}/stage/payload {target}"}),
        ("bash", {"command": "echo x | tee -a " + target}),
        ("bash", {"command": f"mkdir -p {parent}", "working_dir": W}),
        ("bash", {"command": f"mv {W}/stage/payload {target}"}),
        ("bash", {"command": f"ln -s {W}/stage/payload {target}"}),
        ("bash", {"command": f"cd {parent.rsplit('/', 1)[0]} && cp -r {W}/stage {parent}"}),
    ]


@pytest.mark.parametrize("gvisor", [False, True], ids=["runc", "gvisor"])
async def test_files_that_run_later_are_not_written_at_cautious(rt: Runtime, gvisor: bool) -> None:
    async with rt.session(gvisor=gvisor, approval_handler=deny) as s:
        agent = s.config.agent_user
        await s.write_file(f"{W}/stage/payload", CODE, owner=agent)
        before = (await s.exec(f"find {HOME} {W} -newer {W}/stage/payload | sort", user="root")).stdout
        tried, landed = 0, []
        for target in TARGETS:
            # Some exist already (the image's skeleton .bashrc, .profile): what counts is a change.
            look = f"ls -ld --time-style=+%s.%N {target} 2>&1; cat {target} 2>&1"
            original = (await s.exec(look, user="root")).stdout
            for tool, args in attempts(target):
                tried += 1
                await s.call(tool, args)
                if (await s.exec(look, user="root")).stdout != original:
                    landed.append((tool, args))
        after = (await s.exec(f"find {HOME} {W} -newer {W}/stage/payload | sort", user="root")).stdout
        # Ordinary work in the home directory stays cautious and runs.
        ordinary = await s.call("write_file", {"path": f"{HOME}/notes/todo.txt", "content": "x\n"})
    print(f"files that run later ({'gvisor' if gvisor else 'runc'}): tried {tried}, landed {len(landed)}: {landed[:5]}")
    assert landed == []
    assert [line for line in after.splitlines() if line not in before.splitlines() and "/.local" in line] == []
    assert ordinary.ok and ordinary.level is not None and ordinary.level.value == "cautious"
