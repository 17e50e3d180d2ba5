"""Property tests of the frame codec and the decoder's limits."""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from caisson._sandbox.protocol import FrameDecoder, ProtocolError, encode_frame

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
headers = st.dictionaries(st.text(max_size=10), json_values, max_size=5)


@given(st.lists(st.tuples(headers, st.binary(max_size=300)), max_size=8), st.integers(1, 64))
@settings(max_examples=200)
def test_round_trip_in_any_chunking(frames: list[tuple[dict, bytes]], step: int) -> None:
    wire = b"".join(encode_frame(h, b) for h, b in frames)
    decoder = FrameDecoder()
    out = []
    for i in range(0, len(wire), step):
        out.extend(decoder.feed(wire[i : i + step]))
    assert out == frames and decoder.buffered == 0


@given(st.integers(1025, 2**32 - 1))
def test_oversized_length_refused_before_buffering(size: int) -> None:
    decoder = FrameDecoder(max_frame=1024)
    with pytest.raises(ProtocolError):
        decoder.feed(struct.pack(">I", size))
    assert decoder.buffered <= 4  # the length field itself, nothing of the claimed body


@given(st.binary(min_size=4, max_size=200))
def test_garbage_never_crashes_differently(garbage: bytes) -> None:
    decoder = FrameDecoder(max_frame=1024)
    with contextlib.suppress(ProtocolError):
        decoder.feed(garbage)
    assert decoder.buffered <= 1024 + 4


@given(st.integers(5000, 200_000))
def test_deep_nesting_refused(depth: int) -> None:
    body = ("[" * depth + "]" * depth).encode()
    with pytest.raises(ProtocolError):
        FrameDecoder().feed(struct.pack(">II", 4 + len(body), len(body)) + body)
