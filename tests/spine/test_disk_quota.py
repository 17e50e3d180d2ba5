"""Disk limits: where the engine can bound a container's disk (overlay2 on an XFS data-root
with project quotas), writes stop at limits.disk and other sessions keep working; where it
cannot, ``strict_quotas`` refuses to start a session, and the default starts it under the
host's own (soft) quota, which ends a session that writes past it. Each run exercises the
branch its engine offers and prints which one it was."""

from __future__ import annotations

import os
import time

import anyio
import pytest

from caisson import Runtime
from caisson.config import Limits
from caisson.docker import containers
from caisson.errors import DaemonDied, SessionError

pytestmark = [pytest.mark.anyio, pytest.mark.exclusive]

QUOTA_MB = 300


def free_mb(path: str) -> float:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize / 2**20


async def test_disk_limits(rt: Runtime) -> None:
    if containers.disk_quotas(rt.backend.client, strict=False):
        await _writes_stop_at_the_quota(rt)
    else:
        await _unbounded_engine_is_refused_when_strict(rt)


async def _unbounded_engine_is_refused_when_strict(rt: Runtime) -> None:
    print("this engine cannot bound a container's disk (no XFS data-root with pquota): strict mode refuses")
    with pytest.raises(SessionError) as refused:
        async with rt.session(strict_quotas=True):
            pass
    assert "strict_quotas" in str(refused.value) and "caisson doctor" in str(refused.value)
    async with rt.session() as s:
        assert (await s.exec("echo started")).stdout == "started\n"
    await _host_quota_ends_a_session_that_writes_past_it(rt)


async def _host_quota_ends_a_session_that_writes_past_it(rt: Runtime) -> None:
    total = 4000  # MB the attacker tries to write
    async with rt.session(limits=Limits(disk=f"{QUOTA_MB}m")) as s, rt.session() as other:
        await s.spawn(f"dd if=/dev/zero of=/workspace/fill bs=1M count={total}; sync")
        seen, started, error = 0, time.monotonic(), None
        while time.monotonic() - started < 60:
            try:
                got = await s.exec("stat -c %s /workspace/fill 2>/dev/null || echo 0")
                seen = max(seen, int(got.stdout) // 2**20)
            except DaemonDied as exc:
                error = str(exc)
                break
            await anyio.sleep(0.1)
        print(f"host-enforced quota {QUOTA_MB} MB: session ended after {time.monotonic() - started:.1f} s, "
              f"having written at least {seen} MB of the {total} MB tried")
        assert error is not None and "disk quota" in error and "caisson doctor" in error
        assert seen < total
        assert (await other.exec("echo still here")).stdout == "still here\n"


async def _writes_stop_at_the_quota(rt: Runtime) -> None:
    data_root = rt.backend.client.info()["DockerRootDir"]
    async with rt.session(limits=Limits(disk=f"{QUOTA_MB}m"), strict_quotas=True) as s, rt.session() as other:
        before = free_mb(data_root)
        sizes, dropped, message = [], 0.0, ""
        for where in ("/workspace", "/tmp"):
            # Not dd: the policy refuses dd as a known-destructive command before the disk is reached.
            r = await s.call("bash", {"command": f"head -c {QUOTA_MB * 3}M /dev/zero > {where}/fill"})
            message = r.text
            sizes.append(int((await s.exec(["stat", "-c", "%s", f"{where}/fill"])).stdout) / 2**20)
            dropped = max(dropped, before - free_mb(data_root))
            # sync: btrfs gives freed extents back to the quota when the transaction commits.
            await s.exec(f"rm -f {where}/fill; sync")
        print(f"quota {QUOTA_MB} MB: writes stopped at {sizes} MB; host free space dropped by at most {dropped:.0f} MB")
        assert "No space left" in message or "quota" in message.lower()
        assert all(QUOTA_MB * 0.9 <= size <= QUOTA_MB * 1.05 for size in sizes)
        assert dropped <= QUOTA_MB * 1.05
        assert (await other.call("write_file", {"path": "/workspace/ok.txt", "content": "fine"})).ok
