"""AIPerf multi_turn and Mooncake import/export: round trips keep what each format can hold."""

from __future__ import annotations

import json

import pytest

from harnesscheck.replay.formats import export_aiperf, export_mooncake, import_aiperf, import_mooncake, synth_prompt
from harnesscheck.replay.trace import dumps, loads
from harnesscheck.replay.workloads import agent_coding

AIPERF = "\n".join(json.dumps(x) for x in [
    {"session_id": "s1", "turns": [{"text": "What is deep learning?", "timestamp": 0},
                                   {"text": "And transformers?", "timestamp": 1500}]},
    {"session_id": "s2", "turns": [{"texts": ["Hello"], "delay": 0}, {"text": "Who are you?", "delay": 1000},
                                   {"text": "Bye", "delay": 250, "role": "user"}]},
    {"session_id": "s1", "turns": [{"text": "Third of s1", "timestamp": 4000}]},
])

MOONCAKE = "\n".join(json.dumps(x) for x in [
    {"timestamp": 0, "input_length": 700, "output_length": 40, "hash_ids": [0, 1]},
    {"session_id": "c0", "timestamp": 10, "input_length": 1100, "output_length": 20, "hash_ids": [0, 2, 3]},
    {"session_id": "c0", "input_length": 1600, "output_length": 10, "hash_ids": [0, 2, 3, 4], "delay": 500},
    {"timestamp": 2000, "input_length": 90, "output_length": 5, "hash_ids": [0]},
])


def _lines(text: str) -> list[dict]:
    return [json.loads(ln) for ln in text.splitlines() if ln.strip()]


def test_aiperf_import_groups_sessions_and_uses_answers() -> None:
    trace = loads(dumps(import_aiperf(AIPERF, model="m")))
    s1 = trace.session("s1")
    assert [t.turn for t in s1.turns] == [0, 1, 2]
    assert s1.turns[1].timing.at_ms == 1500
    assert trace.session("s2").turns[1].timing.think_ms == 1000
    reqs = s1.requests({0: [{"role": "assistant", "content": "A0"}], 1: [{"role": "assistant", "content": "A1"}]})
    assert [m["content"] for m in reqs[2]["messages"]] == ["What is deep learning?", "A0", "And transformers?",
                                                          "A1", "Third of s1"]


def test_aiperf_round_trip() -> None:
    once = export_aiperf(import_aiperf(AIPERF)).text
    twice = export_aiperf(loads(dumps(import_aiperf(once)))).text
    assert once == twice
    by = {d["session_id"]: d for d in _lines(once)}
    assert [t["text"] for t in by["s1"]["turns"]] == ["What is deep learning?", "And transformers?", "Third of s1"]
    assert by["s1"]["turns"][1] == {"text": "And transformers?", "timestamp": 1500}
    assert by["s2"]["turns"][2] == {"text": "Bye", "delay": 250, "role": "user"}


def test_aiperf_rejects_bad_lines() -> None:
    with pytest.raises(ValueError, match="cannot be set together"):
        import_aiperf(json.dumps({"session_id": "x", "turns": [{"text": "a", "timestamp": 1, "delay": 2}]}))
    with pytest.raises(ValueError, match="'turns' must be a non-empty list"):
        import_aiperf(json.dumps({"session_id": "x", "turns": []}))


def test_an_empty_session_id_is_refused_not_written() -> None:
    # a trace's sessions are named: "" imported as a session id made a file the kit's own reader refused
    with pytest.raises(ValueError, match="session_id"):
        import_mooncake(json.dumps({"input_length": 700, "output_length": 16, "session_id": ""}))
    with pytest.raises(ValueError, match="session_id"):
        import_aiperf(json.dumps({"session_id": "", "text": "hi"}))
    with pytest.raises(ValueError, match="session_id"):
        import_aiperf(json.dumps({"session_id": "", "turns": [{"text": "hi"}]}))


def test_mooncake_round_trip() -> None:
    trace = loads(dumps(import_mooncake(MOONCAKE, block_size=512, api="anthropic")))
    assert len(trace.sessions) == 3
    assert [t.turn for t in trace.session("c0").turns] == [0, 1]
    out = export_mooncake(trace, block_size=512).text
    assert _lines(out) == _lines(MOONCAKE)
    assert export_mooncake(loads(dumps(import_mooncake(out)))).text == out


def test_mooncake_shared_hash_ids_share_prefix() -> None:
    a = synth_prompt(1100, [0, 2, 3], block_size=512)
    b = synth_prompt(1600, [0, 2, 3, 4], block_size=512)
    c = synth_prompt(700, [0, 1], block_size=512)
    assert len(a.split()) == 1100 and len(b.split()) == 1600
    assert b.startswith(a)  # same ids, and a's cut last block is a prefix of b's whole one
    assert c.split()[:512] == a.split()[:512]  # hash id 0 shared
    assert c.split()[512:700] != a.split()[512:700]  # hash ids 1 and 2 differ


def test_general_trace_exports_stably() -> None:
    trace = agent_coding(sessions=2, turns=4, prompt_tokens=1500, api="responses")
    mc = export_mooncake(trace, block_size=64).text
    rows = _lines(mc)
    assert len(rows) == 8
    assert rows[0]["hash_ids"][:3] == rows[4]["hash_ids"][:3]  # sessions share the system prompt and tools
    assert all(rows[i + 1]["input_length"] > rows[i]["input_length"] for i in range(3))
    assert export_mooncake(loads(dumps(import_mooncake(mc, block_size=64))), block_size=64).text == mc
    ap = export_aiperf(trace).text
    assert export_aiperf(import_aiperf(ap, api="responses")).text == ap
    turns = _lines(ap)[0]["turns"]
    assert turns[0]["role"] == "system" and turns[1]["text"].startswith("Fix the failing build")
