"""One started process: its state, its output streams and its stdin."""

import contextlib
import os
import threading
import time
from typing import Any, Dict, List, Optional

from .errors import DaemonError
from .spawn import Spec
from .streams import Stream


class Proc:
    def __init__(self, spec: Spec, out: Stream, err: Stream, name: Optional[str] = None) -> None:
        self.spec = spec
        self.name = name
        self.task_id = ""
        self.cond = threading.Condition()
        self.out = out
        self.err = err
        self.pid = 0
        self.marker: Optional[int] = None  # the group its processes carry (see Spawner.marks)
        self.stdin_fd = -1
        self.stdin_lock = threading.Lock()
        self.stdin_close_pending = False
        self.exited = False
        self.finished = False
        self.exit_code: Optional[int] = None
        self.signal: Optional[int] = None
        self.timed_out = False
        # Why a resource watch killed it (reclaim): "out_of_memory" or "process_limit".
        self.exhausted: Optional[str] = None
        self.confined: Optional[bool] = None  # asked to be confined: whether Landlock applies
        self.started = time.time()
        self.ended: Optional[float] = None
        self.t0 = time.monotonic()
        self.exit_t: Optional[float] = None
        self.timer: Optional[List[Any]] = None  # pending timeout, see IOLoop.call_at
        # Kills of its tree still killing what escaped them: until none, it is not finished
        # (its caller must not see it end while its processes live on).
        self.settling = 0
        self.killed = False  # by its last tree kill (see ProcessTable._kill)

    def status(self) -> Dict[str, Any]:
        """Caller holds ``cond``."""
        return {
            "running": not self.finished,
            "exit_code": self.exit_code,
            "signal": self.signal,
            "timed_out": self.timed_out,
            **({self.exhausted: True} if self.exhausted else {}),
        }

    def finish_locked(self) -> None:
        """Finished once its main process is gone, its output complete (both pipes closed) and
        no kill of its tree still settling; else nothing yet (caller holds ``cond``)."""
        if self.finished or not self.exited or self.out.fd >= 0 or self.err.fd >= 0 or self.settling:
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
            with contextlib.suppress(OSError):
                os.close(self.stdin_fd)
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

