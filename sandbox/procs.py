"""Processes: ``exec`` (run to completion, capped output) and background tasks.

Every process is started in its own session and made a child subreaper, so
descendants that detach (setsid, double fork) stay in its tree; killing a tree
stops every member first (so nothing can fork away), then kills them all.

Three daemon threads serve all processes:

* the reaper waits for any child (ours, or orphans re-parented to the daemon)
  and records the exit status of the ones we started;
* the I/O loop (epoll) reads every stdout/stderr pipe into its stream buffer
  and runs timers (timeouts, and the short grace after a main process exited
  while a detached child still holds its pipes);
* request threads only start processes and wait on a condition variable.

A process is *finished* once its main process exited and its pipes reached EOF
(or the grace expired): only then is its output complete, and only then does
``running`` become false.
"""

import heapq
import itertools
import logging
import os
import select
import shlex
import shutil
import signal
import subprocess
import threading
import time
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Set, Tuple

from .errors import DaemonError, Reply, get, get_nonneg, get_seconds
from .fsops import MAX_BLOB, UserInfo, configure_agent, resolve_user

log = logging.getLogger("caisson.procs")

PR_SET_CHILD_SUBREAPER = 36
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# How long a finished main process may leave its pipes to detached children.
EXIT_GRACE = 0.05
READ_SIZE = 65536
# Bytes read from a pipe when the grace expires; a child that keeps writing does not stall the loop.
DRAIN_LIMIT = 4 * 1024 * 1024
DEFAULT_EXEC_CAP = 1024 * 1024
DEFAULT_OUTPUT_MAX = 8 * 1024 * 1024
MAX_OUTPUT_MAX = 1024 * 1024 * 1024


def _bind_prctl() -> Optional[Callable[..., int]]:
    """libc prctl bound once, so the child side of fork only makes a call (no import, no lookup)."""
    try:
        import ctypes

        func = ctypes.CDLL(None, use_errno=True).prctl
    except (ImportError, OSError, AttributeError):
        return None
    func.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    func.restype = ctypes.c_int
    return func  # type: ignore[no-any-return]


_prctl = _bind_prctl()


def set_subreaper() -> bool:
    """Make the calling process a child subreaper (orphans of its descendants come to it)."""
    if _prctl is None:
        return False
    return _prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0


# ---------------------------------------------------------------- configuration


class _Config:
    """Set by configure() at daemon start (from CAISSON_AGENT_USER, CAISSON_WORKSPACE)."""

    agent_user = "agent"
    workspace = "/workspace"
    shell = shutil.which("bash") or "/bin/sh"


config = _Config()
_env_cache: Dict[int, Dict[str, str]] = {}  # uid -> base environment
# The daemon's own start-up environment is the image's ENV; these are ours or the shell's, not the image's.
_ENV_DROP = ("PWD", "OLDPWD", "SHLVL", "_")


def configure(agent_user: str, workspace: str) -> None:
    config.agent_user = agent_user
    config.workspace = workspace
    config.shell = shutil.which("bash") or "/bin/sh"
    configure_agent(agent_user, workspace)
    _env_cache.clear()


def agent_identity() -> UserInfo:
    """The configured agent user; without a passwd entry, uid/gid 1000 (as images commonly use)."""
    return resolve_user(config.agent_user)


# Where this package was imported from: the host puts it on PYTHONPATH to start us,
# but agent code must not import our ``sandbox`` in place of its own.
_OWN_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _without_own_path(pythonpath: str) -> str:
    return os.pathsep.join(p for p in pythonpath.split(os.pathsep) if p and os.path.abspath(p) != _OWN_PARENT)


def _base_env(user: UserInfo) -> Dict[str, str]:
    env = _env_cache.get(user.uid)
    if env is None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CAISSON_") and k not in _ENV_DROP}
        if "PYTHONPATH" in env:
            env["PYTHONPATH"] = _without_own_path(env["PYTHONPATH"])
            if not env["PYTHONPATH"]:
                del env["PYTHONPATH"]
        env["HOME"] = user.home
        env["USER"] = user.name
        env["LOGNAME"] = user.name
        env.setdefault("PATH", DEFAULT_PATH)
        _env_cache[user.uid] = env
    return env


# ---------------------------------------------------------------- process trees


def _children_map() -> Dict[int, List[int]]:
    """ppid -> pids, from /proc/<pid>/stat."""
    kids: Dict[int, List[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            fd = os.open("/proc/%s/stat" % name, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            continue  # exited meanwhile
        try:
            data = os.read(fd, 1024)
        except OSError:
            continue
        finally:
            os.close(fd)
        # "pid (comm) state ppid ...": comm may contain spaces and parentheses.
        try:
            ppid = int(data[data.rindex(b")") + 2 :].split(None, 2)[1])
        except (ValueError, IndexError):
            continue
        kids.setdefault(ppid, []).append(int(name))
    return kids


def _tree(root: int, include_root: bool) -> Set[int]:
    kids = _children_map()
    found: Set[int] = set()
    todo = [root]
    while todo:
        pid = todo.pop()
        for child in kids.get(pid, ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    if include_root:
        found.add(root)
    found.discard(os.getpid())
    return found


def _send(pid: int, sig: int) -> bool:
    try:
        os.kill(pid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def kill_tree(root: int, include_root: bool = True) -> int:
    """SIGSTOP the whole tree (rescanning until no new member appears), then SIGKILL it.

    Stopping first means a member that forks cannot leave children behind. The
    caller guarantees ``root`` is not yet reaped, so its pid cannot be reused.
    """
    stopped: Set[int] = set()
    for _ in range(1000):  # bounded: every round stops all members it found
        new = _tree(root, include_root) - stopped
        if not new:
            break
        for pid in new:
            _send(pid, signal.SIGSTOP)
        stopped |= new
    return sum(_send(pid, signal.SIGKILL) for pid in stopped)


def signal_tree(root: int, sig: int) -> int:
    return sum(_send(pid, sig) for pid in _tree(root, True))


# ---------------------------------------------------------------- processes


class Spec(NamedTuple):
    argv: List[str]
    executable: Optional[str]
    display: str
    cwd: str
    env: Dict[str, str]
    user: UserInfo


class Stream:
    """Output of one pipe. ``ring``: keep the newest ``cap`` bytes; else keep the first ``cap``.

    ``start`` is the absolute offset of ``buf[0]`` (= bytes dropped), ``total`` all bytes seen.
    """

    __slots__ = ("buf", "start", "total", "cap", "ring", "fd")

    def __init__(self, cap: int, ring: bool) -> None:
        self.buf = bytearray()
        self.start = 0
        self.total = 0
        self.cap = cap
        self.ring = ring
        self.fd = -1  # read end while open; only the I/O loop closes it

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        if self.ring:
            self.buf += data
            excess = len(self.buf) - self.cap
            if excess > 0:
                del self.buf[:excess]  # cheap: bytearray deletes at the front in O(1)
                self.start += excess
        else:
            room = self.cap - len(self.buf)
            if room > 0:
                self.buf += data[:room]


class Proc:
    def __init__(self, spec: Spec, out: Stream, err: Stream, name: Optional[str] = None) -> None:
        self.spec = spec
        self.name = name
        self.task_id = ""
        self.cond = threading.Condition()
        self.out = out
        self.err = err
        self.pid = 0
        self.popen: Optional[subprocess.Popen] = None  # type: ignore[type-arg]
        self.stdin_fd = -1
        self.stdin_lock = threading.Lock()
        self.stdin_close_pending = False
        self.exited = False
        self.finished = False
        self.exit_code: Optional[int] = None
        self.signal: Optional[int] = None
        self.timed_out = False
        self.started = time.time()
        self.ended: Optional[float] = None
        self.t0 = time.monotonic()
        self.exit_t: Optional[float] = None
        self.timer: Optional[List[Any]] = None  # pending timeout, see IOLoop.call_at

    def status(self) -> Dict[str, Any]:
        """Caller holds ``cond``."""
        return {
            "running": not self.finished,
            "exit_code": self.exit_code,
            "signal": self.signal,
            "timed_out": self.timed_out,
        }

    def finish_locked(self) -> None:
        """Main process gone and output complete (caller holds ``cond``)."""
        if self.finished:
            return
        self.finished = True
        self.cond.notify_all()
        if self.timer is not None:
            self.timer[2] = None  # cancel the timeout
            self.timer = None
        # Flag first: a writer blocked in task_write holds the lock and closes stdin
        # when it returns; otherwise close it here.
        self.stdin_close_pending = True
        if self.stdin_lock.acquire(blocking=False):
            try:
                self.close_stdin_locked()
            finally:
                self.stdin_lock.release()

    def close_stdin_locked(self) -> None:
        """Caller holds ``stdin_lock``."""
        if self.stdin_fd >= 0:
            try:
                os.close(self.stdin_fd)
            except OSError:
                pass
            self.stdin_fd = -1

    def write_stdin(self, data: bytes, close: bool) -> int:
        """Blocking write of all of ``data``; io_error when the reader is gone."""
        try:
            with self.stdin_lock:
                if self.stdin_fd < 0:
                    if not data:
                        return 0
                    raise DaemonError("bad_request", "stdin is closed")
                written = 0
                try:
                    view = memoryview(data)
                    while written < len(data):
                        written += os.write(self.stdin_fd, view[written:])
                except BrokenPipeError:
                    raise DaemonError("io_error", "the process closed its stdin after %d bytes" % written) from None
                finally:
                    if close or self.stdin_close_pending:
                        self.close_stdin_locked()
                return written
        finally:
            if self.stdin_close_pending and self.stdin_fd >= 0:
                with self.stdin_lock:  # finish_locked found us writing and left it to us
                    self.close_stdin_locked()


class IOLoop:
    """One epoll thread reading every process pipe, plus a timer heap."""

    def __init__(self) -> None:
        self._ep = select.epoll()
        self._lock = threading.Lock()
        self._streams: Dict[int, Tuple[Proc, Stream]] = {}
        self._timers: List[List[Any]] = []  # [when, seq, callback or None]
        self._seq = itertools.count()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._ep.register(self._wake_r, select.EPOLLIN)
        self._thread = threading.Thread(target=self._run, name="caisson-io", daemon=True)
        self._thread.start()

    def add(self, proc: Proc) -> None:
        for stream in (proc.out, proc.err):
            with self._lock:
                self._streams[stream.fd] = (proc, stream)
            self._ep.register(stream.fd, select.EPOLLIN)

    def call_at(self, when: float, func: Callable[[], None]) -> List[Any]:
        """Run ``func`` in the loop thread at monotonic time ``when``.

        Returns the timer; setting its item 2 to None cancels it (and drops the
        references the callback holds, e.g. a finished process's output).
        """
        timer: List[Any] = [when, next(self._seq), func]
        with self._lock:
            heapq.heappush(self._timers, timer)
        try:
            os.write(self._wake_w, b"\0")
        except BlockingIOError:
            pass  # already plenty of wake-ups pending
        return timer

    def _run(self) -> None:
        while True:
            try:
                self._step()
            except Exception:  # never let the loop die: every process depends on it
                log.exception("I/O loop error")

    def _step(self) -> None:
        with self._lock:
            timeout = max(0.0, self._timers[0][0] - time.monotonic()) if self._timers else -1.0
        for fd, _ in self._ep.poll(timeout):
            if fd == self._wake_r:
                try:
                    os.read(self._wake_r, 4096)
                except BlockingIOError:
                    pass
                continue
            entry = self._streams.get(fd)
            if entry is not None:
                self._read(fd, entry[0], entry[1])
        now = time.monotonic()
        while True:
            with self._lock:
                if not self._timers or self._timers[0][0] > now:
                    break
                func = heapq.heappop(self._timers)[2]
            if func is None:
                continue  # cancelled
            try:
                func()
            except Exception:
                log.exception("timer failed")

    def _read(self, fd: int, proc: Proc, stream: Stream) -> int:
        """One read; returns the bytes read, 0 if none are ready, -1 at EOF (then the stream is closed)."""
        try:
            data = os.read(fd, READ_SIZE)
        except BlockingIOError:
            return 0
        except OSError:
            data = b""
        if data:
            with proc.cond:
                stream.feed(data)
                proc.cond.notify_all()
            return len(data)
        self._close(fd, proc, stream)
        return -1

    def _close(self, fd: int, proc: Proc, stream: Stream) -> None:
        with self._lock:
            self._streams.pop(fd, None)
        try:
            self._ep.unregister(fd)
        except (OSError, ValueError):
            pass
        os.close(fd)
        with proc.cond:
            stream.fd = -1
            if proc.exited and proc.out.fd < 0 and proc.err.fd < 0:
                proc.finish_locked()
            proc.cond.notify_all()

    def drain_and_close(self, proc: Proc) -> None:
        """Grace expired: take what the pipes hold now, then stop reading (timer, in this thread)."""
        for stream in (proc.out, proc.err):
            fd = stream.fd
            if fd < 0:
                continue
            budget = DRAIN_LIMIT
            while budget > 0:
                got = self._read(fd, proc, stream)
                if got <= 0:
                    break
                budget -= got
            if stream.fd >= 0:
                self._close(fd, proc, stream)


class ProcessTable:
    """Starts processes, reaps every child of the daemon, kills trees."""

    def __init__(self) -> None:
        # Held while forking and while reaping: a pid in ``live`` is never reaped
        # (so never reused) while someone holding this lock signals it.
        self.spawn_lock = threading.Lock()
        self.live: Dict[int, Proc] = {}
        self._have_children = threading.Event()
        self.loop = IOLoop()
        self.tasks: Dict[str, Proc] = {}
        self._task_ids = itertools.count(1)
        self._tasks_lock = threading.Lock()
        threading.Thread(target=self._reap, name="caisson-reaper", daemon=True).start()

    # -- starting

    def start(self, proc: Proc, stdin_pipe: bool, timeout: Optional[float]) -> None:
        spec = proc.spec
        preexec = _make_preexec(spec.user)
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        if stdin_pipe:
            in_r, in_w = os.pipe()
        else:
            in_r, in_w = subprocess.DEVNULL, -1
        child_ends = [out_w, err_w] + ([in_r] if stdin_pipe else [])
        os.set_blocking(out_r, False)
        os.set_blocking(err_r, False)
        # Set before the fork: the reaper may see the exit before this thread runs
        # again, and must know the pipes are still to be read.
        proc.out.fd = out_r
        proc.err.fd = err_r
        try:
            with self.spawn_lock:
                proc.t0 = time.monotonic()
                proc.started = time.time()
                popen = subprocess.Popen(
                    spec.argv,
                    executable=spec.executable,
                    stdin=in_r,
                    stdout=out_w,
                    stderr=err_w,
                    cwd=spec.cwd,
                    env=spec.env,
                    start_new_session=True,
                    preexec_fn=preexec,
                    close_fds=True,
                )
                proc.popen = popen
                proc.pid = popen.pid
                proc.stdin_fd = in_w
                self.live[popen.pid] = proc
                # Registered before the reaper (which needs this lock) can report the
                # exit, so the grace timer never sees pipes the loop does not know.
                self.loop.add(proc)
                self._have_children.set()
        except BaseException as exc:
            for fd in (out_r, err_r, in_w):
                if fd >= 0:
                    os.close(fd)
            proc.out.fd = proc.err.fd = -1
            if isinstance(exc, subprocess.SubprocessError):
                # Only setgroups/setgid/setuid can fail in the child (e.g. no CAP_SETUID).
                raise DaemonError("permission_denied", "cannot run as user %s (uid %d)" % (spec.user.name, spec.user.uid)) from None
            raise
        finally:
            for fd in child_ends:
                os.close(fd)
        if timeout is not None:
            timer = self.loop.call_at(proc.t0 + timeout, lambda: self._timed_out(proc))
            with proc.cond:
                if proc.finished:
                    timer[2] = None
                else:
                    proc.timer = timer

    # -- reaping

    def _reap(self) -> None:
        while True:
            self._have_children.clear()
            try:
                # WNOWAIT: learn the status but leave the zombie, so the pid stays
                # ours until it is reaped under spawn_lock below.
                info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOWAIT)
            except ChildProcessError:
                self._have_children.wait()
                continue
            except Exception:
                log.exception("waitid failed")
                time.sleep(0.1)
                continue
            if info is None:
                continue
            pid = info.si_pid
            if info.si_code == os.CLD_EXITED:
                code, sig = info.si_status, None  # type: Tuple[Optional[int], Optional[int]]
            else:
                code, sig = None, info.si_status
            with self.spawn_lock:
                proc = self.live.pop(pid, None)
                if proc is not None:
                    with proc.cond:
                        proc.exited = True
                        proc.exit_code = code
                        proc.signal = sig
                        proc.exit_t = time.monotonic()
                        proc.ended = time.time()
                    if proc.popen is not None:
                        # Popen must never wait for this pid itself: it may be reused later.
                        proc.popen.returncode = code if code is not None else -(sig or 0)
                try:
                    os.waitpid(pid, 0)
                except ChildProcessError:
                    pass  # Popen reaped a child whose exec failed
            if proc is not None:
                self._exited(proc)

    def _exited(self, proc: Proc) -> None:
        with proc.cond:
            if proc.out.fd < 0 and proc.err.fd < 0:
                proc.finish_locked()
                return
        # A detached child may hold the pipes: give them a moment, then stop reading.
        self.loop.call_at(time.monotonic() + EXIT_GRACE, lambda: self.loop.drain_and_close(proc))

    # -- signalling

    def _timed_out(self, proc: Proc) -> None:
        with self.spawn_lock:
            with proc.cond:
                if proc.exited:
                    return
                proc.timed_out = True
            log.info("pid %d timed out; killing its tree", proc.pid)
            kill_tree(proc.pid)

    def signal(self, proc: Proc, sig: int, tree: bool) -> int:
        with self.spawn_lock:
            with proc.cond:
                if proc.exited:
                    return 0
            if not tree:
                return int(_send(proc.pid, sig))
            if sig == signal.SIGKILL:
                return kill_tree(proc.pid)
            return signal_tree(proc.pid, sig)

    def kill_all(self) -> int:
        """Kill every descendant of the daemon (tasks, execs, adopted orphans)."""
        with self.spawn_lock:
            return kill_tree(os.getpid(), include_root=False)

    # -- tasks

    def add_task(self, proc: Proc) -> str:
        with self._tasks_lock:
            task_id = "t%d" % next(self._task_ids)
            proc.task_id = task_id
            self.tasks[task_id] = proc
        return task_id

    def task(self, args: Dict[str, Any]) -> Proc:
        task_id = get(args, "task_id", str)
        proc = self.tasks.get(task_id)
        if proc is None:
            raise DaemonError("no_such_task", "no such task: %s" % task_id)
        return proc


_table: Optional[ProcessTable] = None
_table_lock = threading.Lock()


def table() -> ProcessTable:
    global _table
    if _table is None:
        with _table_lock:
            if _table is None:
                _table = ProcessTable()
    return _table


def start() -> None:
    """Start the reaper and I/O threads now (orphans are reaped from the first moment)."""
    table()


def shutdown() -> int:
    if _table is None:
        return 0
    return _table.kill_all()


def _make_preexec(user: UserInfo) -> Callable[[], None]:
    """The function run between fork and exec: only pre-bound calls, no imports or lookups."""
    prctl = _prctl
    euid = os.geteuid()
    if user.uid != euid and euid != 0:
        raise DaemonError("permission_denied", "the daemon (uid %d) cannot run commands as uid %d" % (euid, user.uid))
    change_ids = euid == 0
    uid, gid, groups = user.uid, user.gid, list(user.groups)
    setgroups, setgid, setuid = os.setgroups, os.setgid, os.setuid

    def preexec() -> None:
        if prctl is not None:
            prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        if change_ids:
            setgroups(groups)
            setgid(gid)
            setuid(uid)

    return preexec


# ---------------------------------------------------------------- ops


def _parse_spec(args: Dict[str, Any]) -> Spec:
    argv = get(args, "argv", list, None)
    command = get(args, "command", str, None)
    if (argv is None) == (command is None):
        raise DaemonError("bad_request", "give exactly one of argv and command")
    executable = None
    if argv is not None:
        if not argv or not all(isinstance(a, str) for a in argv):
            raise DaemonError("bad_request", "argv must be a non-empty list of strings")
        display = shlex.join(argv)
    else:
        argv = [os.path.basename(config.shell), "-c", command]
        executable = config.shell
        display = command
    if any("\0" in a for a in argv):
        raise DaemonError("bad_request", "argv contains a NUL byte")
    cwd = get(args, "cwd", str, config.workspace)
    if not cwd.startswith("/"):
        raise DaemonError("bad_request", "cwd must be an absolute path")
    if not os.path.isdir(cwd):
        if os.path.lexists(cwd):
            raise DaemonError("not_a_directory", "cwd is not a directory: %s" % cwd)
        raise DaemonError("not_found", "cwd does not exist: %s" % cwd)
    user_arg = args.get("user")
    user = agent_identity() if user_arg is None else resolve_user(user_arg)
    env = _base_env(user)
    extra = get(args, "env", dict, None)
    if extra:
        env = dict(env)
        for key, value in extra.items():
            if not key or "=" in key or "\0" in key:
                raise DaemonError("bad_request", "bad environment variable name %r" % key)
            if value is None:
                env.pop(key, None)  # null unsets a variable of the base environment
            elif isinstance(value, str) and "\0" not in value:
                env[key] = value
            else:
                raise DaemonError("bad_request", "environment value of %s must be a string or null" % key)
    return Spec(argv, executable, display, cwd, env, user)


def op_exec(args: Dict[str, Any], blob: bytes) -> Reply:
    spec = _parse_spec(args)
    out_max = get_nonneg(args, "stdout_max", DEFAULT_EXEC_CAP, limit=MAX_BLOB)
    err_max = get_nonneg(args, "stderr_max", DEFAULT_EXEC_CAP, limit=MAX_BLOB)
    if out_max + err_max > MAX_BLOB:
        raise DaemonError("bad_request", "stdout_max + stderr_max exceeds %d" % MAX_BLOB)
    timeout = get_seconds(args, "timeout")
    proc = Proc(spec, Stream(out_max, ring=False), Stream(err_max, ring=False))
    table().start(proc, stdin_pipe=bool(blob), timeout=timeout)
    if blob:
        try:
            proc.write_stdin(blob, close=True)
        except DaemonError:
            pass  # the command did not read all of its stdin: its business
    with proc.cond:
        while not proc.finished:
            proc.cond.wait()
        out, err = proc.out, proc.err
        result = proc.status()
        del result["running"]
        result.update(
            stdout_len=len(out.buf),
            stdout_total=out.total,
            stderr_total=err.total,
            stdout_truncated=out.total > len(out.buf),
            stderr_truncated=err.total > len(err.buf),
            duration=round((proc.exit_t or time.monotonic()) - proc.t0, 6),
        )
        return result, bytes(out.buf + err.buf)


def op_spawn(args: Dict[str, Any], blob: bytes) -> Reply:
    spec = _parse_spec(args)
    timeout = get_seconds(args, "timeout")
    output_max = get_nonneg(args, "output_max", DEFAULT_OUTPUT_MAX, limit=MAX_OUTPUT_MAX)
    name = get(args, "name", str, None)
    keep_stdin = get(args, "stdin", bool, True)  # extension: false = stdin at EOF from the start
    proc = Proc(spec, Stream(output_max, ring=True), Stream(output_max, ring=True), name)
    tbl = table()
    tbl.start(proc, stdin_pipe=keep_stdin or bool(blob), timeout=timeout)
    task_id = tbl.add_task(proc)
    if blob:
        try:
            proc.write_stdin(blob, close=not keep_stdin)
        except DaemonError:
            pass  # exited without reading it all: the task (and its output) still exists
    return {"task_id": task_id, "pid": proc.pid}, b""


def _offset(args: Dict[str, Any], name: str, stream: Stream) -> int:
    offset = get_nonneg(args, name, 0)
    if offset > stream.total:
        raise DaemonError("bad_request", "%s %d is past the end of the output (%d)" % (name, offset, stream.total))
    return max(offset, stream.start)  # bytes before start were dropped


def _offsets(proc: Proc) -> Dict[str, Any]:
    return {
        "stdout_offset": proc.out.total,
        "stderr_offset": proc.err.total,
        "stdout_dropped": proc.out.start,
        "stderr_dropped": proc.err.start,
    }


def op_task_read(args: Dict[str, Any], blob: bytes) -> Reply:
    proc = table().task(args)
    max_bytes = get_nonneg(args, "max_bytes", 1024 * 1024, limit=MAX_BLOB)
    wait = get_seconds(args, "wait") or 0.0
    out, err = proc.out, proc.err
    with proc.cond:
        pos_out = _offset(args, "stdout_offset", out)
        pos_err = _offset(args, "stderr_offset", err)
        if wait > 0:
            deadline = time.monotonic() + wait
            while not proc.finished and out.total == pos_out and err.total == pos_err:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                proc.cond.wait(remaining)
            # Bytes may have been dropped while we waited.
            pos_out = max(pos_out, out.start)
            pos_err = max(pos_err, err.start)
        avail_out = out.total - pos_out
        avail_err = err.total - pos_err
        # Share max_bytes fairly, so a chatty stdout cannot starve stderr.
        take_out, take_err = avail_out, avail_err
        if avail_out + avail_err > max_bytes:
            half = max_bytes // 2
            if avail_out <= half:
                take_err = max_bytes - avail_out
            elif avail_err <= half:
                take_out = max_bytes - avail_err
            else:
                take_out, take_err = half, max_bytes - half
        data_out = out.buf[pos_out - out.start : pos_out - out.start + take_out]
        data_err = err.buf[pos_err - err.start : pos_err - err.start + take_err]
        result = proc.status()
        result.update(
            stdout_len=len(data_out),
            stdout_offset=pos_out + take_out,
            stderr_offset=pos_err + take_err,
            stdout_dropped=out.start,
            stderr_dropped=err.start,
        )
    return result, bytes(data_out + data_err)


def op_task_wait(args: Dict[str, Any], blob: bytes) -> Reply:
    proc = table().task(args)
    timeout = get_seconds(args, "timeout")
    with proc.cond:
        if timeout is None:
            while not proc.finished:
                proc.cond.wait()
        else:
            deadline = time.monotonic() + timeout
            while not proc.finished:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                proc.cond.wait(remaining)
        result = proc.status()
        result.update(_offsets(proc))
    return result, b""


def op_task_write(args: Dict[str, Any], blob: bytes) -> Reply:
    proc = table().task(args)
    close = get(args, "close", bool, False)
    return {"written": proc.write_stdin(blob, close)}, b""


def parse_signal(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and value.isdigit():
        number = int(value)
    elif isinstance(value, str):
        name = value.upper()
        if not name.startswith("SIG"):
            name = "SIG" + name
        sig = getattr(signal.Signals, name, None) if name.isidentifier() else None
        if sig is None:
            raise DaemonError("bad_request", "unknown signal %r" % value)
        return int(sig)
    else:
        raise DaemonError("bad_request", "signal must be a name or a number")
    if not 0 < number < signal.NSIG:
        raise DaemonError("bad_request", "signal %d out of range" % number)
    return number


def op_task_signal(args: Dict[str, Any], blob: bytes) -> Reply:
    tbl = table()
    proc = tbl.task(args)
    sig = parse_signal(args.get("signal", "KILL"))
    tree = get(args, "tree", bool, True)
    return {"signalled": tbl.signal(proc, sig, tree) > 0}, b""


def op_task_list(args: Dict[str, Any], blob: bytes) -> Reply:
    tbl = table()
    tasks = []
    for task_id, proc in list(tbl.tasks.items()):
        with proc.cond:
            entry = {"task_id": task_id, "pid": proc.pid, "name": proc.name, "command": proc.spec.display}
            entry.update(proc.status())
            entry.update(
                started=proc.started, ended=proc.ended, stdout_total=proc.out.total, stderr_total=proc.err.total
            )
        tasks.append(entry)
    return {"tasks": tasks}, b""


OPS: Dict[str, Callable[[Dict[str, Any], bytes], Reply]] = {
    "exec": op_exec,
    "spawn": op_spawn,
    "task_read": op_task_read,
    "task_write": op_task_write,
    "task_signal": op_task_signal,
    "task_wait": op_task_wait,
    "task_list": op_task_list,
}
