"""FrameParser: bytes in, frames out, however the stream is cut; forged sizes refused."""

from __future__ import annotations

import io
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oncelog.protocol import framing
from oncelog.protocol.framing import (
    LARGE,
    RECYCLED,
    ROLLING,
    Frame,
    FrameError,
    FrameParser,
    begin_frame,
    encode_frame,
    end_frame,
)

MAX = 4 * 1024 * 1024


def drain(parser: FrameParser) -> list[Frame]:
    out = []
    while (frame := parser.next_frame()) is not None:
        out.append(frame)
    return out


def payload(n: int, seed: int = 0) -> bytes:
    return bytes((i * 31 + seed) & 0xFF for i in range(n))


def test_several_frames_in_one_chunk() -> None:
    frames = [b"a", b"", payload(1000), b"xyz"]
    parser = FrameParser(MAX)
    parser.feed(b"".join(encode_frame(f) for f in frames))
    assert parser.queued == 4
    assert drain(parser) == frames
    assert not parser.inside_frame


@pytest.mark.parametrize("size", [10, LARGE + 1, 3 * ROLLING])
def test_every_split_point_of_two_frames(size: int) -> None:
    frames = [payload(size, 1), payload(7, 2)]
    stream = b"".join(encode_frame(f) for f in frames)
    step = 1 if size < 100 else 997
    for cut in [*range(0, len(stream) + 1, step), 3, 4, 5, len(stream) - 1]:
        parser = FrameParser(MAX)
        parser.feed(stream[:cut])
        first = drain(parser)
        parser.feed(stream[cut:])
        assert first + drain(parser) == frames, cut
        assert not parser.inside_frame


def test_partial_frame_is_held_until_complete() -> None:
    parser = FrameParser(MAX)
    stream = encode_frame(b"hello")
    parser.feed(stream[:2])
    assert parser.next_frame() is None and parser.inside_frame
    parser.feed(stream[2:6])
    assert parser.next_frame() is None and parser.inside_frame
    parser.feed(stream[6:])
    assert parser.next_frame() == b"hello"
    assert not parser.inside_frame


def test_large_frame_is_received_into_its_own_buffer() -> None:
    """No extra copy: recv_into writes straight into the frame handed to the handler."""
    body = payload(LARGE * 3, 5)
    stream = encode_frame(body)
    parser = FrameParser(MAX)
    parser.feed(stream[:1000])  # prefix and the first bytes land in the rolling buffer
    target = parser.get_buffer()
    assert len(target) == len(body) - (1000 - 4)  # exactly the rest of this frame
    target[:] = stream[1000:]
    parser.buffer_updated(len(target))
    frame = parser.next_frame()
    assert isinstance(frame, memoryview) and not frame.readonly and frame == body
    assert target.obj is frame.obj  # the memory the loop wrote into is the frame itself


def test_frame_above_the_recycled_size_gets_a_bytearray_of_its_own() -> None:
    body = payload(RECYCLED + 1, 3)
    parser = FrameParser(MAX)
    parser.feed(encode_frame(body))
    frame = parser.next_frame()
    assert isinstance(frame, bytearray) and frame == body


def test_recycled_buffers_are_reused_only_once_unreferenced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A produce-sized frame reuses a buffer, never one a live frame or view still holds."""
    monkeypatch.setattr(framing, "_recycled", [])
    parser = FrameParser(MAX)
    stream = encode_frame(payload(LARGE * 2, 1)) + encode_frame(payload(LARGE * 2, 2))
    parser.feed(stream)
    first, second = drain(parser)
    assert isinstance(first, memoryview) and isinstance(second, memoryview)
    assert first.obj is not second.obj  # both alive: two buffers
    records = first[100:200]  # a view of the first frame, as a request's records are
    held = id(first.obj)
    del first
    parser.feed(encode_frame(payload(LARGE * 2, 3)))
    (third,) = drain(parser)
    assert id(third.obj) != held and third.obj is not second.obj  # the records keep it
    assert records == payload(LARGE * 2, 1)[100:200]  # untouched
    assert len(framing._recycled) == 3
    del records
    parser.feed(encode_frame(payload(LARGE * 2, 4)))
    (fourth,) = drain(parser)
    assert id(fourth.obj) == held and fourth == payload(LARGE * 2, 4)
    assert len(framing._recycled) == 3


def test_small_frames_are_cut_from_the_rolling_buffer_across_its_end() -> None:
    frames = [payload(LARGE - 3, i) for i in range(12)]  # > ROLLING in total: wraps around
    stream = b"".join(encode_frame(f) for f in frames)
    parser = FrameParser(MAX)
    got: list[Frame] = []
    for i in range(0, len(stream), 50_001):
        parser.feed(stream[i : i + 50_001])
        got += drain(parser)
    assert got == frames


def test_negative_size_is_refused_after_the_frames_before_it() -> None:
    parser = FrameParser(MAX)
    parser.feed(encode_frame(b"ok") + struct.pack(">i", -1) + b"junk")
    assert parser.next_frame() == b"ok"
    with pytest.raises(FrameError, match="negative frame size -1"):
        parser.next_frame()
    parser.feed(b"more junk is dropped")
    with pytest.raises(FrameError):
        parser.next_frame()


def test_oversize_is_refused_before_any_allocation() -> None:
    parser = FrameParser(1000)
    parser.feed(struct.pack(">i", 2**31 - 1))
    assert len(parser.get_buffer()) <= ROLLING  # nothing reserved for the forged size
    with pytest.raises(FrameError, match="exceeds socket.request.max.bytes=1000"):
        parser.next_frame()


def test_exactly_max_size_is_accepted() -> None:
    parser = FrameParser(LARGE * 2)
    parser.feed(encode_frame(payload(LARGE * 2)))
    assert parser.next_frame() == payload(LARGE * 2)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.binary(max_size=300) | st.integers(LARGE, LARGE + 5000).map(payload), max_size=8),
    st.lists(st.integers(1, 70_000), max_size=30),
)
def test_any_chunking_yields_the_same_frames(frames: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(encode_frame(f) for f in frames)
    parser = FrameParser(MAX)
    got: list[Frame] = []
    pos = 0
    for n in cuts:
        parser.feed(stream[pos : pos + n])
        got += drain(parser)
        pos += n
    parser.feed(stream[pos:])
    got += drain(parser)
    assert got == frames
    assert not parser.inside_frame


def test_frames_out_as_bytes() -> None:
    buf = io.BytesIO()
    begin_frame(buf)
    buf.write(b"header")
    buf.write(b"body")
    framed = end_frame(buf)
    assert framed == encode_frame(b"headerbody") == struct.pack(">i", 10) + b"headerbody"
    parser = FrameParser(MAX)
    parser.feed(framed)
    assert parser.next_frame() == b"headerbody"


def test_a_forged_large_size_reserves_memory_only_as_bytes_arrive() -> None:
    from oncelog.protocol.framing import LARGE_STEP

    parser = FrameParser(200 * 1024 * 1024)
    parser.feed(struct.pack(">i", 100 * 1024 * 1024) + b"x" * 10)
    assert len(parser.get_buffer()) == LARGE_STEP - 10  # not 100 MiB
    body = payload(3 * LARGE_STEP + 123, 9)
    frame = encode_frame(body)
    parser = FrameParser(200 * 1024 * 1024)
    parser.feed(frame[: LARGE_STEP + 50])
    assert len(parser.get_buffer()) == LARGE_STEP - 50 + 4  # doubled once, to 2 MiB
    parser.feed(frame[LARGE_STEP + 50 :])
    assert drain(parser) == [body]


def test_an_idle_parser_holds_no_rolling_buffer() -> None:
    parser = FrameParser(MAX)
    assert parser._buf is None
    parser.feed(encode_frame(b"abc") + encode_frame(b"de"))
    assert parser._buf is None  # every byte was cut into frames: the buffer went back
    parser.feed(b"\x00\x00")  # half a size prefix is kept
    assert parser._buf is not None and parser.inside_frame
    parser.feed(b"\x00\x01z")
    assert drain(parser) == [b"abc", b"de", b"z"] and parser._buf is None
