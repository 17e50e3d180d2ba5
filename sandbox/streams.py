"""Output buffers: what the daemon keeps of one stdout or stderr pipe."""

import os

# All output kept by ring streams (background tasks) at once: past it, the stream being fed
# keeps only its newest bytes, so many noisy tasks cannot push the daemon out of memory.
# The host sets it to a share of the container's memory limit.
RING_BUDGET = int(os.environ.get("CAISSON_OUTPUT_BUDGET", 256 * 1024 * 1024))
# What a stream keeps whatever the budget.
RING_FLOOR = 64 * 1024
_ring_kept = [0]  # fed by the I/O loop only


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
            _ring_kept[0] += len(data)
            limit = self.cap
            over = _ring_kept[0] - RING_BUDGET
            if over > 0:
                limit = min(limit, max(RING_FLOOR, len(self.buf) - over))
            excess = len(self.buf) - limit
            if excess > 0:
                del self.buf[:excess]  # cheap: bytearray deletes at the front in O(1)
                self.start += excess
                _ring_kept[0] -= excess
        else:
            room = self.cap - len(self.buf)
            if room > 0:
                self.buf += data[:room]

