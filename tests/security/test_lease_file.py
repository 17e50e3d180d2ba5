"""The host dates a local session's lease file itself, through ``/proc/<pid>/root``: root in
the container (what a compromised daemon would be) must not be able to turn that write onto a
file of the host's. Each plant puts a link (absolute, relative, or the directory itself) or a
FIFO where the lease is; the host's file must keep its date, and no renewal may hang."""

from __future__ import annotations

import functools
import os
import threading
from pathlib import Path

import anyio
import pytest

from caisson import Runtime
from caisson.docker import containers, lease
from caisson.transport import container_root

pytestmark = pytest.mark.anyio

LEASE = containers.LEASE_PATH


async def _root(rt: Runtime, container_id: str, command: str) -> str:
    container = rt.backend.client.containers.get(container_id)  # type: ignore[attr-defined]
    code, out = await anyio.to_thread.run_sync(
        functools.partial(container.exec_run, ["sh", "-c", command], user="0")
    )
    assert code == 0, out
    return out.decode()


def _pid(rt: Runtime, container_id: str) -> int:
    return int(rt.backend.client.api.inspect_container(container_id)["State"]["Pid"])  # type: ignore[attr-defined]


def _renew(client: object, container_id: str, pid: int, done: threading.Event) -> None:
    container_root.date_file(pid, container_id, LEASE, 1_800_000_000)
    lease.renew_lease(client, container_id, pid=pid)  # type: ignore[arg-type]  # as the lease keeper does
    done.set()


async def test_the_host_dates_the_lease_itself(rt: Runtime) -> None:
    async with rt.session(grace=None) as s:  # no lease keeper beside the test's own dating
        stamp = 1_700_000_000
        assert container_root.date_file(_pid(rt, s.container_id), s.container_id, LEASE, stamp)
        assert (await _root(rt, s.container_id, f"stat -c %Y {LEASE}")).strip() == str(stamp)
        # Missing (a session whose first renewal has not come yet): made, root's, then dated.
        await _root(rt, s.container_id, f"rm -f {LEASE}")
        assert container_root.date_file(_pid(rt, s.container_id), s.container_id, LEASE, stamp + 1)
        assert (await _root(rt, s.container_id, f"stat -c '%Y %u %F' {LEASE}")).strip() == f"{stamp + 1} 0 regular empty file"
        # Not for a pid of another container.
        assert not container_root.date_file(_pid(rt, s.container_id), "0" * 64, LEASE, stamp)


async def test_planted_links_do_not_turn_the_lease_onto_the_hosts_files(rt: Runtime, tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("host file")
    victim_dir = tmp_path / "dir"
    victim_dir.mkdir()
    (victim_dir / "lease").write_text("host file")
    climb = "../" * 40
    swap_lease = f"/opt/caisson/.plant && mv -Tf /opt/caisson/.plant {LEASE}"
    swap_dir = "/opt/caisson.plant && mv -T /opt/caisson /opt/caisson.real && mv -T /opt/caisson.plant /opt/caisson"
    plants = {
        "the lease replaced by a link to a host path": f"ln -s {victim} {swap_lease}",
        "the lease replaced by a relative link climbing out": f"ln -s {climb}{str(victim).lstrip('/')} {swap_lease}",
        "its directory replaced by a link to a host directory": f"ln -s {victim_dir} {swap_dir}",
        "its directory replaced by a relative link climbing out": f"ln -s {climb}{str(victim_dir).lstrip('/')} {swap_dir}",
        "the lease replaced by a FIFO": f"mkfifo {swap_lease}",
    }
    landed, hung = [], []
    for name, plant in plants.items():
        for path in (victim, victim_dir / "lease"):
            os.utime(path, (0, 0))
        async with rt.session(grace=None) as s:  # no lease keeper: the plant stays as made
            await _root(rt, s.container_id, plant)
            pid = _pid(rt, s.container_id)
            done = threading.Event()
            client = rt.backend.client  # type: ignore[attr-defined]
            threading.Thread(target=_renew, args=(client, s.container_id, pid, done), daemon=True).start()
            if not await anyio.to_thread.run_sync(done.wait, 30):
                hung.append(name)
            assert (await s.exec(["echo", "still"])).stdout == "still\n"
        if any(os.stat(path).st_mtime != 0 for path in (victim, victim_dir / "lease")):
            landed.append(name)
    print(f"{len(plants)} planted leases: {len(landed)} dated a host file {landed}, {len(hung)} hung a renewal {hung}")
    assert landed == []
    assert hung == []
