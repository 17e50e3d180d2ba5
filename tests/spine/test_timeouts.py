"""A command past its timeout dies with its whole tree, detached children included."""

from __future__ import annotations

import pytest

from caisson import Runtime, Session

pytestmark = pytest.mark.anyio

# One grandchild leaves the process group with setsid and ignores SIGTERM; another is
# double-forked away from its parent, so only a subreaper keeps it in the tree.
TREE = (
    "echo started; "
    "setsid bash -c 'trap \"\" TERM; exec -a caisson-orphan-a sleep 300' & "
    "(setsid bash -c 'trap \"\" TERM; exec -a caisson-orphan-b sleep 301' &); "
    "sleep 100"
)


async def test_timeout_kills_detached_grandchildren(session: Session) -> None:
    await _dies_with_its_tree(session)


async def test_timeout_kills_detached_grandchildren_under_gvisor(rt: Runtime) -> None:
    """gVisor keeps no orphan below its command (no subreaper): the command's marker group,
    which the agent cannot drop, finds them."""
    async with rt.session(gvisor=True) as s:
        await _dies_with_its_tree(s)
        # The agent cannot shed the group to hide a process from the next kill.
        shed = await s.exec(["python3", "-c", "import os; os.setgroups([])"])
        assert shed.exit_code != 0 and "PermissionError" in shed.stderr, shed


async def _dies_with_its_tree(session: Session) -> None:
    r = await session.exec(TREE, timeout=2)
    assert r.timed_out and r.exit_code is None
    assert r.stdout == "started\n"  # partial output is returned
    # Answered at the timeout, not when the command's own `sleep 100` would have ended
    # (the margin is for a loaded machine).
    assert 1.5 < r.duration < 30
    left = await session.exec(["bash", "-c", "ps -eo args | grep -c '^caisson-orphan' || true"], user="root")
    print(f"orphans left after the timeout: {left.stdout.strip()}")
    assert left.stdout.strip() == "0", left.stdout


async def test_detached_child_does_not_hold_the_call(session: Session) -> None:
    r = await session.exec("sleep 30 & echo quick", timeout=10)
    assert r.stdout == "quick\n" and r.exit_code == 0 and r.duration < 15  # the child sleeps 30 s
