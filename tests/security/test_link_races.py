"""Symlink races against every file tool, as an agent that tries would run them.

A racer process, running as the agent user in the session, swaps a workspace path between a
plain file (or directory) and a link to somewhere the agent must not reach: a root-only file,
a root-only directory, /etc, or an agent-writable directory outside the workspace. Meanwhile
each file tool is called on that path many times. The policy sees a workspace path; the
daemon opens it as the agent beneath the workspace roots, so nothing may land.

Each test prints how many attempts landed; the control does the same reads with root's
credentials and no roots (how file access worked before), to show the race is real.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import pytest

from caisson import Runtime, Session
from caisson.policy import ApprovalAnswer, ApprovalRequest

pytestmark = pytest.mark.anyio

ATTEMPTS = 300
RACE = "/workspace/race"


@dataclass
class Stage:
    session: Session
    marker: str  # in every root-only file: seeing it means root's file access was reached
    runtime: str


async def approve(request: ApprovalRequest) -> ApprovalAnswer:
    # delete_file is dangerous; approving it shows approval widens the level, not the paths.
    return ApprovalAnswer.allow_once(approver="test")


@pytest.fixture(params=["runc", "gvisor"], scope="module")
async def stage(request: pytest.FixtureRequest, rt: Runtime) -> AsyncIterator[Stage]:
    marker = f"ROOT-ONLY-{uuid.uuid4().hex}"
    async with rt.session(gvisor=request.param == "gvisor", approval_handler=approve) as s:
        setup = f"""
            set -e
            printf '{marker}\\n' > /secret.txt; chmod 600 /secret.txt
            mkdir -p /secretdir; printf '{marker}\\n' > /secretdir/secret-file.txt; chmod -R go-rwx /secretdir
            printf 'AAA\\n' > /etc/caisson-victim; chmod 644 /etc/caisson-victim
            mkdir -p /outside; printf 'AAA\\n' > /outside/victim; printf 'outside-data\\n' > /outside/readable
            chown -R {s.config.agent_user}: /outside
            mkdir -p {RACE}; chown {s.config.agent_user}: {RACE}
        """
        r = await s.exec(setup, user="root")
        assert r.exit_code == 0, r.stderr
        yield Stage(s, marker, request.param)


async def race(stage: Stage, script: str, attempt: Callable[[int], Awaitable[bool]]) -> int:
    """Run ``script`` as the agent in a loop while ``attempt`` is called ATTEMPTS times;
    the number of attempts that landed."""
    s = stage.session
    await s.exec(f"rm -rf {RACE}/*", user=s.config.agent_user)
    task = await s.spawn(f"cd {RACE} && while :; do {script}; done", user=s.config.agent_user)
    try:
        landed = 0
        for i in range(ATTEMPTS):
            landed += await attempt(i)
    finally:
        await s.task_signal(task.task_id, "KILL")
    return landed


def flip(target: str, plain: str = "printf 'AAA\\n' > f.tmp") -> str:
    """Swap ``f`` between a plain file and a link to ``target``, always by rename (no gap)."""
    return f"ln -sfn {target} l.tmp && mv -Tf l.tmp f; {plain} && mv -Tf f.tmp f"


def flip_dir(target: str) -> str:
    """Swap ``d`` between a real directory and a link to ``target``."""
    return (
        f"ln -sfn {target} l.tmp && mv -Tf l.tmp d; rm -rf d.tmp; mkdir -p d.tmp && "
        "printf 'AAA\\n' > d.tmp/keep && printf 'x\\n' > d.tmp/plain.txt && mv -Tf d.tmp d"
    )


def report(stage: Stage, tool: str, landed: int) -> None:
    print(f"[{stage.runtime}] {tool}: {landed} of {ATTEMPTS} racing attempts landed")


async def test_read_file(stage: Stage) -> None:
    s = stage.session
    outside = worked = 0

    async def attempt(i: int) -> bool:
        nonlocal outside, worked
        r = await s.call("read_file", {"path": f"{RACE}/f"})
        outside += "outside-data" in r.text
        worked += "AAA" in r.text
        return stage.marker in r.text

    landed = await race(stage, flip("/secret.txt") + "; " + flip("/outside/readable"), attempt)
    report(stage, "read_file (root-only file)", landed)
    report(stage, "read_file (outside the workspace)", outside)
    print(f"[{stage.runtime}] read_file: {worked} reads of the plain file went through")
    assert (landed, outside) == (0, 0) and worked > 0


async def test_control_root_reads_do_land(stage: Stage) -> None:
    """The same race against the root library call: it lands, so the tests above can fail."""
    s = stage.session

    async def attempt(i: int) -> bool:
        try:
            return stage.marker in (await s.read_file(f"{RACE}/f")).decode()
        except Exception:
            return False

    landed = await race(stage, flip("/secret.txt"), attempt)
    report(stage, "control: root read_file", landed)
    assert landed > 0


async def test_write_file(stage: Stage) -> None:
    s = stage.session

    worked = 0

    async def attempt(i: int) -> bool:
        nonlocal worked
        worked += (await s.call("write_file", {"path": f"{RACE}/f", "content": f"PWN{i}\n"})).ok
        return False

    await race(stage, flip("/etc/caisson-pwned") + "; " + flip("/outside/pwned"), attempt)
    check = await s.exec("ls /etc/caisson-pwned /outside/pwned 2>/dev/null | wc -l", user="root")
    landed = int(check.stdout.strip())
    report(stage, "write_file (files created through links)", landed)
    print(f"[{stage.runtime}] write_file: {worked} writes went through (to the plain file)")
    assert landed == 0 and worked > 0


async def test_edit_file(stage: Stage) -> None:
    s = stage.session

    async def attempt(i: int) -> bool:
        await s.call("edit_file", {"path": f"{RACE}/f", "old_string": "AAA", "new_string": f"EDIT{i}"})
        return False

    await race(stage, flip("/etc/caisson-victim") + "; " + flip("/outside/victim"), attempt)
    check = await s.exec("cat /etc/caisson-victim /outside/victim", user="root")
    landed = check.stdout.count("EDIT")
    report(stage, "edit_file (files edited through links)", landed)
    assert check.stdout == "AAA\nAAA\n"


async def test_grep(stage: Stage) -> None:
    s = stage.session

    worked = 0

    async def attempt(i: int) -> bool:
        nonlocal worked
        r = await s.call("grep", {"pattern": "ROOT-ONLY|AAA", "path": RACE, "output_mode": "content"})
        worked += "AAA" in r.text
        return stage.marker in r.text or "secret-file" in r.text

    landed = await race(stage, flip_dir("/secretdir"), attempt)
    report(stage, "grep (root-only directory)", landed)
    assert landed == 0 and worked > 0


async def test_glob(stage: Stage) -> None:
    s = stage.session

    async def attempt(i: int) -> bool:
        r = await s.call("glob", {"pattern": "**/*", "path": RACE})
        return "secret-file" in r.text or "victim" in r.text

    landed = await race(stage, flip_dir("/secretdir") + "; " + flip_dir("/outside"), attempt)
    report(stage, "glob (names from outside)", landed)
    assert landed == 0


async def test_ls(stage: Stage) -> None:
    s = stage.session

    async def attempt(i: int) -> bool:
        r = await s.call("ls", {"path": f"{RACE}/d"})
        return "secret-file" in r.text or "victim" in r.text

    landed = await race(stage, flip_dir("/secretdir") + "; " + flip_dir("/outside"), attempt)
    report(stage, "ls (names from outside)", landed)
    assert landed == 0


async def test_delete_file(stage: Stage) -> None:
    s = stage.session
    restore = f"printf 'AAA\\n' > /outside/keep; chown -R {s.config.agent_user}: /outside"
    await s.exec(restore, user="root")

    async def attempt(i: int) -> bool:
        await s.call("delete_file", {"path": f"{RACE}/d/keep"})
        if (await s.stat("/outside/keep")).exists:
            return False
        await s.exec(restore, user="root")
        return True

    landed = await race(stage, flip_dir("/outside"), attempt)
    report(stage, "delete_file (files removed through links)", landed)
    assert landed == 0
