"""harnesscheck.reports.wirelog: a case's transcript read from the results folder (or why there is none), and the
rows of its numbered log (a long stream: head, the frames around the finding, tail)."""

from __future__ import annotations

import json
from pathlib import Path

from harnesscheck.reports import wirelog


def _stream(n: int) -> dict:
    frames = [{"index": i, "kind": "event", "event": "content_block_delta", "t_ns": 1_000_000 * (10 + i),
               "chunk_index": i, "data": json.dumps({"i": i})} for i in range(n)]
    frames.append({"index": n, "kind": "comment", "comment": " keep-alive", "t_ns": 1_000_000 * (10 + n)})
    return {"api": "anthropic", "method": "POST", "url": "http://h/v1/messages", "status": 200,
            "request_headers": {"accept": "text/event-stream"}, "request_body": {"stream": True},
            "response_headers": {"content-type": "text/event-stream"}, "frames": frames, "body": None,
            "timings": {"headers_ns": 9_000_000, "first_frame_ns": 10_000_000,
                        "end_ns": (11 + n) * 1_000_000}}


def test_a_short_stream_shows_every_frame_numbered_with_its_times() -> None:
    log = wirelog.wire_log(_stream(3), focus=1)
    assert [(r.index, r.t_ms, r.dt_ms, r.kind, r.focus) for r in log.rows] == [
        (0, 10.0, None, "event", False), (1, 11.0, 1.0, "event", True), (2, 12.0, 1.0, "event", False),
        (3, 13.0, 1.0, "comment", False)]
    assert log.rows[3].data == ": keep-alive"
    assert (log.request_line, log.status, log.frames) == ("POST http://h/v1/messages", "200", 4)
    assert log.times == {"headers_ns": 9.0, "first_frame_ns": 10.0, "end_ns": 14.0}


def test_a_long_stream_shows_head_the_findings_frame_and_tail() -> None:
    n = 1000
    log = wirelog.wire_log(_stream(n - 1), focus=500)  # 999 events + 1 comment = 1000 frames
    shown = [r.index for r in log.rows if r.index is not None]
    gaps = [r.gap for r in log.rows if r.index is None]
    head, around, tail = list(range(150)), list(range(475, 526)), list(range(900, 1000))
    assert shown == head + around + tail
    assert gaps == [475 - 150, 900 - 526]
    assert [r.index for r in log.rows if r.focus] == [500]


def test_long_data_is_clipped_and_says_how_much() -> None:
    doc = _stream(1)
    doc["frames"][0]["data"] = "x" * 1000
    row = wirelog.wire_log(doc).rows[0]
    assert len(row.data) == wirelog.MAX_DATA and row.clipped == 1000 - wirelog.MAX_DATA


def test_a_response_that_is_not_a_stream_shows_its_body() -> None:
    doc = _stream(0)
    doc["frames"] = []
    doc["status"] = 404
    doc["body"] = {"b64": "", "text": '{"type":"error","error":{"type":"not_found_error"}}'}
    log = wirelog.wire_log(doc)
    assert log.rows == [] and log.status == "404"
    assert log.body == '{\n "type": "error",\n "error": {\n  "type": "not_found_error"\n }\n}'


def test_load_reads_the_file_or_says_why_not(tmp_path: Path) -> None:
    (tmp_path / "transcripts").mkdir()
    (tmp_path / "transcripts" / "AN-STREAM-001.json").write_text(json.dumps(_stream(2)))
    ok = wirelog.load({"transcript": "transcripts/AN-STREAM-001.json"}, tmp_path)
    assert ok.doc is not None and len(ok.doc["frames"]) == 3 and ok.missing == ""
    why = "5000 bytes, over the per-file cap of 10"
    left = wirelog.load({"transcript": None, "transcript_left_out": why}, tmp_path)
    assert left.doc is None and left.missing == f"Transcript not kept: {why}."
    only_failing = wirelog.load({"transcript": None}, tmp_path)
    assert only_failing.missing == "Transcript not kept (this run kept transcripts for failing checks only)."
    gone = wirelog.load({"transcript": "transcripts/AN-STREAM-002.json"}, tmp_path)
    assert gone.missing == "Transcript file transcripts/AN-STREAM-002.json not found beside the report."
    (tmp_path / "transcripts" / "bad.json").write_text("[1, 2]")
    assert "is not a transcript" in wirelog.load({"transcript": "transcripts/bad.json"}, tmp_path).missing
    unread = wirelog.load({"transcript": "transcripts/AN-STREAM-001.json"}, None)
    assert unread.missing.startswith("Transcript not read")


def _chat(chunks: list[str]) -> dict:
    doc = _stream(0)
    doc["frames"] = [{"index": i, "kind": "event", "event": "", "t_ns": 1_000_000 * (10 + i), "data": d}
                     for i, d in enumerate(chunks)]
    return doc


def _chunk(content: str, sep: tuple[str, str] = (",", ":"), **extra: object) -> str:
    obj = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1796633162, "model": "m",
           "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": None}], **extra}
    return json.dumps(obj, separators=sep, ensure_ascii=False)


def test_chat_rows_show_choices_before_the_keys_every_chunk_repeats() -> None:
    # issue 45: Chat rows repeated id/object/created/model before choices (and a clipped row showed only those)
    log = wirelog.wire_log(_chat([_chunk("Hé"), _chunk(" there"), _chunk("", usage={"total_tokens": 3}), "[DONE]"]))
    assert log.constant_keys == {"": ["id", "object", "created", "model"]}
    first, _, last, done = log.rows
    assert first.data.startswith('{"choices":[{"index":0,"delta":{"content":"Hé"}')
    assert first.data.endswith('"id":"chatcmpl-1","object":"chat.completion.chunk","created":1796633162,"model":"m"}')
    assert json.loads(first.data) == json.loads(_chunk("Hé"))  # the same object: only the key order differs
    assert last.data.startswith('{"choices":') and '"usage":{"total_tokens":3},"id"' in last.data
    assert done.data == "[DONE]"


def test_frames_are_shown_as_sent_unless_only_the_key_order_changes() -> None:
    spaced = [_chunk("a", (", ", ": ")), _chunk("b", (", ", ": "))]
    assert wirelog.wire_log(_chat(spaced)).rows[0].data.startswith('{"choices": [')  # the writer's spacing kept
    odd = ['{"id": "c",  "choices": []}', '{"id": "c",  "choices": [1]}']  # no writer's spacing: as sent
    assert [r.data for r in wirelog.wire_log(_chat(odd)).rows] == odd
    twice = ['{"id":"c","id":"d","choices":[]}', '{"id":"d","choices":[]}']  # a duplicate key: as sent
    assert wirelog.wire_log(_chat(twice)).rows[0].data == twice[0]
    varying = [_chunk("a"), _chunk("b").replace("chatcmpl-1", "chatcmpl-2")]
    assert wirelog.wire_log(_chat(varying)).rows[0].data.startswith('{"id":"chatcmpl-1"')
    assert wirelog.wire_log(_chat([_chunk("only")])).rows[0].data == _chunk("only")  # one frame: nothing repeats


def test_the_focus_row_is_the_findings_frame() -> None:
    log = wirelog.wire_log(_stream(5), focus=3)
    assert log.focus is not None and log.focus.index == 3 and log.focus.focus
    assert wirelog.wire_log(_stream(5)).focus is None
    assert wirelog.wire_log(_stream(5), focus=99).focus is None  # a frame the transcript lacks
