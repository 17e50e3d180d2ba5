"""What an agent sees from inside: no capabilities, no new privileges, no network, limits."""

from __future__ import annotations

import pytest

from caisson import Runtime, Session

pytestmark = pytest.mark.anyio


async def test_agent_commands_are_unprivileged(shared_session: Session) -> None:
    r = await shared_session.exec("id -un; id -u; grep -E '^(CapEff|CapPrm|NoNewPrivs)' /proc/self/status")
    lines = r.stdout.split("\n")
    assert lines[0] == "agent" and lines[1] != "0"
    status = dict(line.split(":\t") for line in lines[2:] if line)
    assert status["CapEff"].strip("0") == "" and status["CapPrm"].strip("0") == ""
    assert status["NoNewPrivs"] == "1"


async def test_daemon_capabilities_are_only_the_listed_ones(shared_session: Session) -> None:
    assert shared_session.info is not None
    r = await shared_session.exec(["grep", "CapBnd", f"/proc/{shared_session.info.pid}/status"], user="root")
    bounding = int(r.stdout.split()[1], 16)
    # CHOWN 0, DAC_OVERRIDE 1, FOWNER 3, KILL 5, SETGID 6, SETUID 7
    assert bounding == sum(1 << bit for bit in (0, 1, 3, 5, 6, 7))


async def test_only_loopback_network(shared_session: Session) -> None:
    r = await shared_session.exec("ls /sys/class/net")
    assert r.stdout.split() == ["lo"]


async def test_limits_are_applied(shared_session: Session) -> None:
    r = await shared_session.exec(
        "cat /sys/fs/cgroup/pids/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids.max; "
        "cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.max; "
        "cat /sys/fs/cgroup/memory/memory.memsw.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.swap.max 2>/dev/null || echo no-swap-accounting; "
        "ulimit -n"
    )
    pids, memory, memsw, nofile = r.stdout.split()[:4]
    cfg = shared_session.config.limits
    assert int(pids) == cfg.pids
    assert int(memory) == 2 * 1024**3
    # v1: mem+swap == mem; v2: swap.max 0; without swap accounting there is no swap to limit.
    assert memsw in (str(2 * 1024**3), "0", "no-swap-accounting")
    assert int(nofile) == cfg.nofile


async def test_no_docker_socket_and_no_devices(shared_session: Session) -> None:
    r = await shared_session.exec("ls /var/run/docker.sock /dev/sda /dev/mem 2>&1; ls /dev")
    assert "No such file" in r.stdout
    assert set(r.stdout.split()) >= {"null", "zero", "urandom"}
    assert "sda" not in r.stdout.split("\n")[-2]


async def test_gvisor_session_runs_under_the_gvisor_kernel(rt: Runtime) -> None:
    async with rt.session(gvisor=True) as s:
        r = await s.exec("dmesg | head -1; id -un", timeout=30)
        assert "gVisor" in r.stdout and r.stdout.endswith("agent\n")
        await s.write_file("/workspace/g.txt", "under gVisor")
        assert await s.read_file("/workspace/g.txt") == b"under gVisor"
