"""Framed RPC client to one daemon: request ids, many calls in flight, deadlines.

No background task reads the stream: whichever caller is waiting reads frames (one at a
time, the "leader") and hands each reply to its caller; when its own reply arrives it
passes the reading on to another waiter. So a channel belongs to no task group, and a
Runtime can be entered in one task and left in another.

Every reply is hostile input: frames are size-checked before they are buffered
(``FrameDecoder``), headers are shape-checked here, results are validated into
pydantic models by the session. A stream that ends or lies fails every pending and
future call with a clear error; it never hangs a caller past its deadline.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio
import anyio.abc

from caisson._sandbox.protocol import FrameDecoder, ProtocolError, encode_frame
from caisson.errors import CallTimeout, DaemonDied, DaemonProtocolError, OpError, SessionError
from caisson.logs import get_logger

log = get_logger("caisson.channel")

EventHandler = Callable[[str, dict[str, Any], bytes], None]

# How long the rest of a started frame may take to arrive.
PARTIAL_FRAME_DEADLINE = 1.5
# How long a cancelled call may spend telling the daemon to stop its work.
CANCEL_SEND_DEADLINE = 1.0
# How long a call that could not write may read what a gone daemon left in the stream.
LEFTOVER_DEADLINE = 0.2


class ByteTransport(Protocol):
    async def receive(self) -> bytes: ...
    async def send(self, data: bytes) -> None: ...
    async def aclose(self) -> None: ...

    @property
    def stderr_tail(self) -> str: ...


@dataclass
class _Pending:
    # Set when the reply (or a failure) arrives, or when this caller is to take over reading.
    wake: anyio.Event = field(default_factory=anyio.Event)
    header: dict[str, Any] | None = None
    blob: bytes = b""
    on_event: EventHandler | None = None


class Channel:
    def __init__(
        self,
        transport: ByteTransport,
        *,
        max_frame: int,
        name: str = "",
        explain_death: Callable[[], Awaitable[str | None]] | None = None,
    ) -> None:
        self._transport = transport
        # Asked why the stream ended (the engine knows, e.g. "out of memory"); None: no idea.
        self._explain_death = explain_death
        self._decoder = FrameDecoder(max_frame=max_frame)
        self._ids = itertools.count(1)
        self._pending: dict[int, _Pending] = {}
        self._failure: SessionError | None = None
        self._reading = False
        # Why the daemon said it exits (its ``exit`` event), for the error once it is gone.
        self._last_words: str | None = None
        self.name = name

    @property
    def transport(self) -> ByteTransport:
        """The byte stream the frames go over (the daemon's socket or the attach stream)."""
        return self._transport

    @property
    def failure(self) -> SessionError | None:
        return self._failure

    @property
    def alive(self) -> bool:
        return self._failure is None

    def _fail(self, error: SessionError) -> None:
        if self._failure is None:
            self._failure = error
            log.warning("channel failed", session=self.name, error=str(error))
        for pending in self._pending.values():
            pending.wake.set()

    async def _read(self) -> None:
        """Read one chunk of the stream and dispatch the frames it completes."""
        if not self._decoder.buffered:
            chunk = await self._transport.receive()
        else:
            # The daemon writes each frame whole: the rest of a started frame is already on its
            # way, so a frame cut short and then silence is a broken (or forged) stream.
            with anyio.move_on_after(PARTIAL_FRAME_DEADLINE) as scope:
                chunk = await self._transport.receive()
            if scope.cancelled_caught:
                self._fail(DaemonProtocolError(
                    f"the sandbox daemon of session {self.name} sent part of a frame and then nothing "
                    f"for {PARTIAL_FRAME_DEADLINE:g} s"
                ))
                return
        if not chunk:
            await self._gone("its stream ended")
            return
        try:
            frames = self._decoder.feed(chunk)
        except ProtocolError as exc:
            self._fail(DaemonProtocolError(f"the sandbox daemon of session {self.name} sent an invalid frame: {exc}"))
            return
        for header, blob in frames:
            self._dispatch(header, blob)

    async def _wait(self, pending: _Pending) -> None:
        """Until ``pending`` has its reply: read the stream if nobody else does, else wait."""
        while pending.header is None and self._failure is None:
            if self._reading:
                await pending.wake.wait()
                if pending.header is None:
                    pending.wake = anyio.Event()  # woken to take over reading
                continue
            self._reading = True
            try:
                while pending.header is None and self._failure is None:
                    await self._read()
            finally:
                self._reading = False
                self._hand_off(pending)

    def _hand_off(self, leaving: _Pending) -> None:
        for other in self._pending.values():
            if other is not leaving and other.header is None:
                other.wake.set()
                return

    def _dispatch(self, header: dict[str, Any], blob: bytes) -> None:
        call_id = header.get("id")
        if not isinstance(call_id, int) or isinstance(call_id, bool):
            self._fail(DaemonProtocolError(f"daemon of session {self.name} sent a frame without an integer id"))
            return
        if call_id == 0 and header.get("event") == "exit" and isinstance(header.get("data"), dict):
            self._last_words = str(header["data"].get("reason", ""))[:500] or None
            return
        pending = self._pending.get(call_id)
        if pending is None:
            return  # a reply to a call that already timed out
        if "event" in header:
            if pending.on_event is not None and isinstance(header.get("data"), dict):
                pending.on_event(str(header["event"]), header["data"], blob)
            return
        pending.header = header
        pending.blob = blob
        pending.wake.set()

    async def call(
        self,
        op: str,
        args: dict[str, Any] | None = None,
        blob: bytes = b"",
        *,
        timeout: float,
        on_event: EventHandler | None = None,
    ) -> tuple[dict[str, Any], bytes]:
        """Send one request and wait for its reply. Raises OpError for a refused op."""
        if self._failure is not None:
            raise self._failure
        call_id = next(self._ids)
        pending = _Pending(on_event=on_event)
        self._pending[call_id] = pending
        sent = False
        try:
            with anyio.move_on_after(timeout) as scope:
                try:
                    # Set first: a cancellation can land while the frame is being written, and a
                    # cancel for a request the daemon never got is harmless.
                    sent = True
                    await self._transport.send(encode_frame({"id": call_id, "op": op, "args": args or {}}, blob))
                except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
                    # On the socket a dead daemon is first seen here, not as the end of its
                    # stream: what it wrote before it went (its exit event) is still there.
                    await self._read_what_is_left()
                    await self._gone(f"cannot write to it: {exc}")
                await self._wait(pending)
            if scope.cancelled_caught:
                raise CallTimeout(f"{op} on session {self.name} got no reply within {timeout:g} s")
        finally:
            del self._pending[call_id]
            if sent and pending.header is None and self._failure is None:
                # The caller gave up (cancelled, or out of time): the work stops too.
                await self._cancel(call_id)
        if pending.header is None:
            assert self._failure is not None
            raise self._failure
        return self._unpack(op, pending.header, pending.blob)

    async def _read_what_is_left(self) -> None:
        """Take the frames a gone daemon left unread (unless another caller is reading)."""
        if self._reading or self._failure is not None:
            return
        self._reading = True
        try:
            with anyio.move_on_after(LEFTOVER_DEADLINE):
                while self._failure is None:
                    await self._read()
        finally:
            self._reading = False

    async def _gone(self, symptom: str) -> None:
        """Fail the channel for a daemon that is gone, saying why as best the engine, the
        daemon's exit event and its last words on stderr can."""
        if self._failure is not None:
            return
        cause = await self._explain_death() if self._explain_death is not None else None
        tail = self._transport.stderr_tail.strip()
        if cause:
            detail = f": {cause}"
        elif self._last_words:
            detail = f": it exited because {self._last_words}"
        else:
            detail = f" ({symptom})"
        detail += f"; its last words on stderr: {tail[-500:]}" if tail else ""
        self._fail(DaemonDied(f"the sandbox daemon of session {self.name} is gone{detail}"))

    async def _cancel(self, call_id: int) -> None:
        """Ask the daemon to kill what request ``call_id`` started; its answer is not awaited
        (it arrives for an id nobody waits on and is dropped)."""
        frame = encode_frame({"id": next(self._ids), "op": "cancel", "args": {"request": call_id}})
        # A stream that is gone took the work with it: nothing to report then.
        with (
            anyio.CancelScope(shield=True),
            anyio.move_on_after(CANCEL_SEND_DEADLINE),
            contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError),
        ):
            await self._transport.send(frame)

    def _unpack(self, op: str, header: dict[str, Any], blob: bytes) -> tuple[dict[str, Any], bytes]:
        ok = header.get("ok")
        if ok is True and isinstance(header.get("result"), dict):
            return header["result"], blob
        error = header.get("error")
        if ok is False and isinstance(error, dict):
            code, message = error.get("code"), error.get("message")
            if isinstance(code, str) and isinstance(message, str):
                raise OpError(code, message[:4000])
        raise DaemonProtocolError(f"daemon of session {self.name} sent a malformed reply to {op}")

    async def aclose(self) -> None:
        # A deliberate close is not a failure worth a warning.
        self._failure = self._failure or SessionError(f"session {self.name} is closed")
        self._fail(self._failure)
        await self._transport.aclose()
