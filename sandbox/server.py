"""The daemon: request frames in, replies out, in any order: on stdin and stdout (the
attach stream), or on a connection to its unix socket (``listen.py``, CAISSON_LISTEN=1).

The main thread only reads and decodes frames; each request runs on a worker
thread (an elastic pool: idle workers are reused, new ones started on demand,
so a long-poll never starves other requests). Replies are written whole, one
frame at a time, under a lock. Logs go to stderr; stdout carries frames only.
"""

import collections
import logging
import os
import signal
import struct
import sys
import threading
import time
from typing import Any, Callable, Deque, Dict, Optional, Set, Tuple

from . import (
    __version__,
    cancel,
    listen,
    ops_dirs,
    ops_files,
    ops_info,
    ops_net,
    ops_process,
    ops_write,
    opspec,
    proctable,
    search,
    spawn,
    statx_compat,
)
from .errors import DaemonError, from_oserror
from .protocol import DEFAULT_MAX_FRAME, DEFAULT_MAX_HEADER, PROTOCOL_VERSION, FrameDecoder, ProtocolError, encode_frame
from .syscalls import set_subreaper

# Re-exported so op modules and tests can import the error type from here too.
__all__ = ["DaemonError", "Server", "build_ops", "main"]

log = logging.getLogger("caisson")

Handler = Callable[[Dict[str, Any], bytes], Tuple[Dict[str, Any], bytes]]


def build_ops() -> Dict[str, Handler]:
    """Merge the op tables of all op modules; adding an op is one line in its module and
    its declaration in ``opspec``."""
    ops: Dict[str, Handler] = {}
    for module in (ops_info, ops_files, ops_dirs, ops_write, ops_process, ops_net, search, cancel):
        for name, handler in module.OPS.items():
            if name in ops:
                raise RuntimeError("op %r registered twice" % name)
            ops[name] = handler
    if set(ops) != set(opspec.SPEC):
        raise RuntimeError("ops without a declaration, or declared without a handler: %s"
                           % sorted(set(ops) ^ set(opspec.SPEC)))
    return ops


class WorkerPool:
    """Threads started on demand, reused while idle, gone after ``idle_seconds`` unused.

    Unbounded on purpose: a fixed pool full of long-polls (task_read wait) could
    deadlock against the request that would wake them. Idle threads expire
    because threads count against the container's pids limit.
    """

    def __init__(self, idle_seconds: float = 30.0) -> None:
        self._cond = threading.Condition()
        self._jobs: Deque[Tuple[Callable[..., None], Tuple[Any, ...]]] = collections.deque()
        self._idle = 0  # waiting workers not yet promised a job
        self._idle_seconds = idle_seconds

    def submit(self, func: Callable[..., None], *args: Any) -> None:
        with self._cond:
            if self._idle > 0:
                self._idle -= 1
                self._jobs.append((func, args))
                self._cond.notify()
                return
        threading.Thread(target=self._work, args=((func, args),), name="caisson-op", daemon=True).start()

    def _work(self, job: Tuple[Callable[..., None], Tuple[Any, ...]]) -> None:
        while True:
            func, args = job
            try:
                func(*args)
            except BaseException:
                log.exception("worker job failed")
            del func, args, job  # drop request data while idle
            with self._cond:
                self._idle += 1
                deadline = time.monotonic() + self._idle_seconds
                while not self._jobs:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        self._idle -= 1
                        return
                    self._cond.wait(remaining)
                job = self._jobs.popleft()


def _scrub(value: Any) -> Any:
    """Make strings UTF-8 encodable (lone surrogates from undecodable file names become U+FFFD)."""
    if isinstance(value, str):
        try:
            raw = value.encode("utf-8", "surrogateescape")  # the file name's original bytes
        except UnicodeEncodeError:
            raw = value.encode("utf-8", "surrogatepass")  # other lone surrogates
        return raw.decode("utf-8", "replace")
    if isinstance(value, dict):
        return {_scrub(k): _scrub(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub(v) for v in value]
    return value


def _error(req_id: int, code: str, message: str) -> Dict[str, Any]:
    return {"id": req_id, "ok": False, "error": {"code": code, "message": message}}


class Watchdog:
    """Ends the daemon at its deadline (CAISSON_EXPIRES, unix time) or after
    CAISSON_IDLE_TIMEOUT seconds without requests, so a container outlives no
    one's deadline even when every controller and reaper is gone.

    Idle means no request received or in flight; background tasks do not count.
    """

    def __init__(
        self, expires: Optional[float], idle_timeout: Optional[float], grace: Optional[float] = None, lease: str = ""
    ) -> None:
        self.expires = expires
        self.idle_timeout = idle_timeout
        # A controller renews the lease file (or sends requests) while it lives; ``grace``
        # seconds after the last sign of one, nobody is coming back and the session ends.
        self.grace = grace
        self.lease = lease
        self.last_seen = time.time()
        self.last_activity = time.monotonic()
        self._inflight = 0
        self._lock = threading.Lock()

    def begin(self) -> None:
        with self._lock:
            self._inflight += 1
            self.last_activity = time.monotonic()
            self.last_seen = time.time()

    def end(self) -> None:
        with self._lock:
            self._inflight -= 1
            self.last_activity = time.monotonic()

    def _controller_seen(self) -> float:
        try:
            renewed = os.stat(self.lease).st_mtime if self.lease else 0.0
        except OSError:
            renewed = 0.0
        with self._lock:
            return max(self.last_seen, renewed)

    def start(self) -> None:
        if self.expires is not None or self.idle_timeout is not None or self.grace is not None:
            threading.Thread(target=self._run, name="caisson-watchdog", daemon=True).start()

    def _run(self) -> None:
        while True:
            now_wall, now = time.time(), time.monotonic()
            wait = 3600.0
            if self.expires is not None:
                if now_wall >= self.expires:
                    log.info("session expired; exiting")
                    shutdown(0, "the session expired (its ttl passed)")
                wait = min(wait, self.expires - now_wall)
            if self.idle_timeout is not None:
                with self._lock:
                    idle_for = 0.0 if self._inflight else now - self.last_activity
                if idle_for >= self.idle_timeout:
                    log.info("idle for %.1f s; exiting", idle_for)
                    shutdown(0, "the session was idle for %.1f s (its idle_timeout)" % idle_for)
                wait = min(wait, self.idle_timeout - idle_for)
            if self.grace is not None:
                gone_for = now_wall - self._controller_seen()
                if gone_for >= self.grace:
                    log.info("no controller for %.1f s; exiting", gone_for)
                    shutdown(0, "no controller was seen for %.1f s (its grace)" % gone_for)
                wait = min(wait, 1.0)
            time.sleep(max(wait, 0.05))  # a timer thread, off every request's path


def _env_float(name: str) -> Optional[float]:
    value = os.environ.get(name)
    if not value:
        return None
    try:
        number = float(value)
    except ValueError:
        log.warning("ignoring %s=%r: not a number", name, value)
        return None
    return number if number > 0 else None


class Server:
    def __init__(
        self,
        in_fd: int,
        out_fd: int,
        ops: Dict[str, Handler],
        watchdog: Optional[Watchdog] = None,
        *,
        exit_when_unheard: bool = True,
    ) -> None:
        self.in_fd = in_fd
        self.out_fd = out_fd
        self.ops = ops
        self.pool = WorkerPool()
        self.watchdog = watchdog or Watchdog(None, None)
        # On stdin, a reply that cannot be written means the host is gone for good; on the
        # socket, only this connection is (another controller may connect).
        self.exit_when_unheard = exit_when_unheard
        self._write_lock = threading.Lock()
        self._dead = False
        with _servers_lock:
            _servers.add(self)

    def retire(self) -> None:
        """Write nothing more: the caller is about to close the descriptor, whose number
        may then name another file."""
        with self._write_lock:
            self._dead = True
        with _servers_lock:
            _servers.discard(self)

    def farewell(self, reason: str) -> None:
        """Tell this connection's controller why the daemon exits (an ``exit`` event, id 0),
        so that the host can say so once it finds the stream gone. Never blocks the exit: a
        host that reads nothing, or a lock held by the thread a signal interrupted, is skipped."""
        # Dead first, unlocked: a reply that failed holds the lock while it calls shutdown.
        if self._dead or not self._write_lock.acquire(timeout=FAREWELL_WAIT):
            return
        try:
            if self._dead:
                return
            frame = encode_frame({"id": 0, "event": "exit", "data": {"reason": reason}})
            os.set_blocking(self.out_fd, False)
            os.write(self.out_fd, frame)  # a small frame goes whole or not at all
        except OSError:
            pass
        finally:
            self._write_lock.release()

    def reply(self, header: Dict[str, Any], blob: bytes = b"") -> None:
        try:
            try:
                frame = encode_frame(header, blob)
            except UnicodeEncodeError:
                frame = encode_frame(_scrub(header), blob)
        except (TypeError, ValueError) as exc:
            log.exception("unencodable reply")
            frame = encode_frame(_error(header["id"], "internal", "unencodable reply: %s" % exc))
        # A frame the host refuses would kill the whole session: refuse the call instead.
        (head_len,) = struct.unpack_from(">I", frame, 4)
        if len(frame) - 4 > DEFAULT_MAX_FRAME or head_len > DEFAULT_MAX_HEADER:
            message = "reply of %d bytes (header %d) exceeds the frame limits" % (len(frame), head_len)
            frame = encode_frame(_error(header["id"], "too_large", message))
        view = memoryview(frame)
        with self._write_lock:
            if self._dead:
                return
            try:
                while view:
                    view = view[os.write(self.out_fd, view) :]
            except OSError as exc:
                # Nobody reads our replies any more.
                self._dead = True
                if self.exit_when_unheard:
                    log.error("cannot write replies (%s); shutting down", exc)
                    shutdown(1)
                log.warning("cannot write replies (%s); waiting for another controller", exc)

    def handle(self, req_id: int, op: str, args: Dict[str, Any], blob: bytes) -> None:
        cancel.begin(req_id)
        try:
            self._handle(req_id, op, args, blob)
        finally:
            cancel.end()
            if op not in ops_net.PASSIVE:
                self.watchdog.end()

    def _handle(self, req_id: int, op: str, args: Dict[str, Any], blob: bytes) -> None:
        out = b""
        try:
            # Checked against the op's declaration; the handler gets every argument, defaults filled in.
            args = opspec.parse(op, args)
            result, out = self.ops[op](args, blob)
            header: Dict[str, Any] = {"id": req_id, "ok": True, "result": result}
        except DaemonError as exc:
            header = _error(req_id, exc.code, exc.message)
        except OSError as exc:
            err = from_oserror(exc)
            header = _error(req_id, err.code, err.message)
        except ValueError as exc:  # e.g. "embedded null byte" from the os module
            header = _error(req_id, "bad_request", str(exc))
        except Exception as exc:
            log.exception("op %s failed", op)
            header = _error(req_id, "internal", "%s: %s" % (type(exc).__name__, exc))
        if not header.get("ok"):
            out = b""
        self.reply(header, out)
        proctable.replenish()

    def serve(self) -> int:
        """Read frames until EOF (0) or a malformed frame (2)."""
        decoder = FrameDecoder()
        while True:
            try:
                data = os.read(self.in_fd, 1 << 20)
            except OSError as exc:
                log.error("cannot read requests: %s", exc)
                return 1
            if not data:
                log.info("the controller's stream ended")
                return 0
            try:
                frames = decoder.feed(data)
            except ProtocolError as exc:
                log.error("protocol error, giving up: %s", exc)
                return 2
            for header, blob in frames:
                req_id = header.get("id")
                if not isinstance(req_id, int) or isinstance(req_id, bool):
                    log.error("protocol error, giving up: request without an integer id")
                    return 2
                op = header.get("op")
                args = header.get("args")
                if args is None:
                    args = {}
                if not isinstance(op, str) or not isinstance(args, dict):
                    self.reply(_error(req_id, "bad_request", "a request needs a string op and object args"))
                    continue
                # Relayed bytes wait on the agent's programs: not a sign of a controller at work.
                if op not in ops_net.PASSIVE:
                    self.watchdog.begin()
                try:
                    self.pool.submit(self.handle, req_id, op, args, blob)
                except RuntimeError:
                    # Cannot start a thread (pids limit): serve it here rather than drop it.
                    self.handle(req_id, op, args, blob)


_shutdown_lock = threading.Lock()
# Every connection's server, told why the daemon exits (Server.farewell).
_servers: Set["Server"] = set()
_servers_lock = threading.Lock()
FAREWELL_WAIT = 0.2


def shutdown(code: int, reason: str = "") -> None:
    """Tell each controller why (``reason``), kill every process we started (and their
    orphans), drop staging files, exit."""
    with _shutdown_lock:
        with _servers_lock:
            servers = list(_servers)
        for server in servers:
            server.farewell(reason or "it exited with status %d" % code)
        try:
            killed = proctable.shutdown()
            ops_write.discard_uploads()
            log.info("exit %d (killed %d processes)", code, killed)
        except BaseException:
            log.exception("shutdown failed")
        finally:
            logging.shutdown()
            os._exit(code)


def _prepare_workspace() -> None:
    workspace = spawn.config.workspace
    if os.path.isdir(workspace):
        return
    try:
        os.makedirs(workspace, 0o755, exist_ok=True)
        if os.geteuid() == 0:
            agent = spawn.agent_identity()
            os.chown(workspace, agent.uid, agent.gid)
    except OSError as exc:
        log.warning("cannot create workspace %s: %s", workspace, exc)


def main() -> int:
    logging.basicConfig(
        stream=sys.stderr,
        level=os.environ.get("CAISSON_LOG_LEVEL", "INFO").upper(),
        format="%(asctime)s caisson-sandbox[%(process)d] %(levelname)s %(message)s",
    )
    # Frames own the original stdin/stdout: keep private copies and point fds 0
    # and 1 elsewhere, so no stray print or library write can corrupt the stream.
    in_fd = os.dup(0)
    out_fd = os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)

    # An unprivileged daemon cannot switch users: by default it runs commands as itself.
    default_user = "agent" if os.geteuid() == 0 else str(os.geteuid())
    spawn.configure(
        os.environ.get("CAISSON_AGENT_USER") or default_user,
        os.environ.get("CAISSON_WORKSPACE") or "/workspace",
    )
    if not set_subreaper():
        log.warning("cannot become a child subreaper; detached processes escape to init")
    if statx_compat.install():
        log.info("statx-compat preloaded: this kernel refuses statx's AT_NO_AUTOMOUNT")
    _prepare_workspace()
    proctable.start()
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(
            signum, lambda num, frame: shutdown(128 + num, "it was stopped by %s" % signal.Signals(num).name)
        )

    ops = build_ops()
    log.info(
        "caisson sandbox %s (protocol %d) pid %d uid %d, agent user %s, workspace %s, %d ops",
        __version__,
        PROTOCOL_VERSION,
        os.getpid(),
        os.getuid(),
        spawn.config.agent_user,
        spawn.config.workspace,
        len(ops),
    )
    watchdog = Watchdog(
        _env_float("CAISSON_EXPIRES"),
        _env_float("CAISSON_IDLE_TIMEOUT"),
        _env_float("CAISSON_GRACE"),
        os.environ.get("CAISSON_LEASE", ""),
    )
    watchdog.start()
    if os.environ.get("CAISSON_LISTEN") == "1":
        # The socket is the fast way in; stdin still serves a host that cannot reach it.
        listener = listen.bind()

        def serve_connection(fd: int) -> None:
            server = Server(fd, fd, ops, watchdog, exit_when_unheard=False)
            try:
                server.serve()
            finally:
                server.retire()

        threading.Thread(
            target=listen.accept_forever, args=(listener, serve_connection), name="caisson-listen", daemon=True
        ).start()
    code = Server(in_fd, out_fd, ops, watchdog).serve()
    shutdown(code)
    return code
