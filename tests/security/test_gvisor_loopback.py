"""Loopback TCP under gVisor: a session without network keeps every command off TCP, as
Landlock does on runc. There is no Landlock under gVisor, so commands run under a seccomp
filter that refuses internet sockets (sandbox/seccomp.py); without it, a command at safe could
reach whatever listens on the container's loopback (another command's server, a database)
or listen itself.

Root runs a server on loopback that counts its connections; the agent, confined at each
level through the kernel alone (no classifier), tries to reach it and to listen, with several
programs. Landed: a connection the server counted, or a listening socket made.
"""

from __future__ import annotations

import pytest

from caisson import Runtime
from caisson.client.models import Confinement

pytestmark = pytest.mark.anyio

PORT = 8765
COUNT = "/run/loopback-hits"
SERVER = f"""
import os, socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", {PORT})); s.listen(64)
n = 0
print("listening", flush=True)
while True:
    c, _ = s.accept(); n += 1; c.close()
    # Replaced whole, so a reader never sees the file between truncation and write.
    open("{COUNT}.new", "w").write(str(n)); os.replace("{COUNT}.new", "{COUNT}")
"""
PY_CONNECT = f"import socket; socket.create_connection(('127.0.0.1', {PORT}), timeout=2); print('LANDED')"
ATTACKS = {
    "python connect": ["python3", "-c", PY_CONNECT],
    "python connect via localhost": [
        "python3", "-c", f"import socket; socket.create_connection(('localhost', {PORT}), timeout=2); print('LANDED')",
    ],
    "python ipv6 connect": [
        "python3", "-c",
        f"import socket; s = socket.socket(socket.AF_INET6); s.settimeout(2); s.connect(('::1', {PORT})); print('LANDED')",
    ],
    "python listen": [
        "python3", "-c", "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(); print('LANDED')",
    ],
    "python udp": [
        "python3", "-c",
        f"import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b'x', ('127.0.0.1', {PORT})); print('LANDED')",
    ],
    "python raw fd from os": [
        "python3", "-c",
        f"import os, socket; fd = socket.socket().detach(); s = socket.socket(fileno=fd); s.connect(('127.0.0.1', {PORT})); print('LANDED')",
    ],
    "bash /dev/tcp": ["bash", "-c", f"exec 3<>/dev/tcp/127.0.0.1/{PORT} && echo LANDED"],
    "perl IO::Socket": [
        "perl", "-MIO::Socket::INET", "-e", f"IO::Socket::INET->new(PeerAddr=>'127.0.0.1:{PORT}') and print 'LANDED'",
    ],
    "child of a background shell": ["bash", "-c", f"(python3 -c \"{PY_CONNECT}\" &) ; sleep 1"],
}


async def test_commands_of_a_session_without_network_cannot_use_loopback_tcp_under_gvisor(rt: Runtime) -> None:
    async with rt.session(gvisor=True) as s:
        await s.spawn(["python3", "-c", SERVER], user="root")
        # Control: once it listens, the server answers root.
        # The client may return before the server has counted it: wait for the count too.
        waited = (
            f"import os, time\nfor _ in range(100):\n  try:\n    {PY_CONNECT}\n    break\n  except OSError: time.sleep(0.1)"
            f"\nfor _ in range(100):\n  if os.path.exists('{COUNT}'): break\n  time.sleep(0.1)"
        )
        root = await s.exec(["python3", "-c", waited], user="root")
        assert "LANDED" in root.stdout, root
        hits_before = int((await s.read_file(COUNT)).decode())

        tried = landed = 0
        outputs = []
        for level in ("safe", "cautious", "dangerous"):
            agent = s.confined(Confinement(user=s.config.agent_user, level=level, write_roots=("/workspace", "/tmp")))
            for name, argv in ATTACKS.items():
                result = await agent.exec(argv, timeout=20)
                tried += 1
                if "LANDED" in result.stdout:
                    landed += 1
                    outputs.append((level, name, result.stdout, result.stderr[-200:]))
        hits = int((await s.read_file(COUNT)).decode()) - hits_before
        print(f"gVisor loopback TCP without network: tried {tried}, landed {landed} (server counted {hits} connections)", outputs)
        assert (landed, hits) == (0, 0), outputs

        # The filter refuses sockets, not the command: it still runs and says why.
        refused = await s.confined(Confinement(user=s.config.agent_user, level="safe")).exec(
            ["python3", "-c", PY_CONNECT], timeout=20
        )
        assert refused.exit_code != 0 and "Permission denied" in refused.stderr, refused
