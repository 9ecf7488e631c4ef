"""Trace interop with AIPerf 0.13.0's dataset formats (single_turn, multi_turn, mooncake_trace).

Every expected value is written out by hand here: the request each AIPerf row becomes (as
AIPerf's loaders and endpoints build it), the rows an export must write, its warnings.
"""

from __future__ import annotations

import gzip
import json

import pytest

from harnesscheck.cli.main import main
from harnesscheck.replay.formats import export_aiperf, export_mooncake, import_aiperf, import_mooncake
from harnesscheck.replay.trace import ANSWER, Timing, Trace, TraceTurn, dumps, load, loads, save


def _jsonl(*rows: dict) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


def _rows(text: str) -> list[dict]:
    return [json.loads(ln) for ln in text.splitlines() if ln.strip()]


# Every SingleTurn field the importer replays, in multi_turn rows.
MULTI = _jsonl(
    {"session_id": "s1", "turns": [
        {"role": "system", "text": "Be brief."},
        {"text": "What is deep learning?", "timestamp": 0, "output_length": 32},
        {"texts": ["And transformers?", "In one line."], "timestamp": 1500, "extra": {"temperature": 0}},
    ]},
    {"turns": [{"texts": [{"name": "q", "contents": ["a", "b"]}, {"name": "r", "contents": ["c"]}],
                "delay": 0},
               {"text": "Bye", "delay": 250, "role": "user", "x_note": "kept"}]},
)


def test_multi_turn_import_builds_aiperfs_requests() -> None:
    trace = loads(dumps(import_aiperf(MULTI, api="chat", model="m")))
    assert [s.id for s in trace.sessions] == ["s1", "aiperf-2"]
    s1 = trace.session("s1")
    assert len(s1.turns) == 2  # the leading system turn is the system prompt, not a request
    answers = {0: [{"role": "assistant", "content": "A0"}], 1: [{"role": "assistant", "content": "A1"}]}
    first, second = s1.requests(answers)
    chat = {"model": "m", "stream": True, "stream_options": {"include_usage": True}}
    assert first == {**chat, "max_tokens": 32,
                     "messages": [{"role": "system", "content": "Be brief."},
                                  {"role": "user", "content": "What is deep learning?"}]}
    assert second == {**chat, "temperature": 0,
                      "messages": [{"role": "system", "content": "Be brief."},
                                   {"role": "user", "content": "What is deep learning?"},
                                   {"role": "assistant", "content": "A0"},
                                   {"role": "user", "content": [{"type": "text", "text": "And transformers?"},
                                                                {"type": "text", "text": "In one line."}]}]}
    assert (s1.turns[0].timing.at_ms, s1.turns[1].timing.at_ms) == (0, 1500)
    other = trace.session("aiperf-2")
    assert other.turns[1].timing.think_ms == 250
    assert other.requests(answers)[0]["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"},
                                     {"type": "text", "text": "c"}]}]


def test_multi_turn_system_prompt_per_api() -> None:
    text = _jsonl({"session_id": "s", "turns": [{"role": "system", "text": "S"}, {"text": "hi"}]})
    anthropic = import_aiperf(text, api="anthropic", model="m").turns[0].request
    assert anthropic == {"model": "m", "stream": True, "max_tokens": 1024, "system": "S",
                         "messages": [{"role": "user", "content": "hi"}]}
    responses = import_aiperf(text, api="responses", model="m").turns[0].request
    assert responses == {"model": "m", "stream": True, "instructions": "S",
                         "input": [{"role": "user", "content": "hi"}]}
    # AIPerf leaves a system turn that carries timing in place (not hoisted): Anthropic has no such message
    timed = _jsonl({"session_id": "s",
                    "turns": [{"role": "system", "text": "S", "delay": 5}, {"text": "hi"}]})
    with pytest.raises(ValueError, match="role 'system' has no place in Anthropic Messages"):
        import_aiperf(timed, api="anthropic")


def test_multi_turn_round_trip_keeps_every_field() -> None:
    trace = loads(dumps(import_aiperf(MULTI, api="anthropic", model="m")))
    out = export_aiperf(trace)
    assert out.warnings == []
    assert _rows(out.text) == _rows(MULTI)
    assert export_aiperf(import_aiperf(out.text, api="anthropic")).text == out.text


SINGLE = _jsonl(
    {"text": "one", "session_id": "u1", "output_length": 5},
    {"texts": ["two", "three"], "session_id": "u1", "delay": 100},
    {"text": "alone", "timestamp": 40, "extra": {"top_p": 0.5}},
)


def test_single_turn_rows_are_whole_requests() -> None:
    trace = import_aiperf(SINGLE, api="anthropic", model="m")
    assert trace.meta["aiperf_type"] == "single_turn"
    u1 = trace.session("u1")
    assert [t.delta for t in u1.turns] == [None, None]  # no history across rows (AIPerf: self-contained)
    assert u1.turns[0].request == {"model": "m", "stream": True, "max_tokens": 5,
                                   "messages": [{"role": "user", "content": "one"}]}
    assert u1.turns[1].request["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "two"}, {"type": "text", "text": "three"}]}]
    assert u1.turns[1].timing.think_ms == 100
    alone = trace.session("aiperf-3")
    assert alone.turns[0].request == {"model": "m", "stream": True, "max_tokens": 1024, "top_p": 0.5,
                                      "messages": [{"role": "user", "content": "alone"}]}
    out = export_aiperf(loads(dumps(trace)))
    assert _rows(out.text) == _rows(SINGLE)


@pytest.mark.parametrize(("row", "message"), [
    ({"session_id": "x", "turns": [{"text": "a", "timestamp": 1, "delay": 2}]}, "cannot be set together"),
    ({"session_id": "x", "turns": [{"text": "a", "texts": ["b"]}]}, "text and texts cannot be set together"),
    ({"session_id": "x", "turns": [{"text": "a", "output_length": 0}]}, "greater than 0"),
    ({"session_id": "x", "turns": [{"delay": 5}]}, "at least one modality"),
    ({"session_id": "x", "turns": []}, "'turns' must be a non-empty list"),
    ({"session_id": "x", "turns": [{"text": "a", "image": "/p.png"}]},
     "images, audio and video are not replayed"),
])
def test_aiperf_rules(row: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        import_aiperf(json.dumps(row))


def test_gzip_inputs(tmp_path) -> None:
    gz = tmp_path / "conv.jsonl.gz"
    gz.write_bytes(gzip.compress(MULTI.encode()))
    assert _rows(export_aiperf(import_aiperf(gz, api="anthropic")).text) == _rows(MULTI)
    mc = tmp_path / "trace.jsonl.gz"
    row = {"timestamp": 0, "input_length": 3, "output_length": 2, "hash_ids": [7]}
    mc.write_bytes(gzip.compress(_jsonl(row).encode()))
    assert import_mooncake(mc, block_size=2).turns[0].request["max_tokens"] == 2
    # harnesscheck's own traces, compressed, whatever the file is called
    trace = import_aiperf(MULTI)
    saved = save(trace, tmp_path / "t.jsonl.gz")
    assert saved.read_bytes()[:2] == b"\x1f\x8b"
    renamed = tmp_path / "t.jsonl"
    renamed.write_bytes(saved.read_bytes())
    assert dumps(load(renamed)).splitlines()[1:] == dumps(trace).splitlines()[1:]
    out = tmp_path / "conv.trace.jsonl"
    assert main(["trace", "import", "aiperf", str(gz), "--out", str(out)]) == 0
    assert len(load(out).turns) == 4


def _agent_trace() -> Trace:
    """A two-turn Anthropic agent session: system prompt, one tool, a tool call, its result."""
    tools = [{"name": "bash", "description": "run", "input_schema": {"type": "object"}}]
    t0 = TraceTurn(session="a", turn=0, api="anthropic", timing=Timing(at_ms=0),
                   request={"model": "m", "max_tokens": 4096,
                            "system": [{"type": "text", "text": "You code."}], "tools": tools,
                            "thinking": {"type": "enabled", "budget_tokens": 1024},
                            "messages": [{"role": "user", "content": "Fix the build"}], "stream": True},
                   response=[{"role": "assistant", "content": [
                       {"type": "text", "text": "Running make now."},
                       {"type": "tool_use", "id": "t1", "name": "bash", "input": {"command": "make"}}]}])
    t1 = TraceTurn(session="a", turn=1, api="anthropic", timing=Timing(at_ms=900, tool_ms=300),
                   delta={"base": "previous", "append": [dict(ANSWER), {"role": "user", "content": [
                       {"type": "tool_result", "tool_use_id": "t1", "content": "make: ok"}]}]})
    return Trace.build([t0, t1], source="capture")


def test_agent_export_to_aiperf_says_what_it_cannot_hold() -> None:
    out = export_aiperf(_agent_trace())
    assert _rows(out.text) == [{"session_id": "a", "turns": [
        {"role": "system", "texts": ["You code."]},
        {"text": "Fix the build", "timestamp": 0, "output_length": 4096,
         "extra": {"thinking": {"type": "enabled", "budget_tokens": 1024}}},
        {"texts": ["make: ok"], "delay": 300, "output_length": 4096,
         "extra": {"thinking": {"type": "enabled", "budget_tokens": 1024}}},
    ]}]
    assert out.warnings == [
        "AIPerf multi_turn: tools: tool definitions dropped (AIPerf turns carry no tools) (1 session)",
        "AIPerf multi_turn: recorded answers: not exported (AIPerf threads the endpoint's live answers) "
        "(1 session)",
        "AIPerf multi_turn: model: m not held by AIPerf rows (give it with `trace import --model` or "
        "`replay --model`) (2 turns)",
        "AIPerf multi_turn: tool results: exported as user text (AIPerf turns are text messages) (1 result)",
    ]


def test_cli_export_prints_the_warnings(tmp_path, capsys) -> None:
    path = save(_agent_trace(), tmp_path / "agent.jsonl")
    assert main(["trace", "export", "aiperf", str(path), "--out", str(tmp_path / "a.jsonl")]) == 0
    err = capsys.readouterr().err
    assert "warning: AIPerf multi_turn: tools: tool definitions dropped" in err
    assert "tool results: exported as user text" in err


def test_mooncake_export_writes_the_recorded_output_length() -> None:
    trace = _agent_trace()
    rows = _rows(export_mooncake(trace, block_size=4).text)
    # turn 0's recorded answer, a word or a punctuation mark each: "Running make now." and the call's
    # input as JSON, {"command": "make"}
    answer_marks = len("Running make now .".split()) + len('{ " command " : " make " }'.split())
    assert rows[0]["output_length"] == answer_marks == 13
    assert rows[0]["output_length"] != 4096
    assert "output_length" not in rows[1]  # no recorded answer: left to the endpoint
    assert rows[0]["extra"] == rows[1]["extra"] == {"thinking": {"type": "enabled", "budget_tokens": 1024}}
    out = export_mooncake(trace, block_size=4)
    assert out.warnings == [
        "Mooncake: prompt: text counted into input_length + hash_ids, not kept (the words are made up again on "
        "import; --mooncake-mode payload keeps them) (2 turns)",
        "Mooncake: tools: tool definitions counted into input_length, not kept (2 turns)",
        "Mooncake: output_length: not written: no recorded output, and the request's max_tokens (a cap, not a "
        "length) dropped; the endpoint decides (1 turn)"]
    assert rows[1]["delay"] == 300 and rows[1]["session_id"] == "a" and rows[1]["timestamp"] == 900


MOONCAKE = _jsonl(
    {"timestamp": 0, "input_length": 6, "output_length": 4, "hash_ids": [1, 2]},
    {"session_id": "c", "timestamp": 10, "text_input": "Hello world", "output_length": 3,
     "extra": {"seed": 1}},
    {"session_id": "c", "delay": 500, "messages": [{"role": "user", "content": "hi"}],
     "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}]},
    {"timestamp": 2000,
     "payload": {"model": "x", "messages": [{"role": "user", "content": "raw"}], "stream": True}},
    {"timestamp": 2500, "input_length": 3},
)


def test_mooncake_import_every_input_mode() -> None:
    trace = loads(dumps(import_mooncake(MOONCAKE, api="chat", model="m", block_size=4)))
    base = {"model": "m", "stream": True, "stream_options": {"include_usage": True}}
    first = trace.turns[0].request
    assert len(first["messages"][0]["content"].split()) == 6 and first["max_tokens"] == 4
    c = trace.session("c")
    assert c.turns[0].request == {**base, "max_tokens": 3, "seed": 1,
                                  "messages": [{"role": "user", "content": "Hello world"}]}
    tools = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    assert c.turns[1].request == {**base, "messages": [{"role": "user", "content": "hi"}], "tools": tools}
    assert c.turns[1].timing.think_ms == 500
    raw = {"model": "x", "messages": [{"role": "user", "content": "raw"}], "stream": True}
    assert trace.turns[3].request == raw
    no_ids = trace.turns[4].request["messages"][0]["content"]
    assert len(no_ids.split()) == 3 and no_ids != first["messages"][0]["content"][:len(no_ids)]
    out = export_mooncake(trace, block_size=4)
    assert out.warnings == []
    assert _rows(out.text) == _rows(MOONCAKE)


@pytest.mark.parametrize(("row", "message"), [
    ({"input_length": 3, "text_input": "a"}, "exactly one of"),
    ({"text_input": "a", "hash_ids": [1]}, "'hash_ids' is only allowed with 'input_length'"),
    ({"text_input": "a", "tools": [{"type": "function"}]}, "'tools'"),
    ({"messages": [{"content": "no role"}]}, "'role'"),
    ({"timestamp": 3}, "exactly one of"),
])
def test_mooncake_rules(row: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        import_mooncake(json.dumps(row))


def test_mooncake_payload_mode_keeps_the_whole_request() -> None:
    trace = _agent_trace()
    rows = _rows(export_mooncake(trace, mode="payload").text)
    assert rows[0]["payload"] == trace.turns[0].request
    assert rows[1]["payload"]["messages"][1] == trace.turns[0].response[0]
    back = import_mooncake(export_mooncake(trace, mode="payload").text, api="anthropic")
    assert back.turns[1].request == rows[1]["payload"]


def test_multi_turn_to_mooncake_carries_output_length_and_extra_and_names_what_it_drops() -> None:
    """Issue 33: output_length and extra were dropped (the warning said there was no output)."""
    trace = import_aiperf(MULTI, api="chat", model="m")
    out = export_mooncake(trace, block_size=8)
    rows = _rows(out.text)
    assert rows[0]["output_length"] == 32 and "extra" not in rows[0]
    assert rows[1]["extra"] == {"temperature": 0} and rows[1]["timestamp"] == 1500
    assert [r["session_id"] for r in rows] == ["s1", "s1", "aiperf-2", "aiperf-2"]
    assert out.warnings == [
        "Mooncake: history: the endpoint's live answer to the turn before ($answer) is not in the row (a "
        "Mooncake row is a whole request, sent as written) (2 turns)",
        "Mooncake: prompt: text counted into input_length + hash_ids, not kept (the words are made up again on "
        "import; --mooncake-mode payload keeps them) (4 turns)",
        "Mooncake: output_length: not written: the turn has no recorded output and no output limit; the "
        "endpoint decides (3 turns)",
        "Mooncake: x_note: an AIPerf field Mooncake rows do not have, dropped (1 turn)"]
    payload = export_mooncake(trace, mode="payload")
    assert _rows(payload.text)[0]["payload"]["max_tokens"] == 32  # the payload holds the whole request
    assert [w.split(": ")[1] for w in payload.warnings] == ["history"]


def test_multi_turn_to_single_turn_says_the_history_is_not_sent() -> None:
    trace = import_aiperf(MULTI, api="chat", model="m")
    out = export_aiperf(trace, kind="single_turn")
    rows = _rows(out.text)
    assert len(rows) == 4 and all("turns" not in r for r in rows)
    assert out.warnings == [
        "AIPerf single_turn: system: system prompt dropped (AIPerf single_turn rows have none) (2 turns)",
        "AIPerf single_turn: history: sent without the conversation before it (single_turn rows carry no "
        "history; multi_turn keeps it) (2 turns)"]


def test_cli_export_names_each_field_on_stderr(tmp_path, capsys) -> None:
    src = tmp_path / "multi.jsonl"
    src.write_text(MULTI)
    assert main(["trace", "import", "aiperf", str(src), "--out", str(tmp_path / "t.jsonl")]) == 0
    capsys.readouterr()
    assert main(["trace", "export", "mooncake", str(tmp_path / "t.jsonl"), "--out", str(tmp_path / "m.jsonl")]) == 0
    err = capsys.readouterr().err.splitlines()
    assert [line.split(": ")[2] for line in err] == ["history", "prompt", "output_length", "x_note"]
    assert all(line.startswith("warning: Mooncake: ") for line in err)
