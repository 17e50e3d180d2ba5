"""The daemon's unix socket (the local fast path) is the host's alone.

Attacked from three sides: the agent, with every approval granted; root inside the
container (what a compromised daemon would be), connecting itself; and root inside the
container planting a link where the host looks for the socket, to point the host at a socket
of the attacker's choosing. Each attack is counted, the count printed, and none may land."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import socket
import struct
from pathlib import Path

import anyio
import pytest

from caisson import Runtime
from caisson._sandbox.protocol import SOCKET_PATH, encode_frame
from caisson.errors import DaemonProtocolError
from caisson.policy import ApprovalAnswer, ApprovalRequest
from caisson.transport import unix
from caisson.transport.unix import UnixStream

pytestmark = pytest.mark.anyio

PING = encode_frame({"id": 7, "op": "ping", "args": {}})

# Connects to the socket at argv[1], sends a ping frame, prints what came of it; the words
# are assembled so that the script's own text (echoed in a tool's reply) never matches.
PROBE = (
    "import socket,sys\n"
    "s=socket.socket(socket.AF_UNIX)\n"
    "s.settimeout(3)\n"
    "try:\n"
    "    s.connect(sys.argv[1]); print('CONN'+'ECTED')\n"
    "    s.sendall(bytes.fromhex(sys.argv[2]))\n"
    "    print('ANS'+'WERED' if s.recv(4096) else 'closed')\n"
    "except Exception as e:\n"
    "    print('failed', type(e).__name__, e)\n"
)


async def approve(request: ApprovalRequest) -> ApprovalAnswer:
    return ApprovalAnswer.allow_once(approver="test")


def _probe_command(path: str) -> str:
    return f"python3 -c {json.dumps(PROBE)} {json.dumps(path)} {PING.hex()}"


async def test_session_frames_go_over_the_socket(rt: Runtime) -> None:
    async with rt.session() as s:
        assert isinstance(s.channel.transport, UnixStream)
        assert (await s.exec(["echo", "fast"])).stdout == "fast\n"


async def test_agent_cannot_use_the_daemon_socket(rt: Runtime) -> None:
    async with rt.session(approval_handler=approve) as s:
        pid = (await s.ping()).pid
        targets = {
            "the socket by its path": SOCKET_PATH,
            "the socket through the daemon's root": f"/proc/{pid}/root{SOCKET_PATH}",
            "the socket through pid 1's root": f"/proc/1/root{SOCKET_PATH}",
            "the socket through the daemon's cwd": f"/proc/{pid}/cwd{SOCKET_PATH}",
            "an abstract socket of the same name": "\0" + SOCKET_PATH,
        }
        landed = []
        for name, path in targets.items():
            r = await s.call("bash", {"command": _probe_command(path), "timeout": 20})
            assert r.decision in ("approved", "allow", "warn"), (name, r.text)
            if "ANSWERED" in r.text:
                landed.append(name)
        # Whatever /proc/net/unix names, tried too.
        listed = await s.call("bash", {"command": "cut -d' ' -f8 /proc/net/unix | grep / | sort -u", "timeout": 10})
        for path in listed.text.split():
            if path.startswith("/"):
                r = await s.call("bash", {"command": _probe_command(path), "timeout": 20})
                targets[f"listed {path}"] = path
                if "ANSWERED" in r.text:
                    landed.append(f"listed {path}")
        print(f"{len(targets)} connections to the daemon's socket tried as the agent, {len(landed)} answered: {landed}")
        assert landed == []
        assert (await s.exec(["echo", "alive"])).stdout == "alive\n"


async def test_root_in_the_container_is_refused(rt: Runtime) -> None:
    async with rt.session() as s:
        container = rt.client.containers.get(s.container_id)
        answered = 0
        tries = 20
        for _ in range(tries):
            code, out = await anyio.to_thread.run_sync(
                lambda: container.exec_run(["python3", "-c", PROBE, SOCKET_PATH, PING.hex()], user="0")
            )
            answered += b"ANSWERED" in out
            assert b"CONNECTED" in out, out  # it connected: the refusal is the daemon's
        print(f"{tries} pings to the daemon's socket from root inside the container, {answered} answered")
        assert answered == 0
        assert (await s.exec(["echo", "alive"])).stdout == "alive\n"


def _evil_listener(directory: Path) -> socket.socket:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(directory / "evil.sock"))
    os.chmod(directory / "evil.sock", 0o666)
    listener.listen(8)
    listener.setblocking(False)
    return listener


def _accepted(listener: socket.socket) -> int:
    count = 0
    while True:
        try:
            conn, _ = listener.accept()
        except BlockingIOError:
            return count
        conn.close()
        count += 1


async def test_host_never_follows_a_planted_socket(rt: Runtime, tmp_path: Path) -> None:
    """Root in the container swaps what the host looks for; the host must not end up on a
    socket outside the container's own root file system (here one it mounted from the host,
    standing for the engine's socket)."""
    evil_dir = tmp_path / "evil"
    evil_dir.mkdir()
    listener = _evil_listener(evil_dir)
    plants = {
        "the socket replaced by a link": f"rm -f {SOCKET_PATH} && ln -s /evil/evil.sock {SOCKET_PATH}",
        "its directory replaced by a link": "rm -rf /run/caisson && ln -s /evil /run/caisson && ln -sf evil.sock /evil/daemon.sock",
        "a relative link": f"rm -rf /run/caisson && mkdir -m 700 /run/caisson && ln -s ../../evil/evil.sock {SOCKET_PATH}",
        "a hard link from the mount": f"rm -rf /run/caisson && mkdir -m 700 /run/caisson && ln /evil/evil.sock {SOCKET_PATH}",
    }
    landed = []
    try:
        for name, plant in plants.items():
            s = await rt.open_session(mounts={str(evil_dir): "/evil"})
            try:
                container = rt.client.containers.get(s.container_id)
                await anyio.to_thread.run_sync(functools.partial(container.exec_run, ["sh", "-c", plant], user="0"))
                pid = int(container.attrs["State"]["Pid"])
                connected = None
                with contextlib.suppress(DaemonProtocolError):
                    connected = unix.try_connect(pid)
                if connected is not None:
                    connected.close()
                # Reattaching looks for the socket again: it must fall back to the attach stream.
                await s.channel.aclose()
                s = await rt.reattach(s.id)
                assert not isinstance(s.channel.transport, UnixStream)
                assert (await s.exec(["echo", "still"])).stdout == "still\n"
            finally:
                await s.close()
            if _accepted(listener) or connected is not None:
                landed.append(name)
    finally:
        listener.close()
    print(f"{len(plants)} planted sockets, {len(landed)} reached by the host: {landed}")
    assert landed == []


def test_refusal_is_for_peers_inside_the_pid_namespace() -> None:
    """The check the daemon makes: the host's pid is not visible in the container (0)."""
    from caisson._sandbox.listen import from_outside

    a, b = socket.socketpair(socket.AF_UNIX)
    try:
        assert not from_outside(a)  # same namespace: a pid is visible
        pid, _, _ = struct.unpack("3i", a.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
        assert pid == os.getpid()
    finally:
        a.close()
        b.close()
