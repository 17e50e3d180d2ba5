"""Lease renewals keep pace with many sessions on a slow engine: each renewal is an engine
call that took up to seconds on a loaded host, and made one after another, 50 sessions'
renewals outlasted their grace, so idle sessions ended by themselves. The engine's slowness is
stood in (a real engine cannot be made slow on demand); the keeper is the real one. A renewal
never waits for an exec that does not end (a real one)."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from pathlib import Path

import anyio
import docker
import pytest

from caisson import Runtime, RuntimeConfig
from caisson.docker import lease
from caisson.errors import CaissonError

SESSIONS = 40
RENEWAL_SECONDS = 0.5  # one engine call on a loaded host
GRACE = 8.0


def test_every_lease_is_renewed_within_its_grace_with_a_slow_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    renewals: dict[str, list[float]] = {}
    lock = threading.Lock()

    def slow_renewal(client: object, container_id: str, *, gvisor: bool, pid: int) -> None:
        time.sleep(RENEWAL_SECONDS)
        with lock:
            renewals.setdefault(container_id, []).append(time.monotonic())

    monkeypatch.setattr(lease, "renew_lease", slow_renewal)
    leased = {f"c{i:02d}": (GRACE, False) for i in range(SESSIONS)}
    keeper = lease.LeaseKeeper(None, lambda: leased)  # type: ignore[arg-type]
    started = time.monotonic()
    keeper.start()
    time.sleep(2 * GRACE)
    keeper.stop()
    ended = time.monotonic()
    # The longest any session went without a renewal, from the keeper's start to its stop. Only
    # this keeper's: the patch is module-wide, so a runtime open in this process renews through it too.
    times = {c: renewals.get(c, []) for c in leased}
    worst = max(max(b - a for a, b in zip([started, *t], [*t, ended], strict=True)) for t in times.values())
    print(f"{SESSIONS} leases, {RENEWAL_SECONDS} s per renewal: longest without one {worst:.1f} s (grace {GRACE} s)")
    assert all(times.values())
    assert worst < GRACE


def test_a_renewal_the_engine_holds_up_delays_no_other_lease(monkeypatch: pytest.MonkeyPatch) -> None:
    """A wedged container's renewal waits out the engine client's timeout (60 s). Before, each
    round waited for all its renewals, so that one renewal stopped every other session's lease
    and idle sessions with a short grace ended while their controller lived."""
    renewals: dict[str, list[float]] = {}
    lock = threading.Lock()
    release = threading.Event()

    def renewal(client: object, container_id: str, *, gvisor: bool, pid: int) -> None:
        if container_id == "wedged":
            release.wait(60)
        with lock:
            renewals.setdefault(container_id, []).append(time.monotonic())

    monkeypatch.setattr(lease, "renew_lease", renewal)
    grace = 3.0
    leased = {"wedged": (grace, True), **{f"c{i}": (grace, False) for i in range(4)}}
    keeper = lease.LeaseKeeper(None, lambda: leased)  # type: ignore[arg-type]
    started = time.monotonic()
    keeper.start()
    time.sleep(4 * grace)
    release.set()
    keeper.stop()
    ended = time.monotonic()
    worst = max(
        max(b - a for a, b in zip([started, *renewals.get(c, [])], [*renewals.get(c, []), ended], strict=True))
        for c in leased if c != "wedged"
    )
    print(f"one renewal held up {4 * grace:g} s: the other leases' longest gap without a renewal {worst:.1f} s "
          f"(grace {grace:g} s)")
    assert worst < grace


@pytest.mark.anyio
async def test_a_renewal_never_waits_for_an_exec_that_does_not_end(rt: Runtime) -> None:
    """Where the lease is dated by an exec (gVisor, a full quota), an exec the engine never
    ended held its renewal forever (the engine client reads an exec's output with no timeout),
    and the runtime's close waited for it: a whole test run hung. Here ``touch`` never ends."""
    async with rt.session() as s:
        r = await s.exec("printf '#!/bin/sh\\nexec sleep 3600\\n' > /usr/bin/touch", user="root")
        assert r.exit_code == 0, r.stderr
        done = threading.Event()
        client = rt.backend.client  # type: ignore[attr-defined]

        def renew() -> None:
            lease.renew_lease(client, s.container_id, gvisor=True)
            done.set()

        started = time.monotonic()
        threading.Thread(target=renew, daemon=True).start()
        returned = await anyio.to_thread.run_sync(done.wait, 30)
        took = time.monotonic() - started
        hanging = (await s.exec("pgrep -c -f 'sleep 3600'", user="root")).stdout.strip()
        outcome = f"returned after {took:.1f} s" if returned else "STILL WAITING at 30 s"
        print(f"a renewal whose exec never ends: {outcome}; its exec still running: {hanging}")
        assert hanging == "1"  # the exec really does not end
        assert returned


class _StalledEngine:
    """An engine socket that takes connections and never answers: an engine held up by its
    storage (btrfs' cleaner, right after many sessions were removed, held a real one for over
    40 s). A real engine cannot be made to stall on demand."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.bind(path)
        self.sock.listen(64)
        self.held: list[socket.socket] = []
        threading.Thread(target=self._take, daemon=True).start()

    def _take(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                self.held.append(self.sock.accept()[0])

    def close(self) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()


@pytest.mark.anyio
async def test_a_local_session_keeps_its_lease_while_the_engine_stalls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, every renewal went through the engine: with the engine stalled past the grace,
    an idle session's daemon took its controller for gone and ended the session. Where the host
    reaches the container's root, the lease file is dated there, made there if missing. A runtime
    of its own, so every renewal that reaches the stalled engine is this session's."""
    engine = _StalledEngine(str(tmp_path / "engine.sock"))
    stalled = docker.DockerClient(base_url=f"unix://{engine.path}", version="1.41", timeout=30)
    grace = 3.0
    try:
        async with Runtime(RuntimeConfig(state_dir=str(tmp_path / "state"), gc_on_start=False)) as rt:
            monkeypatch.setattr(rt.backend._leases, "_client", stalled)  # type: ignore[attr-defined]
            async with rt.session(grace=grace) as s:
                await anyio.sleep(4 * grace)  # no calls: only the lease keeps the session
                try:
                    answer = (await s.exec(["echo", "alive"])).stdout
                except CaissonError as exc:
                    answer = f"no answer: {exc}"
                print(
                    f"engine stalled for {4 * grace:g} s (grace {grace:g} s): the idle session's answer "
                    f"{answer!r}; renewals that went to the engine: {len(engine.held)}"
                )
                assert answer == "alive\n"
                assert len(engine.held) == 0
    finally:
        stalled.close()
        engine.close()
