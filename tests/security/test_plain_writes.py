"""write_file decides on the path as given and checks in the same round trip that it was the
real one. These attacks dress a protected path (``.git/**``: dangerous, asked about) up as an
ordinary workspace file, statically and in races, with an approval handler that refuses and
counts what it is asked. Nothing may land in ``.git`` without a question about ``.git``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest

from caisson import Runtime, Session
from caisson.policy import ApprovalAnswer, ApprovalRequest

pytestmark = pytest.mark.anyio

ATTEMPTS = 300
HOOK = "/workspace/.git/hooks/pre-commit"
RACE = "/workspace/race"


@dataclass
class Asked:
    paths: list[str] = field(default_factory=list)

    async def refuse(self, request: ApprovalRequest) -> ApprovalAnswer:
        self.paths.extend(request.paths)
        return ApprovalAnswer.deny("not in this test", approver="test")


@pytest.fixture(params=["runc", "gvisor"])
async def staged(request: pytest.FixtureRequest, rt: Runtime) -> AsyncIterator[tuple[Session, Asked]]:
    asked = Asked()
    async with rt.session(gvisor=request.param == "gvisor", approval_handler=asked.refuse) as s:
        r = await s.exec(f"mkdir -p /workspace/.git/hooks {RACE} && printf 'HOOK\\n' > {HOOK}")
        assert r.exit_code == 0, r.stderr
        yield s, asked


async def hook(s: Session) -> str:
    return (await s.read_file(HOOK)).decode()


async def test_link_to_a_protected_file_is_asked_about(staged: tuple[Session, Asked]) -> None:
    s, asked = staged
    await s.exec(f"ln -s {HOOK} /workspace/notes.txt && ln -s /workspace/.git/hooks /workspace/hooks")
    tried = ("/workspace/notes.txt", "/workspace/hooks/pre-commit", "/workspace/hooks/new-hook", "/workspace/hooks/d/x")
    for path in tried:
        r = await s.call("write_file", {"path": path, "content": "PWN\n"})
        assert not r.ok and r.error is not None and r.error.code == "permission_denied", r.text
    made = [p for p in ("/workspace/.git/hooks/new-hook", "/workspace/.git/hooks/d") if (await s.stat(p)).exists]
    landed = (await hook(s)).count("PWN") + len(made)
    print(f"write_file through links to .git: {landed} of {len(tried)} landed ({made}); asked about {asked.paths}")
    assert landed == 0
    assert asked.paths == [HOOK, HOOK, "/workspace/.git/hooks/new-hook", "/workspace/.git/hooks/d/x"]


async def test_dangling_link_into_git_is_asked_about(staged: tuple[Session, Asked]) -> None:
    """A link to a file not yet made is written through, so the question is about where the
    write would make it (before, the policy looked at the link and .git/hooks got a new hook)."""
    s, asked = staged
    made = "/workspace/.git/hooks/post-checkout"
    await s.exec(f"ln -s {made} /workspace/later.txt && ln -s hooks/post-merge /workspace/.git/merge-note")
    tried = {"/workspace/later.txt": made, "/workspace/.git/merge-note": "/workspace/.git/hooks/post-merge"}
    landed = 0
    for path, target in tried.items():
        r = await s.call("write_file", {"path": path, "content": "PWN\n"})
        landed += (await s.stat(target)).exists
        assert not r.ok and r.error is not None and r.error.code == "permission_denied", r.text
    print(f"write_file through dangling links into .git: {landed} of {len(tried)} landed; asked about {asked.paths}")
    assert landed == 0
    assert asked.paths == list(tried.values())


async def test_hard_link_to_a_protected_file_is_not_written(staged: tuple[Session, Asked]) -> None:
    s, _ = staged
    await s.exec(f"ln {HOOK} /workspace/alias")
    r = await s.call("write_file", {"path": "/workspace/alias", "content": "PWN\n"})
    assert r.ok, r.text
    # The name is replaced; the protected file behind the other name keeps its content.
    print(f"write_file on a hard link to a .git hook: hook now {await hook(s)!r}")
    assert await hook(s) == "HOOK\n"
    assert (await s.read_file("/workspace/alias")) == b"PWN\n"


async def test_racing_links_to_protected_paths(staged: tuple[Session, Asked]) -> None:
    """A racer swaps a file between a plain one and a link into .git (directories swapped on
    the way: test_swapped_after_decision)."""
    s, asked = staged
    flip_file = f"ln -sfn {HOOK} l.tmp && mv -Tf l.tmp f; printf 'A\\n' > f.tmp && mv -Tf f.tmp f"
    task = await s.spawn(f"cd {RACE} && while :; do {flip_file}; done")
    worked = 0
    try:
        for i in range(ATTEMPTS):
            worked += (await s.call("write_file", {"path": f"{RACE}/f", "content": f"PWN{i}\n"})).ok
    finally:
        await s.task_signal(task.task_id, "KILL")
    landed = (await hook(s)).count("PWN")
    print(
        f"write_file racing links into .git: {landed} of {ATTEMPTS} landed, {worked} plain writes went "
        f"through, {len(asked.paths)} asked about (all refused)"
    )
    assert landed == 0 and worked > 0
    assert all(p.startswith("/workspace/.git/") for p in asked.paths)
