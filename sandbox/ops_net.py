"""The egress relay's inside end: a TCP listener on the container's loopback whose
connections the host takes over the channel, byte for byte.

The container has no network interface but ``lo``; the agent's programs reach the outside
only through this listener (their proxy settings point at it, and Landlock lets their
commands connect to its port alone). The daemon judges nothing: it hands each accepted
connection to the host (``net_accept``), which reads the proxy request (``net_read``),
decides, connects on its side and pipes the bytes (``net_write``, ``net_close``).

Every op waits at most ``wait`` seconds, so a host that gave up never strands a worker.
"""

import collections
import contextlib
import itertools
import select
import socket
import threading
from typing import Any, Callable, Deque, Dict, Optional

from .errors import DaemonError, Reply

# Connections accepted but not yet taken by the host; beyond it new ones are closed at once.
MAX_PENDING = 128
# Connections open at once, taken or not: the host enforces its own, smaller limit.
MAX_OPEN = 512
MAX_READ = 1 << 20
MAX_WAIT = 60.0
# A write the agent's program does not read for this long ends its connection.
WRITE_TIMEOUT = 120.0

# Ops that wait for the agent's programs: they do not keep an idle session alive.
PASSIVE = frozenset(("net_accept", "net_read", "net_write", "net_close"))

_lock = threading.Condition()
_listener: Optional[socket.socket] = None
_pending: Deque[int] = collections.deque()
_open: Dict[int, socket.socket] = {}
_ids = itertools.count(1)


def _wait(args: Dict[str, Any]) -> float:
    return min(args["wait"], MAX_WAIT)


def _accept_forever(listener: socket.socket) -> None:
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        with _lock:
            if len(_pending) >= MAX_PENDING or len(_open) >= MAX_OPEN:
                conn.close()
                continue
            conn_id = next(_ids)
            _open[conn_id] = conn
            _pending.append(conn_id)
            _lock.notify_all()


def op_net_listen(args: Dict[str, Any], blob: bytes) -> Reply:
    """Listen on 127.0.0.1:``port`` (once; a second call answers where it listens)."""
    global _listener
    port = args["port"]
    with _lock:
        if _listener is not None:
            return {"port": _listener.getsockname()[1]}, b""
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind(("127.0.0.1", port))
        listener.listen(64)
        _listener = listener
    threading.Thread(target=_accept_forever, args=(listener,), name="caisson-egress", daemon=True).start()
    return {"port": port}, b""


def op_net_accept(args: Dict[str, Any], blob: bytes) -> Reply:
    """The next accepted connection's id, or 0 when none came within ``wait`` seconds."""
    wait = _wait(args)
    with _lock:
        if not _pending:
            _lock.wait_for(lambda: bool(_pending), wait)
        return {"conn": _pending.popleft() if _pending else 0}, b""


def _conn(args: Dict[str, Any]) -> socket.socket:
    conn_id = args["conn"]
    with _lock:
        sock = _open.get(conn_id)
    if sock is None:
        raise DaemonError("not_found", "no egress connection %d" % conn_id)
    return sock


def op_net_read(args: Dict[str, Any], blob: bytes) -> Reply:
    """Up to ``max`` bytes the program sent; ``eof`` once it shut its side, ``idle`` when
    nothing came within ``wait`` seconds."""
    sock = _conn(args)
    size = min(args["max"], MAX_READ)
    try:
        ready, _, _ = select.select([sock], [], [], _wait(args))
        if not ready:
            return {"eof": False, "idle": True}, b""
        data = sock.recv(size)
    except (OSError, ValueError):  # reset by the program, or closed by net_close meanwhile
        return {"eof": True, "idle": False}, b""
    return {"eof": not data, "idle": False}, data


def op_net_write(args: Dict[str, Any], blob: bytes) -> Reply:
    """Send ``blob`` to the program whole; ``closed`` when it is gone or stopped reading."""
    sock = _conn(args)
    try:
        sock.settimeout(WRITE_TIMEOUT)
        sock.sendall(blob)
    except (OSError, ValueError):
        return {"closed": True}, b""
    return {"closed": False}, b""


def op_net_close(args: Dict[str, Any], blob: bytes) -> Reply:
    """``how`` "write": tell the program the far end is done sending; "both": forget it."""
    how = args["how"]
    conn_id = args["conn"]
    with _lock:
        sock = _open.get(conn_id) if how == "write" else _open.pop(conn_id, None)
    if sock is not None:
        # Shut, not closed: a read waiting on it in another worker wakes (end of file), and
        # the descriptor is closed when the last of them lets go, so its number cannot name
        # another file meanwhile.
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_WR if how == "write" else socket.SHUT_RDWR)
    return {}, b""


OPS: Dict[str, Callable[[Dict[str, Any], bytes], Reply]] = {
    "net_listen": op_net_listen,
    "net_accept": op_net_accept,
    "net_read": op_net_read,
    "net_write": op_net_write,
    "net_close": op_net_close,
}
