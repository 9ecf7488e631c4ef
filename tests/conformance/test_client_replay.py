"""The recorded client sessions (scenarios/clients) and their replay in the client's form
(conformance/client_replay.py): the shipped fixtures are whole, redacted and small; a live answer's
values take the recorded answer's places in the next request, however the client wrote them; another
structure is told apart from an answer the client cannot carry. Values are written out by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harnesscheck.conformance import client_replay
from harnesscheck.conformance.test_client_sessions import SESSION_CHECKS
from harnesscheck.scenarios import client_sessions

FOLDER = client_sessions.FOLDER
EXPECTED = {"claude-code": ("claude-code", "anthropic"), "codex-gpt-5.5": ("codex", "responses"),
            "codex-fallback": ("codex", "responses"), "openclaw-anthropic": ("openclaw", "anthropic"),
            "openclaw-responses": ("openclaw", "responses"), "openclaw-chat": ("openclaw", "chat")}


def test_one_full_tool_session_per_client_configuration() -> None:
    docs = {d["name"]: d for d in client_sessions.load_all()}
    assert set(docs) == set(EXPECTED) == set(SESSION_CHECKS)
    for name, (client, api) in EXPECTED.items():
        doc = docs[name]
        assert (doc["client"], doc["api"]) == (client, api) and doc["client_version"]
        assert len(doc["exchanges"]) >= 3 and all(x["status"] == 200 for x in doc["exchanges"])
        # a full tool session: every request after the first carries a tool result
        later = [json.dumps(x["body"]) for x in doc["exchanges"][1:]]
        assert all(any(mark in text for mark in ('"tool_result"', '"function_call_output"', '"role": "tool"'))
                   for text in later), name
    assert docs["codex-gpt-5.5"]["model"] == "gpt-5.5" and docs["codex-fallback"]["model"] == "openai/openai/gpt-5.5"


def test_the_fixtures_are_redacted_and_small() -> None:
    total = 0
    for path in FOLDER.glob("*.json"):
        text = path.read_text()
        total += len(text)
        for leak in ("sk-harnesscheck", "/tmp/", '"/root', "Bearer ", "x-api-key"):
            assert leak not in text, (path.name, leak)
    assert total < 300_000


def test_compress_and_expand_are_inverse() -> None:
    exchanges = [{"body": {"model": "m", "tools": [1, 2], "messages": [{"a": 1}], "stream": True}},
                 {"body": {"model": "m", "tools": [1, 2], "messages": [{"a": 1}, {"b": 2}], "stream": True}},
                 {"body": {"model": "m", "tools": [1, 3], "messages": [{"a": 9}, {"b": 2}], "stream": True}}]
    stored = client_sessions.compress(exchanges)
    assert stored[1]["body"] == {"$same": ["model", "tools", "stream"], "$kept": 1, "messages": [{"b": 2}]}
    assert stored[2]["body"] == {"$same": ["model", "stream"], "$kept": 0, "messages": [{"a": 9}, {"b": 2}],
                                 "tools": [1, 3]}
    assert client_sessions.expand(stored) == exchanges


ANSWER = {"content": [{"type": "thinking", "thinking": "use Bash", "signature": "sig-rec"},
                      {"type": "tool_use", "id": "toolu_rec", "name": "Bash", "input": {"command": "ls"}}]}
LIVE = {"content": [{"type": "thinking", "thinking": "I use Bash", "signature": "sig-live"},
                    {"type": "tool_use", "id": "toolu_live", "name": "Bash", "input": {"command": "ls -l"}}]}


def test_the_live_answer_takes_the_recorded_places() -> None:
    m, why, kind = client_replay.mapping("anthropic", ANSWER, LIVE)
    assert m is not None and (why, kind) == ("", "")
    request = {"tools": [{"name": "Bash"}], "messages": [
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "use Bash", "signature": "sig-rec"},
                                          {"type": "tool_use", "id": "toolu_rec", "name": "Bash",
                                           "input": {"command": "ls"}, "cache_control": {"type": "ephemeral"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_rec", "content": "a.txt"}]}]}
    assert client_replay.substitute(request, m) == {"tools": [{"name": "Bash"}], "messages": [
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "I use Bash", "signature": "sig-live"},
                                          {"type": "tool_use", "id": "toolu_live", "name": "Bash",
                                           "input": {"command": "ls -l"}, "cache_control": {"type": "ephemeral"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_live", "content": "a.txt"}]}]}
    assert client_replay.carried(client_replay.substitute(request, m), m) == ["toolu_live"]


def test_a_call_id_the_client_rewrote_is_replaced_in_its_form() -> None:
    """OpenClaw over Chat sends call ids without their non-alphanumerics (call_9e6d -> call9e6d)."""
    recorded = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_9e6d", "type": "function", "function": {"name": "exec", "arguments": "{}"}}]}
    live = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_ab12", "type": "function", "function": {"name": "exec", "arguments": "{}"}}]}
    m, _, _ = client_replay.mapping("chat", recorded, live)
    assert m is not None
    assert client_replay.substitute({"tool_call_id": "call9e6d"}, m) == {"tool_call_id": "callab12"}


def test_another_structure_is_not_a_failure_but_an_uncarriable_answer_is() -> None:
    text_only = {"content": [{"type": "text", "text": "Done."}]}
    m, why, kind = client_replay.mapping("anthropic", ANSWER, text_only)
    assert m is None and kind == client_replay.DIFFERS and "Bash" in why
    no_id = {"output": [{"type": "function_call", "name": "exec", "arguments": "{}"}]}
    with_id = {"output": [{"type": "function_call", "name": "exec", "arguments": "{}", "call_id": "call_1"}]}
    m, why, kind = client_replay.mapping("responses", with_id, no_id)
    assert m is None and kind == client_replay.BROKEN and "no id" in why
    bad_input = {"content": [{"type": "thinking", "thinking": "x", "signature": "s"},
                             {"type": "tool_use", "id": "toolu_x", "name": "Bash", "input": None}]}
    m, why, kind = client_replay.mapping("anthropic", ANSWER, bad_input)
    assert m is None and kind == client_replay.BROKEN


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_recorded_answer_folds_to_the_calls_the_next_request_carries(name: str) -> None:
    """The recorded answers fold (the API's own fold) to tool calls whose ids the next request sends back."""
    doc = client_sessions.get(name)
    for x, nxt in zip(doc["exchanges"], doc["exchanges"][1:]):
        answer = client_replay.recorded_answer(doc["api"], x["answer"])
        m, why, kind = client_replay.mapping(doc["api"], answer, answer)
        assert m is not None and m.live_call_ids, (name, why)
        assert client_replay.carried(nxt["body"], m) == m.live_call_ids


def test_the_loader_refuses_other_documents(tmp_path: Path) -> None:
    (tmp_path / "x.json").write_text(json.dumps({"schema": "harnesscheck.capture", "version": 1}))
    with pytest.raises(ValueError, match="not a client session"):
        client_sessions.load(tmp_path / "x.json")
    (tmp_path / "x.json").write_text(json.dumps({"schema": client_sessions.SCHEMA, "version": 99}))
    with pytest.raises(ValueError, match="version 99"):
        client_sessions.load(tmp_path / "x.json")


def test_arguments_the_client_writes_again_take_the_live_values_in_its_style() -> None:
    """OpenClaw parses the arguments and writes them compact; the live ones go in the same style."""
    def call(arguments: str) -> dict:
        return {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "exec", "arguments": arguments}}]}
    m, _, _ = client_replay.mapping("chat", call('{"command": "ls"}'), call('{"command": "ls -l"}'))
    assert m is not None
    assert client_replay.substitute({"arguments": '{"command":"ls"}'}, m) == {"arguments": '{"command":"ls -l"}'}
    assert client_replay.uncarried({"arguments": '{"command":"ls"}'}, m) is None
    m, _, _ = client_replay.mapping("chat", call('{"command": "ls"}'), call('{{"command": "ls"}'))
    assert m is not None and "cannot send them back" in client_replay.uncarried({"a": '{"command":"ls"}'}, m)
