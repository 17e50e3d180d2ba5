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
import itertools
import logging
import os
import queue
import signal
import threading
import time
from typing import Any, Dict, List, Optional

from . import landlock, memwatch, pidwatch, views
from .errors import DaemonError
from .ioloop import IOLoop
from .landlock import ruleset_for
from .process import Proc
from .proctree import kill_tree, kill_trees, send, settle, signal_tree
from .spawner import Spawner

log = logging.getLogger("caisson.proctable")

# How long a finished main process may leave its pipes to detached children.
EXIT_GRACE = 0.05

class ProcessTable:
    """Starts processes, reaps every child of the daemon, kills trees."""

    def __init__(self) -> None:
        # Held while spawning and while reaping: a pid in ``live`` is never reaped
        # (so never reused) while someone holding this lock signals it.
        self.spawn_lock = threading.Lock()
        # Kills waiting for the spawn lock: the first to get it kills them all (see _kill).
        self._kills: List[Proc] = []
        self._kills_lock = threading.Lock()
        # First, while the daemon has no other thread: the spawner is a fork of this process.
        self.spawner = Spawner(own_clones_only=os.environ.get("CAISSON_GVISOR") == "1")
        self.live: Dict[int, Proc] = {}
        self._have_children = threading.Event()
        self.loop = IOLoop()
        self.tasks: Dict[str, Proc] = {}
        self._task_ids = itertools.count(1)
        self._tasks_lock = threading.Lock()
        threading.Thread(target=self._reap, name="caisson-reaper", daemon=True).start()
        self._timeouts: queue.SimpleQueue[Proc] = queue.SimpleQueue()
        threading.Thread(target=self._kill_timed_out, name="caisson-timeouts", daemon=True).start()
        self._watching = False  # the resource watches of gVisor (memwatch, pidwatch) run
        # Set once what the first command would otherwise find out is done (see _warm_up).
        self.warm = threading.Event()
        threading.Thread(target=self._warm_up, name="caisson-warm", daemon=True).start()

    def _warm_up(self) -> None:
        """Before any command: whether the kernel honours CLONE_PARENT (under gVisor it does
        not: the watches start and clones are made ahead), and the safe view where there is no
        Landlock. Neither then waits on the first command's path, nor on a pooled session's."""
        try:
            with self.spawn_lock:
                with contextlib.suppress(OSError, DaemonError):  # the first command tries again
                    self.spawner.probe()
                self._watch_if_marked()
            if landlock.abi() == 0:
                views.usable()
        finally:
            self.warm.set()

    def _watch_if_marked(self) -> None:
        """Start gVisor's resource watches once the daemon is found to run there. The caller
        holds the spawn lock."""
        if self.spawner.marks and not self._watching:
            self._watching = True
            memwatch.start(self)
            pidwatch.start(self)

    # -- starting

    def start(self, proc: Proc, stdin_pipe: bool, timeout: Optional[float]) -> None:
        spec = proc.spec
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        in_r, in_w = os.pipe() if stdin_pipe else (-1, -1)
        ruleset = -1
        root = None
        os.set_blocking(out_r, False)
        os.set_blocking(err_r, False)
        # Set before the spawn: the reaper may see the exit before this thread runs
        # again, and must know the pipes are still to be read.
        proc.out.fd = out_r
        proc.err.fd = err_r
        try:
            if spec.confine is not None:
                ruleset, proc.confined = ruleset_for(spec.confine)
                if not proc.confined and views.usable():  # no Landlock here (gVisor)
                    root, proc.confined = views.view_for(spec.confine), True
            with self.spawn_lock:
                pidwatch.check(self.spawner)
                proc.t0 = time.monotonic()
                proc.started = time.time()
                proc.pid, proc.marker = self.spawner.spawn(spec, in_r, out_w, err_w, ruleset, root)
                self._watch_if_marked()
                proc.stdin_fd = in_w
                self.live[proc.pid] = proc
                # Registered before the reaper (which needs this lock) can report the
                # exit, so the grace timer never sees pipes the loop does not know.
                self.loop.add(proc)
                self._have_children.set()
        except BaseException:
            for fd in (out_r, err_r, in_w):
                if fd >= 0:
                    os.close(fd)
            proc.out.fd = proc.err.fd = -1
            raise
        finally:
            for fd in (out_w, err_w, in_r, ruleset):
                if fd >= 0:
                    os.close(fd)
        if timeout is not None:
            timer = self.loop.call_at(proc.t0 + timeout, lambda: self._timed_out(proc))
            with proc.cond:
                if proc.finished:
                    timer[2] = None
                else:
                    proc.timer = timer

    def replenish(self) -> None:
        with self.spawn_lock, contextlib.suppress(OSError):  # a dead spawner is restarted by the next spawn
            self.spawner.replenish()

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
                with contextlib.suppress(ChildProcessError):
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
        with proc.cond:
            if proc.exited:
                return
            proc.timed_out = True
        log.info("pid %d timed out; killing its tree", proc.pid)
        # Not on the I/O loop's thread: under gVisor a kill waits for its processes to go.
        self._timeouts.put(proc)

    def _kill_timed_out(self) -> None:
        """The thread that kills timed-out commands, started with the daemon: at a process
        limit (a fork bomb's) no thread could be started for it."""
        while True:
            procs = [self._timeouts.get()]
            with contextlib.suppress(queue.Empty):
                while True:
                    procs.append(self._timeouts.get_nowait())
            try:
                self._kill(procs)
            except Exception:
                log.exception("killing timed-out commands failed")

    def signal(self, proc: Proc, sig: int, tree: bool) -> int:
        if tree and sig == signal.SIGKILL:
            return self._kill([proc])
        with self.spawn_lock:
            with proc.cond:
                if proc.exited:
                    return 0
            if not tree:
                return int(send(proc.pid, sig))
            return signal_tree(proc.pid, sig, proc.marker)

    def _kill(self, procs: List[Proc]) -> int:
        """Kill their trees, and what escapes the kills (``settle``, without the spawn lock,
        so kills of many processes at once go on side by side); how many of their processes
        were killed. None finishes before that."""
        mine: List[Proc] = []
        for proc in procs:
            with proc.cond:
                if not proc.exited:
                    proc.settling += 1
                    mine.append(proc)
        try:
            with self._kills_lock:
                self._kills.extend(mine)
            with self.spawn_lock:
                # The kills asked for while another held the lock go in one pass: under gVisor
                # beside busy work each look at every process takes a few hundred ms.
                with self._kills_lock:
                    batch, self._kills = self._kills, []
                if batch:
                    # Exited is set under this lock: a root not yet exited is not yet reaped.
                    roots = [p for p in batch if not p.exited]
                    killed = kill_trees([(p.pid, p.marker) for p in roots])
                    for p in batch:
                        p.killed = p in roots and p.pid in killed
            return sum(int(p.killed) + settle(p.marker, self.spawn_lock) for p in mine)
        finally:
            for proc in mine:
                with proc.cond:
                    proc.settling -= 1
                    proc.finish_locked()

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
        task_id = args["task_id"]
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


# Longer than any warm-up seen (about 0.1 s under gVisor on a busy machine): a wait that ends
# without it only means the first command does the rest.
WARM_WAIT = 10.0


def wait_warm() -> None:
    """Until the daemon's warm-up is done (see ProcessTable._warm_up)."""
    table().warm.wait(WARM_WAIT)


def replenish() -> None:
    """Make clones ahead again: called once a reply is on its way, while the host reads it."""
    if _table is not None:
        _table.replenish()


def shutdown() -> int:
    if _table is None:
        return 0
    return _table.kill_all()

