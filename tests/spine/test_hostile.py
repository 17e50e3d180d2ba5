"""A daemon the agent killed, and daemons that lie: clear errors, bounded memory, no hang.

The killed daemon is real. The lying daemons are scripted transports, because a real
daemon cannot be made to send an oversized or malformed frame."""

from __future__ import annotations

import struct
import time

import anyio
import pytest

from caisson import CallTimeout, DaemonDied, DaemonProtocolError, Runtime
from caisson._sandbox.protocol import encode_frame
from caisson.transport.channel import Channel

pytestmark = pytest.mark.anyio


async def test_agent_kills_daemon_next_call_fails_fast(rt: Runtime) -> None:
    async with rt.session() as victim, rt.session() as bystander:
        assert victim.info is not None
        started = time.monotonic()
        with pytest.raises(DaemonDied):  # the daemon dies before it can answer the kill
            await victim.exec(f"kill -9 {victim.info.pid}", user="root", timeout=30)
        with pytest.raises(DaemonDied) as err:
            await victim.exec("true", timeout=30)
        assert time.monotonic() - started < 15  # well under the two calls' 60 s of deadlines
        assert "daemon" in str(err.value)
        r = await bystander.exec("echo still here", timeout=5)
        assert r.stdout == "still here\n"


class ScriptedDaemon:
    """Answers every request with the given raw bytes (or nothing)."""

    def __init__(self, reply: bytes | None) -> None:
        self.reply = reply
        self.sent = anyio.Event()
        self.received = 0

    @property
    def stderr_tail(self) -> str:
        return ""

    async def receive(self) -> bytes:
        await self.sent.wait()
        if self.reply is None:
            await anyio.sleep_forever()
        chunk, self.reply = self.reply, b""
        self.received += len(chunk)
        if not chunk:
            await anyio.sleep_forever()
        return chunk

    async def send(self, data: bytes) -> None:
        self.sent.set()

    async def aclose(self) -> None:
        pass


async def _call_against(reply: bytes | None, timeout: float = 2.0) -> tuple[Channel, BaseException]:
    transport = ScriptedDaemon(reply)
    channel = Channel(transport, max_frame=1024 * 1024, name="fake")
    with pytest.raises(Exception) as err:
        await channel.call("ping", {}, timeout=timeout)
    return channel, err.value


async def test_oversized_frame_is_refused_before_buffering() -> None:
    # Claims 3 GB, sends the first bytes of it.
    channel, err = await _call_against(struct.pack(">I", 3_000_000_000) + b"x" * 1000)
    assert isinstance(err, DaemonProtocolError) and "exceeds the limit" in str(err)
    assert channel._decoder.buffered <= 1004  # only what arrived; nothing more was read


async def test_garbage_is_a_protocol_error() -> None:
    _, err = await _call_against(struct.pack(">II", 12, 8) + b"not json")
    assert isinstance(err, DaemonProtocolError)


async def test_deeply_nested_json_is_refused() -> None:
    header = ('{"id":1,"ok":true,"result":' + "[" * 100000 + "]" * 100000 + "}").encode()
    _, err = await _call_against(struct.pack(">II", 4 + len(header), len(header)) + header)
    assert isinstance(err, DaemonProtocolError) and "nested" in str(err)


async def test_wrong_reply_shape_is_refused() -> None:
    _, err = await _call_against(encode_frame({"id": 1, "ok": "yes", "result": [1]}))
    assert isinstance(err, DaemonProtocolError)


async def test_silent_daemon_times_out() -> None:
    started = time.monotonic()
    _, err = await _call_against(None, timeout=0.5)
    assert isinstance(err, CallTimeout)
    assert time.monotonic() - started < 10  # the daemon never answers


async def test_truncated_frame_then_silence_fails_the_session_fast() -> None:
    """Half a reply and then nothing (a daemon that died mid-write, or forged bytes): the call
    fails within the partial-frame deadline, not at its own (long) timeout, and so do later calls."""
    frame = encode_frame({"id": 1, "ok": True, "result": {"pong": True}})
    started = time.monotonic()
    channel, err = await _call_against(frame[: len(frame) // 2], timeout=60)
    elapsed = time.monotonic() - started
    print(f"truncated frame: the session failed after {elapsed:.2f} s")
    assert isinstance(err, DaemonProtocolError) and "part of a frame" in str(err)
    assert elapsed < 10  # the call's own timeout is 60 s; the partial-frame deadline 1.5 s
    with pytest.raises(DaemonProtocolError):
        await channel.call("ping", {}, timeout=60)
