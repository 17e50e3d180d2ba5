"""Output buffers: what the daemon keeps of one stdout or stderr pipe."""

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

