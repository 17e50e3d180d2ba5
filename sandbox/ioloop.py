"""The I/O loop: one epoll thread reading every process pipe into its stream, plus timers.

Timers run in the loop thread: timeouts, and the short grace after a main process
exited while a detached child still holds its pipes.
"""

import contextlib
import heapq
import itertools
import logging
import os
import select
import threading
import time
from typing import Any, Callable, Dict, List, Tuple

from .process import Proc
from .streams import Stream

log = logging.getLogger("caisson.ioloop")

READ_SIZE = 65536
# Bytes read from a pipe when the grace expires; a child that keeps writing does not stall the loop.
DRAIN_LIMIT = 4 * 1024 * 1024

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
            first = self._timers[0] is timer
        if first:  # else the loop wakes for an earlier timer and looks again then
            with contextlib.suppress(BlockingIOError):  # else plenty of wake-ups are pending
                os.write(self._wake_w, b"\0")
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
                with contextlib.suppress(BlockingIOError):
                    os.read(self._wake_r, 4096)
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
        with contextlib.suppress(OSError, ValueError):
            self._ep.unregister(fd)
        os.close(fd)
        with proc.cond:
            stream.fd = -1
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

