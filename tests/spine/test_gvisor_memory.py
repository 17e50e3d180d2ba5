"""gVisor sessions survive memory exhaustion (sandbox/memwatch.py): gVisor has no OOM killer
of its own, so before the watch a memory hog in a 512 MiB session made the host kill the
whole sandbox. Now the command holding the most memory is killed, its call says why, and
the session answers afterwards."""

from __future__ import annotations

import pytest

from caisson import Runtime
from caisson.policy import Policy

pytestmark = pytest.mark.anyio

HOGS = {
    "one allocation past the limit": "python3 -c 'x = bytearray(2 << 30)'",
    "growing by 50 MiB": "python3 -c 'a = []\nwhile True: a.append(bytearray(50 << 20))'",
    "four processes of 200 MiB": (
        "for i in 1 2 3 4; do python3 -c 'import time; x = bytearray(200 << 20); time.sleep(5)' & done; wait"
    ),
}


@pytest.mark.parametrize("hog", list(HOGS))
async def test_a_memory_hog_is_killed_not_the_session(rt: Runtime, hog: str) -> None:
    async with rt.session(gvisor=True, limits={"memory": "512m"}, policy=Policy(auto_approve_all=True)) as s:
        r = await s.call("bash", {"command": HOGS[hog], "timeout": 60})
        print(f"{hog}: {r.text[-200:]!r}")
        # The daemon's own note: a session lost to the host's OOM killer also says "ran out of
        # memory", in the error of its daemon's death.
        assert "caisson: killed: the session ran out of memory" in r.text, r.text
        after = await s.exec("echo alive", timeout=30)
        assert after.stdout == "alive\n"
        # And the session keeps its memory for what comes next.
        r = await s.exec("python3 -c 'x = bytearray(100 << 20); print(len(x))'", timeout=30)
        assert r.stdout == f"{100 << 20}\n"
