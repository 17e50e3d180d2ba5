"""A controller killed with SIGKILL leaks nothing for long: its sessions' daemons stop a grace
after the last lease renewal, with no reaper run; a controller that re-attaches within the
grace keeps the session (and its background tasks)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

from caisson import Runtime
from caisson.config import SessionConfig
from caisson.docker.containers import LABEL_SESSION

pytestmark = pytest.mark.anyio

GRACE = 5.0

CONTROLLER = """
import anyio, sys
from caisson import Runtime
from caisson.config import RuntimeConfig, SessionConfig

async def main():
    async with Runtime(RuntimeConfig(state_dir=sys.argv[1])) as rt:
        for _ in range(int(sys.argv[2])):
            s = await rt.open_session(SessionConfig(grace=float(sys.argv[3])))
            await s.spawn("sleep 600")
            print(s.id, flush=True)
        await anyio.sleep_forever()

anyio.run(main)
"""


def controller(tmp_path: Path, sessions: int, grace: float) -> tuple[subprocess.Popen[str], list[str]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", CONTROLLER, str(tmp_path), str(sessions), str(grace)],
        stdout=subprocess.PIPE, text=True, env={**os.environ},
    )
    assert proc.stdout is not None
    ids = [proc.stdout.readline().strip() for _ in range(sessions)]
    assert all(ids), ids
    return proc, ids


def running(rt: Runtime, session_ids: list[str]) -> set[str]:
    rows = rt.backend.client.api.containers(filters={"label": LABEL_SESSION})
    return {row["Labels"][LABEL_SESSION] for row in rows} & set(session_ids)


async def test_sigkilled_controller_leaks_nothing_past_the_grace(tmp_path: Path) -> None:
    proc, ids = controller(tmp_path, 2, GRACE)
    async with Runtime(gc_on_start=False, state_dir=str(tmp_path)) as rt:
        await anyio.sleep(GRACE + 1)  # renewals keep them alive past one grace
        assert running(rt, ids) == set(ids)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        killed = time.monotonic()
        while running(rt, ids) and time.monotonic() - killed < GRACE + 10:
            await anyio.sleep(0.5)
        gone_after = time.monotonic() - killed
        print(f"controller SIGKILLed: its {len(ids)} sessions were gone {gone_after:.1f} s later (grace {GRACE:g} s)")
        assert running(rt, ids) == set()


async def test_reattach_within_the_grace_keeps_the_session(tmp_path: Path) -> None:
    proc, [sid] = controller(tmp_path, 1, GRACE)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    async with Runtime(gc_on_start=False, state_dir=str(tmp_path)) as rt:
        s = await rt.reattach(sid, SessionConfig(grace=GRACE))
        await anyio.sleep(GRACE * 2)  # the new controller's renewals keep it
        assert (await s.exec("pgrep -x sleep")).exit_code == 0  # the background task survived
        await s.close()


@pytest.mark.parametrize("gvisor", [False, True], ids=["runc", "gvisor"])
async def test_a_living_controller_keeps_idle_sessions(rt: Runtime, gvisor: bool) -> None:
    # A grace of some seconds: under gVisor a renewal is an exec, which takes seconds on a busy host.
    async with rt.session(grace=5, gvisor=gvisor) as s:
        await anyio.sleep(12)  # no calls, over two graces: only the lease renewals keep it
        assert (await s.exec("echo alive")).stdout == "alive\n"
