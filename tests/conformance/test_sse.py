"""SSE decoder: WHATWG examples, line endings, split invariance, comments, BOM, limits."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harnesscheck.protocol.wire.sse import FrameTooLarge, SSEDecoder, SSEFrame, WireError, decode_all


def events(data: bytes) -> list[tuple[str | None, str, str | None]]:
    return [(f.event, f.data, f.id) for f in decode_all(data) if f.kind == "event"]


def key(f: SSEFrame) -> tuple:
    return (f.index, f.kind, f.event, f.data, f.id, f.retry, f.raw, f.comment, f.done, f.utf8_error)


def test_spec_example_stock_ticker() -> None:
    stream = b"data: YHOO\ndata: +2\ndata: 10\n\n"
    assert events(stream) == [(None, "YHOO\n+2\n10", None)]


def test_spec_example_ids_and_comments() -> None:
    stream = (
        b": test stream\n\n"
        b"data: first event\nid: 1\n\n"
        b"data:second event\nid\n\n"
        b"data:  third event\n\n"
    )
    frames = decode_all(stream)
    assert [f.kind for f in frames] == ["comment", "event", "event", "event"]
    assert frames[0].comment == "test stream"
    assert [(f.data, f.id) for f in frames[1:]] == [
        ("first event", "1"),
        ("second event", ""),  # a bare "id" resets the last event id to ""
        (" third event", ""),  # only one leading space is stripped; the id persists
    ]


def test_spec_example_empty_data_lines() -> None:
    # "data" with no colon gives an empty data line; two of them give one "\n".
    frames = decode_all(b"data\n\ndata\ndata\n\ndata:\n")
    evs = [f for f in frames if f.kind == "event"]
    assert [f.data for f in evs] == ["", "\n"]
    # the last block has no final blank line: recorded as truncated, not dispatched
    assert frames[-1].kind == "truncated"


def test_spec_example_space_after_colon() -> None:
    assert events(b"data:test\n\ndata: test\n\n") == [(None, "test", None), (None, "test", None)]


@pytest.mark.parametrize("eol", [b"\n", b"\r\n", b"\r"])
def test_line_endings(eol: bytes) -> None:
    stream = eol.join([b"event: message_start", b'data: {"a":1}', b"", b": ping", b"data: x", b"data: y", b"", b""])
    frames = decode_all(stream)
    assert [(f.kind, f.event, f.data) for f in frames] == [
        ("event", "message_start", '{"a":1}'),
        ("comment", None, ""),
        ("event", None, "x\ny"),
    ]
    assert frames[0].json == {"a": 1}
    assert frames[0].raw == stream[: len(frames[0].raw)]


def test_mixed_line_endings_cr_then_lf_is_one_terminator() -> None:
    frames = decode_all(b"data: a\r\n\r\ndata: b\r\rdata: c\n\n")
    assert [f.data for f in frames] == ["a", "b", "c"]


def test_fields_event_retry_unknown_and_no_data() -> None:
    frames = decode_all(b"event: x\nretry: 1500\nfoo: bar\ndata: 1\n\nretry: 12a\nevent: y\n\n")
    assert frames[0].event == "x" and frames[0].retry == 1500 and frames[0].json == 1
    assert frames[1].kind == "nodata" and frames[1].retry is None and frames[1].event == "y"


def test_id_with_null_is_ignored() -> None:
    frames = decode_all(b"id: 7\ndata: a\n\nid: 8\x009\ndata: b\n\n")
    assert [f.id for f in frames] == ["7", "7"]


def test_done_and_bad_json() -> None:
    frames = decode_all(b"data: [DONE]\n\ndata: {oops\n\n")
    assert frames[0].done and frames[0].json is None and frames[0].json_error is None
    assert not frames[1].done and frames[1].json is None and "JSONDecodeError" in (frames[1].json_error or "")


def test_bom_stripped_once_even_when_split() -> None:
    stream = b"\xef\xbb\xbfdata: a\n\n"
    for cut in range(1, 4):
        dec = SSEDecoder()
        out = dec.feed(stream[:cut]) + dec.feed(stream[cut:]) + dec.flush()
        assert [f.data for f in out] == ["a"]
    # a second BOM is not stripped: it becomes part of a field name, which is ignored
    assert events(b"\xef\xbb\xbf\xef\xbb\xbfdata: a\n\n") == []


def test_invalid_utf8_is_replaced_and_noted() -> None:
    frames = decode_all(b"data: caf\xe9\n\n")
    assert frames[0].data == "caf\ufffd" and frames[0].utf8_error


def test_multibyte_split_is_fine() -> None:
    stream = "data: héllo — 🙂\n\n".encode()
    for cut in range(len(stream)):
        dec = SSEDecoder()
        out = dec.feed(stream[:cut]) + dec.feed(stream[cut:]) + dec.flush()
        assert [f.data for f in out] == ["héllo — 🙂"] and not out[0].utf8_error


def test_cr_at_chunk_end_waits_for_possible_lf() -> None:
    dec = SSEDecoder()
    assert dec.feed(b"data: a\r\n\r") == []
    out = dec.feed(b"\n")
    assert [f.data for f in out] == ["a"] and out[0].raw == b"data: a\r\n\r\n"
    assert dec.flush() == []


def test_truncated_tail_is_recorded_not_dispatched() -> None:
    frames = decode_all(b'data: {"a":1}\n\nevent: x\ndata: {"b"')
    assert [f.kind for f in frames] == ["event", "truncated"]
    assert frames[1].data == '{"b"' and frames[1].raw == b'event: x\ndata: {"b"'


def test_oversize_line_and_frame() -> None:
    dec = SSEDecoder(max_frame_bytes=100)
    with pytest.raises(FrameTooLarge):
        dec.feed(b"data: " + b"x" * 200)
    dec = SSEDecoder(max_frame_bytes=100)
    with pytest.raises(FrameTooLarge) as err:
        for _ in range(20):
            dec.feed(b"data: xxxxxxxxxx\n")
    assert err.value.limit == 100 and isinstance(err.value, WireError)
    # frames below the limit pass, and the limit applies per frame, not per stream
    dec = SSEDecoder(max_frame_bytes=100)
    out = []
    for _ in range(50):
        out += dec.feed(b"data: xxxxxxxxxx\n\n")
    assert len(out) == 50


def test_stamps_and_indices() -> None:
    dec = SSEDecoder()
    a = dec.feed(b": p\n\ndata: 1\n", t_ns=5, chunk_index=0)
    b = dec.feed(b"\ndata: 2\n\n", t_ns=9, chunk_index=1)
    frames = a + b
    assert [(f.index, f.kind, f.t_ns, f.chunk_index) for f in frames] == [
        (0, "comment", 5, 0), (1, "event", 9, 1), (2, "event", 9, 1)]
    with pytest.raises(WireError):
        dec.flush()
        dec.feed(b"x")


def test_make_and_dict_round_trip() -> None:
    f = SSEFrame.make({"type": "ping"}, event="ping", index=3, t_ns=10)
    assert decode_all(f.raw)[0].json == {"type": "ping"}
    g = SSEFrame.from_dict(f.to_dict())
    assert key(g) == key(f) and g.json == f.json and g.t_ns == 10


# -- split invariance -------------------------------------------------------------------

LINES = st.sampled_from([
    b"data: hello", b"data:x", b"data", b"event: message_start", b"event:", b'data: {"type":"ping"}',
    b": comment", b":", b"id: 1", b"id", b"retry: 3000", b"retry: x", b"bogus: y", b"", b"",
    "data: é🙂".encode(), b"data: \xff\xfe", b"\xef\xbb\xbfdata: bom", b"data: [DONE]",
])
EOLS = st.sampled_from([b"\n", b"\r\n", b"\r"])


@st.composite
def streams(draw: st.DrawFn) -> bytes:
    parts = draw(st.lists(st.tuples(LINES, EOLS), max_size=25))
    body = b"".join(line + eol for line, eol in parts)
    if draw(st.booleans()):
        body = b"\xef\xbb\xbf" + body
    if draw(st.booleans()):
        body += draw(LINES)  # maybe an unterminated tail
    return body


@settings(max_examples=100, deadline=None)
@given(streams(), st.lists(st.integers(min_value=0, max_value=400), max_size=8))
def test_any_split_gives_same_frames(stream: bytes, cuts: list[int]) -> None:
    whole = [key(f) for f in decode_all(stream)]
    points = sorted({c % (len(stream) + 1) for c in cuts})
    dec = SSEDecoder()
    out = []
    prev = 0
    for p in points + [len(stream)]:
        out += dec.feed(stream[prev:p])
        prev = p
    out += dec.flush()
    assert [key(f) for f in out] == whole


def test_every_single_byte_split_of_a_fixture() -> None:
    stream = b"\xef\xbb\xbfevent: a\r\ndata: \xc3\xa9\xf0\x9f\x99\x82\r\n\r\n: ping\rdata: 1\rdata: 2\r\rdata: t"
    whole = [key(f) for f in decode_all(stream)]
    dec = SSEDecoder()
    out = []
    for i in range(len(stream)):
        out += dec.feed(stream[i : i + 1])
    out += dec.flush()
    assert [key(f) for f in out] == whole
    assert [f.kind for f in out] == ["event", "comment", "event", "truncated"]
