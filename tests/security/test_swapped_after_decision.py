"""The path a call was allowed on is the path it acts on.

The policy decides on where a path really leads (links followed), then the tool works on the
path. Between the two, a racer in the session swaps a directory (or a file) on the way with a
link to a protected place inside the workspace: ``.git`` (asked about; the approver refuses)
or a secret file (refused). Each swap is one atomic exchange of two names where the kernel
has it (runc), so the path is never missing; under gVisor, which has no exchange, it is three
renames. The decoy holds exactly what the protected file holds, so a compare-and-swap on the
content the tool read cannot tell them apart.

Each test prints how many attempts landed; on code that let the tool follow the path again
after the decision, writes and edits landed in ``.git`` and a read showed the secret.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import pytest

from caisson import Runtime, Session
from caisson.policy import ApprovalAnswer, ApprovalRequest

pytestmark = pytest.mark.anyio

ATTEMPTS = 150
RACE = "/workspace/race"
HOOK = "/workspace/.git/hooks/pre-commit"
HOOK_TEXT = "#!/bin/sh\nexit 0\n"

# Exchanges two names for as long as it runs: renameat2(RENAME_EXCHANGE) where the kernel has
# it, else (gVisor) three renames through a third name.
SWAPPER = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
a, b = sys.argv[1], sys.argv[2]
if libc.renameat2(-100, a.encode(), -100, b.encode(), 2) == 0:
    while True:
        libc.renameat2(-100, a.encode(), -100, b.encode(), 2)
while True:
    try:
        os.rename(a, a + ".x"); os.rename(b, a); os.rename(a + ".x", b)
    except OSError:
        pass
"""


@dataclass
class Asked:
    """Refuses and notes what asks about .git; allows the rest (delete_file is dangerous)."""

    refused: list[str] = field(default_factory=list)

    async def answer(self, request: ApprovalRequest) -> ApprovalAnswer:
        protected = [p for p in request.paths if p.startswith("/workspace/.git/")]
        if protected:
            self.refused.extend(protected)
            return ApprovalAnswer.deny("not in this test", approver="test")
        return ApprovalAnswer.allow_once(approver="test")


@dataclass
class Stage:
    session: Session
    asked: Asked
    runtime: str
    secret: str


@pytest.fixture(params=["runc", "gvisor"], scope="module")
async def stage(request: pytest.FixtureRequest, rt: Runtime) -> AsyncIterator[Stage]:
    asked = Asked()
    secret = f"TOKEN-{uuid.uuid4().hex}"
    async with rt.session(gvisor=request.param == "gvisor", approval_handler=asked.answer) as s:
        await s.write_file("/workspace/swap.py", SWAPPER)
        await s.write_file("/workspace/.env", f"API_TOKEN={secret}\n")
        yield Stage(s, asked, request.param, secret)


async def race(
    stage: Stage, tool: str, setup: str, a: str, b: str, attempt: Callable[[int], Awaitable[tuple[bool, bool]]]
) -> None:
    """``setup`` in a fresh race directory, then ``a`` and ``b`` swapped while ``attempt`` runs
    ATTEMPTS times (each says: done, landed); none may land. Then, the swapping stopped and
    the race directory set up again, one more attempt must be done and land nowhere: the tool
    was refused only what the race made of the path."""
    s = stage.session

    async def set_up() -> None:
        r = await s.exec(f"rm -rf {RACE} && mkdir -p {RACE} /workspace/.git/hooks && cd {RACE} && {setup}")
        assert r.exit_code == 0, r.stderr
        await s.write_file(HOOK, HOOK_TEXT)

    await set_up()
    task = await s.spawn(f"cd {RACE} && exec python3 /workspace/swap.py {a} {b}")
    landed = done = 0
    try:
        for i in range(ATTEMPTS):
            ok, hit = await attempt(i)
            done += ok
            landed += hit
    finally:
        await s.task_signal(task.task_id, "KILL")
    await s.task_wait(task.task_id, timeout=30)
    await set_up()
    print(
        f"[{stage.runtime}] {tool}: {landed} of {ATTEMPTS} landed, {done} answered as done (on the decoy), "
        f"{len(stage.asked.refused)} asks about .git so far (all refused)"
    )
    assert landed == 0
    ok, hit = await attempt(ATTEMPTS)
    assert ok and not hit, "unraced, the call must be done on the decoy"


async def hook(s: Session) -> str:
    return (await s.read_file(HOOK)).decode()


async def put_back_the_decoy(s: Session) -> None:
    """Each attempt finds the decoy whole (the hook is written back by the runner): every edit
    finds "exit 0" wherever it lands."""
    await s.exec(f"cd {RACE} && for x in d l; do [ -L $x ] || printf '{HOOK_TEXT}' > $x/pre-commit; done")


def decoy_dir() -> str:
    """``d``: a directory whose pre-commit is the hook's double; ``l``: a link to .git/hooks."""
    return f"mkdir d && printf '{HOOK_TEXT}' > d/pre-commit && ln -s /workspace/.git/hooks l"


async def test_write_file_through_a_swapped_directory(stage: Stage) -> None:
    s = stage.session

    async def attempt(i: int) -> tuple[bool, bool]:
        r = await s.call("write_file", {"path": f"{RACE}/d/pre-commit", "content": f"PWN{i}\n"})
        return r.ok, "PWN" in await hook(s)

    await race(stage, "write_file through a swapped directory", decoy_dir(), "d", "l", attempt)


async def test_edit_file_through_a_swapped_directory(stage: Stage) -> None:
    s = stage.session

    async def attempt(i: int) -> tuple[bool, bool]:
        await put_back_the_decoy(s)
        r = await s.call(
            "edit_file", {"path": f"{RACE}/d/pre-commit", "old_string": "exit 0", "new_string": f"echo PWN{i}"}
        )
        return r.ok, "PWN" in await hook(s)

    await race(stage, "edit_file through a swapped directory", decoy_dir(), "d", "l", attempt)


@pytest.mark.parametrize("tool", ["multi_edit", "apply_patch"])
async def test_other_edits_through_a_swapped_directory(stage: Stage, tool: str) -> None:
    s = stage.session

    async def attempt(i: int) -> tuple[bool, bool]:
        await put_back_the_decoy(s)
        path = f"{RACE}/d/pre-commit"
        if tool == "multi_edit":
            args = {"path": path, "edits": [{"old_string": "exit 0", "new_string": f"echo PWN{i}"}]}
        else:
            patch = f"--- a/pre-commit\n+++ b/pre-commit\n@@ -1,2 +1,2 @@\n #!/bin/sh\n-exit 0\n+echo PWN{i}\n"
            args = {"path": path, "patch": patch}
        r = await s.call(tool, args)
        return r.ok, "PWN" in await hook(s)

    await race(stage, f"{tool} through a swapped directory", decoy_dir(), "d", "l", attempt)


async def test_delete_file_through_a_swapped_directory(stage: Stage) -> None:
    s = stage.session

    async def attempt(i: int) -> tuple[bool, bool]:
        await put_back_the_decoy(s)
        r = await s.call("delete_file", {"path": f"{RACE}/d/pre-commit"})
        gone = not (await s.stat(HOOK)).exists
        if gone:  # put the hook back, so each attempt counts on its own
            await s.write_file(HOOK, HOOK_TEXT)
        return r.ok, gone

    await race(stage, "delete_file through a swapped directory", decoy_dir(), "d", "l", attempt)


async def test_read_file_of_a_file_swapped_with_a_link_to_a_secret(stage: Stage) -> None:
    """The decoy is larger than what the resolving look reads ahead, so the tool reads again."""
    s = stage.session

    async def attempt(i: int) -> tuple[bool, bool]:
        r = await s.call("read_file", {"path": f"{RACE}/notes.txt"})
        return r.ok, stage.secret in r.text

    setup = "head -c 600000 /dev/zero | tr '\\0' x | fold -w 99 > notes.txt && ln -s /workspace/.env link"
    await race(stage, "read_file of a file swapped with a link to .env", setup, "notes.txt", "link", attempt)
