"""The process table: starts processes, reaps every child of the daemon, times out and
signals process trees, keeps background tasks by id.

Three daemon threads serve all processes:

* the reaper waits for any child (ours, or orphans re-parented to the daemon)
  and records the exit status of the ones we started;
* the I/O loop (``ioloop``) reads every pipe and runs timers;
* request threads only start processes and wait on a condition variable.

A process is *finished* once its main process exited and its pipes reached EOF
(or the grace expired): only then is its output complete, and only then does
``running`` become false.
"""

import contextlib
import errno
import itertools
import logging
import os
import signal
import subprocess
import threading
import time
from typing import Any, Callable, Dict, Optional

from .errors import DaemonError, get
from .ioloop import IOLoop
from .landlock import ruleset_for
from .process import Proc
from .proctree import kill_tree, send, signal_tree
from .spawn import make_preexec

log = logging.getLogger("caisson.proctable")

# How long a finished main process may leave its pipes to detached children.
EXIT_GRACE = 0.05

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
        ruleset = -1
        if spec.confine is not None:
            ruleset, proc.confined = ruleset_for(spec.confine)
        try:
            preexec = make_preexec(spec.user, ruleset)
            self._start(proc, preexec, stdin_pipe, timeout)
        finally:
            if ruleset >= 0:
                os.close(ruleset)

    def _start(self, proc: Proc, preexec: Callable[[], None], stdin_pipe: bool, timeout: Optional[float]) -> None:
        spec = proc.spec
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
                what = "confined " if spec.confine is not None else ""
                raise DaemonError(
                    "permission_denied", "cannot run %sas user %s (uid %d)" % (what, spec.user.name, spec.user.uid)
                ) from None
            if isinstance(exc, FileNotFoundError):
                raise DaemonError("command_not_found", "no such command: %s" % spec.argv[0]) from None
            if isinstance(exc, OSError) and exc.errno in (errno.EACCES, errno.ENOEXEC, errno.EISDIR):
                raise DaemonError("not_executable", "not an executable file: %s" % spec.argv[0]) from None
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
            code: Optional[int] = None
            sig: Optional[int] = None
            if info.si_code == os.CLD_EXITED:
                code = info.si_status
            else:
                sig = info.si_status
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
                with contextlib.suppress(ChildProcessError):  # Popen reaped a child whose exec failed
                    os.waitpid(pid, 0)
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
                return int(send(proc.pid, sig))
            if sig == signal.SIGKILL:
                return kill_tree(proc.pid)
            return signal_tree(proc.pid, sig)

    def kill_all(self) -> int:
        """Kill every descendant of the daemon (tasks, execs, adopted orphans)."""
        with self.spawn_lock:
            return kill_tree(os.getpid(), include_root=False)

    # -- tasks

    def forget(self, proc: Proc) -> None:
        with self._tasks_lock:
            self.tasks.pop(proc.task_id, None)

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

