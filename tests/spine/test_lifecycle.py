"""Nothing leaks: closed sessions, killed controllers, expired TTLs; and re-attach."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time

import anyio
import docker.errors
import pytest

from caisson import Runtime, RuntimeConfig, SessionError
from caisson.docker.containers import LABEL_SESSION

pytestmark = pytest.mark.anyio


def _exists(rt: Runtime, container_id: str) -> bool:
    try:
        rt.backend.client.containers.get(container_id)
        return True
    except docker.errors.NotFound:
        return False


async def test_closing_a_session_removes_its_container(rt: Runtime) -> None:
    async with rt.session() as s:
        cid = s.container_id
        assert _exists(rt, cid)
        labels = rt.backend.client.containers.get(cid).labels
        assert labels[LABEL_SESSION] == s.id and "caisson.expires" in labels and "caisson.owner" in labels
    assert not _exists(rt, cid)


async def test_session_closes_even_when_the_body_raises(rt: Runtime) -> None:
    with pytest.raises(RuntimeError):
        async with rt.session() as s:
            cid = s.container_id
            raise RuntimeError("agent crashed")
    assert not _exists(rt, cid)


CONTROLLER = textwrap.dedent(
    """
    import anyio
    from caisson import Runtime, logs
    logs.configure()  # logs to stderr; stdout carries only the container id
    async def main():
        async with Runtime() as rt:
            s = await rt.open_session(grace=None)  # never ends by itself: only gc can remove it
            print(s.container_id, flush=True)
            await anyio.sleep(600)
    anyio.run(main)
    """
)


async def test_sigkilled_controller_leaves_nothing_after_gc(rt: Runtime, tmp_path: object) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", CONTROLLER], stdout=subprocess.PIPE, text=True,
        env={**os.environ, "CAISSON_STATE_DIR": str(tmp_path)},
    )
    assert proc.stdout is not None
    cid = proc.stdout.readline().strip()
    assert cid and _exists(rt, cid)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert _exists(rt, cid)  # the controller died without cleaning up
    reaped = await rt.gc()
    assert any(cid.startswith(r.container) for r in reaped)
    assert not _exists(rt, cid)


@pytest.mark.exclusive  # all owners: every caisson container of the engine not spared
async def test_gc_leaves_sessions_that_end_themselves_and_all_owners_takes_them(rt: Runtime) -> None:
    from caisson.docker import reaper

    s = await rt.open_session()  # a grace period: its daemon ends it when its controller is gone
    labels = rt.backend.client.api.inspect_container(s.container_id)["Config"]["Labels"]
    # An owner on this host whose process is gone.
    dead_owner = {**labels, "caisson.owner": f"{socket.gethostname()}:999999:1"}
    assert reaper.reason_to_reap(dead_owner, "running", 0.0, 1.0) is None
    assert reaper.reason_to_reap({**dead_owner, "caisson.grace": ""}, "running", 0.0, 1.0) == "owner process is gone"
    # Every other session of the engine spared: it is shared (other runs, other tests' sessions).
    others = frozenset(
        row["Labels"].get(LABEL_SESSION, "") for row in rt.backend.client.api.containers(all=True, filters={"label": LABEL_SESSION})
    ) - {s.id}
    reaped = await anyio.to_thread.run_sync(lambda: reaper.collect(rt.backend.client, spare=others, all_owners=True))
    assert any(s.container_id.startswith(r.container) for r in reaped)
    assert not _exists(rt, s.container_id)
    await s.close()


def _gone_or_going(rt: Runtime, container_id: str) -> bool:
    try:
        return bool(rt.backend.client.api.inspect_container(container_id)["State"]["Status"] == "removing")  # type: ignore[attr-defined]
    except docker.errors.NotFound:
        return True


def _stop_daemon(rt: Runtime, container_id: str) -> None:
    """SIGSTOP the session's daemon from the host: a daemon that cannot end its session itself."""
    top = rt.backend.client.api.top(container_id)  # type: ignore[attr-defined]
    command = top["Titles"].index("CMD")
    pids = [int(row[top["Titles"].index("PID")]) for row in top["Processes"] if row[command].startswith("python3 -m sandbox")]
    assert len(pids) == 1, top["Processes"]
    os.kill(pids[0], signal.SIGSTOP)


async def test_next_runtime_reaps_a_session_past_its_ttl_that_did_not_end_itself(rt: Runtime, tmp_path: object) -> None:
    """A daemon ends its session at the TTL itself (the engine then removes the container), so
    the next runtime's gc is for a daemon that could not: here one stopped from the host."""
    # A TTL that outlasts the open on a slow engine (btrfs, a busy machine), then runs out.
    s = await rt.open_session(ttl=8, idle_timeout=None)
    try:
        cid = s.container_id
        await anyio.to_thread.run_sync(_stop_daemon, rt, cid)
        await anyio.sleep(9)  # past the TTL (its label is rounded to the second)
        assert _exists(rt, cid)  # nothing but a gc ends it now
        async with Runtime(RuntimeConfig(state_dir=str(tmp_path))):
            pass
        # Another runtime opening meanwhile (tests run side by side) may be removing it already:
        # the engine then answers "removal in progress", and the container goes a moment later.
        assert _gone_or_going(rt, cid)
    finally:
        await s.close()


async def test_a_session_past_its_ttl_ends_itself(rt: Runtime) -> None:
    s = await rt.open_session(ttl=4, idle_timeout=None)
    try:
        started = time.monotonic()
        # Generous: the engine's removal of a stopped container takes seconds on a loaded btrfs.
        while _exists(rt, s.container_id) and time.monotonic() - started < 60:
            await anyio.sleep(0.5)
        print(f"a session with a 4 s TTL: its container gone after {time.monotonic() - started:.1f} s")
        assert not _exists(rt, s.container_id)
    finally:
        await s.close()


async def test_reattach_after_controller_restart_keeps_task_output(rt: Runtime, tmp_path: object) -> None:
    first = Runtime(RuntimeConfig(state_dir=str(tmp_path), gc_on_start=False))
    await first.__aenter__()
    s = await first.open_session()
    task = await s.spawn("for i in 1 2 3; do echo $i; done; sleep 60")
    await anyio.sleep(0.5)
    # The controller goes away without closing the session (a restart).
    await s.channel.aclose()
    first._sessions.clear()
    await first.__aexit__(None, None, None)

    again = await rt.reattach(s.id)
    try:
        out = await again.task_read(task.task_id, wait=2)
        assert out.stdout == "1\n2\n3\n" and out.running
    finally:
        await again.close()
    assert not _exists(rt, s.container_id)
    with pytest.raises(SessionError):
        await rt.reattach(s.id)


async def test_idle_session_stops_itself(rt: Runtime) -> None:
    s = await rt.open_session(idle_timeout=1)
    try:
        deadline = time.monotonic() + 20
        while _exists(rt, s.container_id) and time.monotonic() < deadline:
            await anyio.sleep(0.5)
        assert not _exists(rt, s.container_id)
    finally:
        await s.close()


@pytest.mark.parametrize("transport", ["auto", "attach"])
async def test_a_session_that_ended_itself_says_why(tmp_path: object, transport: str) -> None:
    """The next call on a session whose daemon ended at its idle timeout or TTL says which,
    over the daemon's socket (where its stderr is no longer read) as over the attach stream."""
    config = RuntimeConfig(state_dir=str(tmp_path), gc_on_start=False, transport=transport)  # type: ignore[arg-type]
    async with Runtime(config) as runtime:
        for settings, expected in (({"idle_timeout": 1}, "idle_timeout"), ({"ttl": 2, "idle_timeout": None}, "ttl")):
            s = await runtime.open_session(**settings)
            try:
                deadline = time.monotonic() + 20
                while _exists(runtime, s.container_id) and time.monotonic() < deadline:
                    await anyio.sleep(0.2)
                with pytest.raises(SessionError) as gone:
                    await s.exec(["true"])
            finally:
                await s.close()
            print(f"{transport}: {gone.value}")
            assert "it exited because" in str(gone.value) and expected in str(gone.value), str(gone.value)


async def test_reattach_needs_the_sessions_tenant(rt: Runtime) -> None:
    s = await rt.open_session(tenant="tenant-a")
    try:
        await s.detach()
        for wrong in (None, "tenant-b"):
            with pytest.raises(SessionError) as refused:
                await rt.reattach(s.id, tenant=wrong)
            # The same answer as for a session that does not exist: no hint that it does.
            assert "has no running container of tenant" in str(refused.value)
        again = await rt.reattach(s.id, tenant="tenant-a")
        assert again.config.tenant == "tenant-a"
        assert (await again.exec("echo back")).stdout == "back\n"
    finally:
        if "again" in locals():
            await again.close()


async def test_a_watcher_started_after_a_death_still_hears_of_it(rt: Runtime) -> None:
    """The engine's death events are read from a point in time, so a server whose watcher
    starts late, or again after the engine's stream broke, misses none: the session of a
    container killed before the watcher began is reported, with the exit code."""
    heard: dict[str, str] = {}

    async def on_death(session_id: str, why: str, when: float) -> None:
        heard[session_id] = why

    async with rt.session() as s:
        before = time.time()
        rt.backend.client.containers.get(s.container_id).kill()
        await anyio.sleep(1)  # the death is over before anyone listens
        with anyio.move_on_after(15):
            async with anyio.create_task_group() as tg:
                tg.start_soon(rt.backend.watch_deaths, on_death, before)
                while s.id not in heard:
                    await anyio.sleep(0.05)
                tg.cancel_scope.cancel()
    assert "exit code 137" in heard.get(s.id, "nothing heard"), heard
