"""A command past its timeout dies with its whole tree, detached children included."""

from __future__ import annotations

import pytest

from runtime import Session

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
    r = await session.exec(TREE, timeout=2)
    assert r.timed_out and r.exit_code is None
    assert r.stdout == "started\n"  # partial output is returned
    assert 1.5 < r.duration < 8
    left = await session.exec(["bash", "-c", "ps -eo args | grep -c '^caisson-orphan' || true"], user="root")
    assert left.stdout.strip() == "0", left.stdout


async def test_detached_child_does_not_hold_the_call(session: Session) -> None:
    r = await session.exec("sleep 30 & echo quick", timeout=10)
    assert r.stdout == "quick\n" and r.exit_code == 0 and r.duration < 3
