"""Responses stream grammar: fixtures pass; each mutation breaks exactly one rule."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harnesscheck.conformance.grammar import responses as rs
from harnesscheck.conformance.grammar.findings import Finding, rules_of
from harnesscheck.protocol import apis
from harnesscheck.protocol.wire.sse import SSEFrame, decode_all
from harnesscheck.protocol.wire.transcript import Transcript

from tests.conformance import answer_fold

FIXTURES = Path(__file__).parent / "fixtures"
VALID = sorted(p.name for p in FIXTURES.glob("responses_*.sse"))
FC = "responses_reasoning_function_call.sse"
TXT = "responses_text.sse"
QR = "responses_queued_reasoning_text.sse"  # created, queued, in_progress; a reasoning_text part; a call last

Ev = list[list[Any]]


def load(name: str) -> Ev:
    return [[f.event, f.json if not f.done else "[DONE]"] for f in decode_all((FIXTURES / name).read_bytes())
            if f.kind == "event"]


def frames(events: Ev) -> list[SSEFrame]:
    return [SSEFrame.make(d, event=n, index=i) for i, (n, d) in enumerate(events)]


def renumber(e: Ev) -> None:
    start = e[0][1]["sequence_number"]
    for k, (_, d) in enumerate(e):
        if isinstance(d, dict):
            d["sequence_number"] = start + k


def at(e: Ev, typ: str, nth: int = 0) -> int:
    return [i for i, (_, d) in enumerate(e) if isinstance(d, dict) and d.get("type") == typ][nth]


def delete(e: Ev, i: int) -> None:
    del e[i]
    renumber(e)


def move(e: Ev, src: int, dst: int) -> None:
    e.insert(dst, e.pop(src))
    renumber(e)


def completed(e: Ev) -> dict[str, Any]:
    return e[at(e, "response.completed")][1]["response"]


@pytest.mark.parametrize("name", VALID)
def test_valid_fixture_has_no_findings(name: str) -> None:
    fr = decode_all((FIXTURES / name).read_bytes())
    assert rs.validate(fr) == []
    assert rs.validate(Transcript(api="responses", method="POST", url="u", frames=fr)) == []


def test_final_message_and_fold_from_deltas() -> None:
    m = rs.final_message(decode_all((FIXTURES / FC).read_bytes()))
    assert m is not None and m["response"]["status"] == "completed"
    assert [o["type"] for o in m["output"]] == ["reasoning", "message", "function_call"]
    # without the output_item.done events the fold builds the items from the deltas alone
    events = [d for _, d in load(FC) if d["type"] != "response.output_item.done"]
    snap = None
    for d in events:
        before = copy.deepcopy(snap)
        new = rs.accumulate(d, snap)
        assert snap == before
        snap = new
    out = snap["output"]
    assert out[0]["summary"][0]["text"] == "**Planning**\n\nI should read the file before editing."
    assert out[1]["content"][0]["text"] == "I'll read `main.py` first."
    assert out[2]["arguments"] == '{"path": "main.py"}' and out[2]["name"] == "read_file"


def test_sdk_accepts_fixture() -> None:
    openai = pytest.importorskip("openai")
    from openai.types.responses import ResponseStreamEvent
    from pydantic import TypeAdapter

    adapter = TypeAdapter(ResponseStreamEvent)
    for _, d in load(FC):
        adapter.validate_python(d)
    assert openai


# -- mutations ------------------------------------------------------------------------------

def m_json(e: Ev) -> None: e.insert(3, [None, "{nope"])
def m_event_name(e: Ev) -> None: e[3][0] = "response.output_text.delta"
def m_event_name_missing(e: Ev) -> None: e[3][0] = None
def m_no_event_lines(e: Ev) -> None: e[:] = [[None, d] for _, d in e]
def m_unknown(e: Ev) -> None:
    e.insert(3, ["response.surprise", {"type": "response.surprise"}])
    renumber(e)
def m_unknown_without_line_ok(e: Ev) -> None:  # unknown types are only recorded, whatever their line
    e.insert(3, [None, {"type": "response.vendor.progress", "pct": 50}])
    renumber(e)
def m_type_not_a_string(e: Ev) -> None:
    e.insert(3, [None, {"type": ["response.output_text.delta"]}])
    renumber(e)
def m_queued_ok(e: Ev) -> None:  # created, queued, in_progress: where ResponseQueuedEvent belongs
    e.insert(1, ["response.queued", {"type": "response.queued", "response": copy.deepcopy(e[0][1]["response"])}])
    renumber(e)
def m_queued_after_in_progress(e: Ev) -> None:
    e.insert(2, ["response.queued", {"type": "response.queued", "response": copy.deepcopy(e[0][1]["response"])}])
    renumber(e)
def m_queued_instead_of_in_progress(e: Ev) -> None:
    e[1][0] = "response.queued"
    e[1][1]["type"] = "response.queued"
def m_reasoning_part_in_message(e: Ev) -> None:  # a reasoning_text part belongs to a reasoning item only
    e[at(e, "response.content_part.added")][1]["part"] = {"type": "reasoning_text", "text": ""}
def m_reasoning_text_after_part_done(e: Ev) -> None:
    i = at(e, "response.content_part.done")
    late = copy.deepcopy(e[at(e, "response.reasoning_text.delta")])
    late[1]["delta"] = "late"
    e.insert(i + 1, late)
    renumber(e)
def m_reasoning_part_done_differs(e: Ev) -> None:
    e[at(e, "response.content_part.done")][1]["part"]["text"] = "other"
def m_seq_gap(e: Ev) -> None:
    for _, d in e[5:]:
        d["sequence_number"] += 1
def m_seq_missing(e: Ev) -> None: del e[4][1]["sequence_number"]
def m_seq_start(e: Ev) -> None:
    for _, d in e:
        d["sequence_number"] += 5
def m_seq_repeat(e: Ev) -> None: e[6][1]["sequence_number"] = e[5][1]["sequence_number"]; [d.update(sequence_number=d["sequence_number"] - 1) for _, d in e[7:]]  # noqa: E702
def m_created_late(e: Ev) -> None:
    move(e, 0, 1)  # in_progress first, then created: the in_progress rule has nothing to say (created is not first)
def m_created_missing(e: Ev) -> None: delete(e, 0)
def m_in_progress_missing(e: Ev) -> None: delete(e, 1)
def m_output_index(e: Ev) -> None:
    for _, d in e:
        if d.get("output_index") == 2:
            d["output_index"] = 3
def m_no_output_or_content_index(e: Ev) -> None:  # every item event placed by its item_id all the same
    for _, d in e:
        if isinstance(d, dict):
            d.pop("output_index", None)
            d.pop("content_index", None)
def m_item_order_overlap(e: Ev) -> None:  # message item added before the reasoning item is done
    move(e, at(e, "response.output_item.done"), at(e, "response.output_item.added", 1))
def m_item_order_text_done_missing(e: Ev) -> None:
    i = at(e, "response.output_text.done")
    delete(e, i)
def m_item_order_args_after_done(e: Ev) -> None:
    i = at(e, "response.function_call_arguments.done")
    late = copy.deepcopy(e[at(e, "response.function_call_arguments.delta")])
    late[1]["delta"] = ""
    e.insert(i + 1, late)
    renumber(e)
def m_item_order_delta_unknown_item(e: Ev) -> None:
    i = at(e, "response.output_text.delta")
    stray = copy.deepcopy(e[i])
    stray[1]["output_index"] = 7
    e.insert(i, stray)
    renumber(e)
def m_item_ids(e: Ev) -> None: e[at(e, "response.output_text.delta", 1)][1]["item_id"] = "msg_other"
def m_item_ids_missing(e: Ev) -> None: del e[at(e, "response.output_item.added")][1]["item"]["id"]; [d.pop("item_id", None) for _, d in e if d.get("output_index") == 0]; e[at(e, "response.output_item.done")][1]["item"].pop("id"); completed(e)["output"][0].pop("id")  # noqa: E702
def m_unclosed(e: Ev) -> None: delete(e, at(e, "response.output_item.done", 2))
def m_function_call(e: Ev) -> None:
    e[at(e, "response.output_item.added", 2)][1]["item"].pop("name")
    e[at(e, "response.output_item.done", 2)][1]["item"].pop("name")
def m_call_id(e: Ev) -> None:
    e[at(e, "response.output_item.added", 2)][1]["item"]["call_id"] = ""
    e[at(e, "response.output_item.done", 2)][1]["item"]["call_id"] = ""
def m_name_changes(e: Ev) -> None: e[at(e, "response.output_item.done", 2)][1]["item"]["name"] = "write_file"
def m_args_done(e: Ev) -> None: e[at(e, "response.function_call_arguments.done")][1]["arguments"] = '{"path": "other.py"}'
def m_args_item(e: Ev) -> None: e[at(e, "response.output_item.done", 2)][1]["item"]["arguments"] = '{"path":"main.py"}'
def m_args_json(e: Ev) -> None:
    bad = '{"path": "main.py"'
    delete(e, at(e, "response.function_call_arguments.delta", 2))
    e[at(e, "response.function_call_arguments.done")][1]["arguments"] = bad
    e[at(e, "response.output_item.done", 2)][1]["item"]["arguments"] = bad
    completed(e)["output"][2]["arguments"] = bad
def _as_custom(e: Ev) -> None:
    """The function call as a custom tool's call: its input streamed as custom_tool_call_input events."""
    for name, d in e:
        if not isinstance(d, dict):
            continue
        item = d.get("item")
        if isinstance(item, dict) and item.get("type") == "function_call":
            item["type"], item["input"] = "custom_tool_call", item.pop("arguments", "")
        if d.get("type") == "response.function_call_arguments.delta":
            d["type"] = "response.custom_tool_call_input.delta"
        elif d.get("type") == "response.function_call_arguments.done":
            d["type"], d["input"] = "response.custom_tool_call_input.done", d.pop("arguments")
    for k, (name, d) in enumerate(e):
        if name and isinstance(d, dict) and name != d.get("type"):
            e[k][0] = d["type"]
    for item in completed(e)["output"]:
        if item.get("type") == "function_call":
            item["type"], item["input"] = "custom_tool_call", item.pop("arguments", "")
def m_custom_ok(e: Ev) -> None: _as_custom(e)
def m_custom_done_differs(e: Ev) -> None:
    _as_custom(e)
    e[at(e, "response.custom_tool_call_input.done")][1]["input"] = "*** Begin Patch"
def m_custom_no_done(e: Ev) -> None:
    _as_custom(e)
    delete(e, at(e, "response.custom_tool_call_input.done"))
def m_text_done(e: Ev) -> None: e[at(e, "response.output_text.done")][1]["text"] = "different"
def m_part_done(e: Ev) -> None: e[at(e, "response.content_part.done")][1]["part"]["text"] = "different"
def m_summary_done(e: Ev) -> None: e[at(e, "response.reasoning_summary_text.done")][1]["text"] = "x"
def m_item_text(e: Ev) -> None: e[at(e, "response.output_item.done", 1)][1]["item"]["content"][0]["text"] = "x"
def m_completed_missing(e: Ev) -> None: del e[-1]
def m_after_completed(e: Ev) -> None:
    e.append(copy.deepcopy(e[-1]))
    renumber(e)
def m_failed_is_terminal(e: Ev) -> None:
    e[-1][0] = "response.failed"
    e[-1][1].update(type="response.failed", response={"status": "failed", "error": {"code": "server_error"}})
def m_completed_output(e: Ev) -> None:
    out = completed(e)["output"]
    out[0], out[1] = out[1], out[0]
def m_completed_output_missing(e: Ev) -> None: completed(e)["output"].pop()
def m_usage(e: Ev) -> None: completed(e)["usage"] = None
def m_usage_field(e: Ev) -> None: completed(e)["usage"].pop("total_tokens")
def m_error(e: Ev) -> None:
    e[-1:] = [["error", {"type": "error", "code": "server_error", "message": "boom", "param": None}]]
    renumber(e)
def m_error_mid_item(e: Ev) -> None:  # the error while an item is open: nothing missing is judged after it
    i = at(e, "response.output_text.delta", 1)
    e[i:] = [["error", {"type": "error", "code": "rate_limit_exceeded", "message": "slow down", "param": None}]]
    renumber(e)
def m_failed_mid_item(e: Ev) -> None:  # response.failed is a valid terminal event, even with an item open
    i = at(e, "response.output_text.delta", 1)
    e[i:] = [["response.failed", {"type": "response.failed", "response": {
        "id": "resp_x", "status": "failed", "output": [], "error": {"code": "server_error", "message": "engine died"}}}]]
    renumber(e)


MUTATIONS: list[tuple[str, Callable[[Ev], None], set[str]]] = [
    (TXT, m_json, {"RS-GRAMMAR-JSON"}),
    (TXT, m_event_name, {"RS-GRAMMAR-EVENT-NAME"}),
    (TXT, m_event_name_missing, {"RS-GRAMMAR-EVENT-LINE"}),
    (FC, m_no_event_lines, {"RS-GRAMMAR-EVENT-LINE"}),
    (TXT, m_unknown, {"RS-GRAMMAR-UNKNOWN-EVENT"}),
    (TXT, m_unknown_without_line_ok, {"RS-GRAMMAR-UNKNOWN-EVENT"}),
    (TXT, m_type_not_a_string, {"RS-GRAMMAR-JSON"}),
    (TXT, m_queued_ok, set()),
    (TXT, m_queued_after_in_progress, {"RS-GRAMMAR-IN-PROGRESS"}),
    (TXT, m_queued_instead_of_in_progress, {"RS-GRAMMAR-IN-PROGRESS"}),
    (TXT, m_reasoning_part_in_message, {"RS-GRAMMAR-ITEM-ORDER"}),
    (QR, m_reasoning_text_after_part_done, {"RS-GRAMMAR-ITEM-ORDER"}),
    (QR, m_reasoning_part_done_differs, {"RS-GRAMMAR-TEXT-DONE"}),
    (FC, m_seq_gap, {"RS-GRAMMAR-SEQUENCE"}),
    (FC, m_seq_missing, {"RS-GRAMMAR-SEQUENCE"}),
    (FC, m_seq_start, {"RS-GRAMMAR-SEQUENCE"}),
    (FC, m_seq_repeat, {"RS-GRAMMAR-SEQUENCE"}),
    (FC, m_created_late, {"RS-GRAMMAR-CREATED"}),
    (FC, m_created_missing, {"RS-GRAMMAR-CREATED"}),
    (FC, m_in_progress_missing, {"RS-GRAMMAR-IN-PROGRESS"}),
    (FC, m_output_index, {"RS-GRAMMAR-OUTPUT-INDEX"}),
    (FC, m_no_output_or_content_index, {"RS-GRAMMAR-OUTPUT-INDEX"}),
    (QR, m_no_output_or_content_index, {"RS-GRAMMAR-OUTPUT-INDEX"}),
    (FC, m_item_order_overlap, {"RS-GRAMMAR-ITEM-ORDER"}),
    (FC, m_item_order_text_done_missing, {"RS-GRAMMAR-ITEM-ORDER"}),
    (FC, m_item_order_args_after_done, {"RS-GRAMMAR-ITEM-ORDER"}),
    (FC, m_item_order_delta_unknown_item, {"RS-GRAMMAR-ITEM-ORDER"}),
    (FC, m_item_ids, {"RS-GRAMMAR-ITEM-IDS"}),
    (FC, m_item_ids_missing, {"RS-GRAMMAR-ITEM-IDS"}),
    (FC, m_unclosed, {"RS-GRAMMAR-ITEM-UNCLOSED"}),
    (FC, m_function_call, {"RS-GRAMMAR-FUNCTION-CALL"}),
    (FC, m_call_id, {"RS-GRAMMAR-FUNCTION-CALL"}),
    (FC, m_name_changes, {"RS-GRAMMAR-FUNCTION-CALL"}),
    (FC, m_args_done, {"RS-GRAMMAR-ARGS-DONE"}),
    (FC, m_args_item, {"RS-GRAMMAR-ARGS-DONE"}),
    (FC, m_args_json, {"RS-GRAMMAR-ARGS-JSON"}),
    (FC, m_custom_ok, set()),
    (FC, m_custom_done_differs, {"RS-GRAMMAR-CUSTOM-INPUT"}),
    (FC, m_custom_no_done, {"RS-GRAMMAR-CUSTOM-INPUT"}),
    (FC, m_text_done, {"RS-GRAMMAR-TEXT-DONE"}),
    (FC, m_part_done, {"RS-GRAMMAR-TEXT-DONE"}),
    (FC, m_summary_done, {"RS-GRAMMAR-TEXT-DONE"}),
    (FC, m_item_text, {"RS-GRAMMAR-TEXT-DONE"}),
    (FC, m_completed_missing, {"RS-GRAMMAR-COMPLETED"}),
    (TXT, m_after_completed, {"RS-GRAMMAR-COMPLETED"}),
    (TXT, m_failed_is_terminal, {"RS-GRAMMAR-ERROR-EVENT"}),
    (TXT, m_failed_mid_item, {"RS-GRAMMAR-ERROR-EVENT"}),
    (FC, m_completed_output, {"RS-GRAMMAR-COMPLETED-OUTPUT"}),
    (FC, m_completed_output_missing, {"RS-GRAMMAR-COMPLETED-OUTPUT"}),
    (FC, m_usage, {"RS-GRAMMAR-USAGE"}),
    (TXT, m_usage_field, {"RS-GRAMMAR-USAGE"}),
    (TXT, m_error, {"RS-GRAMMAR-ERROR-EVENT"}),
    (TXT, m_error_mid_item, {"RS-GRAMMAR-ERROR-EVENT"}),
]


@pytest.mark.parametrize(("fixture", "mutate", "expected"), MUTATIONS, ids=[m[1].__name__ for m in MUTATIONS])
def test_mutation_breaks_exactly_one_rule(fixture: str, mutate: Callable[[Ev], None], expected: set[str]) -> None:
    events = load(fixture)
    mutate(events)
    findings = rs.validate(frames(events))
    assert rules_of(findings) == expected, [str(f) for f in findings]
    assert all(f.rule in rs.RULES for f in findings)
    for f in findings:  # what was seen, what was wanted, where; informational exactly for those rules
        assert f.frame_index is not None and f.message and f.observed is not None, str(f)
        assert f.informational == (f.rule in rs.INFORMATIONAL), str(f)
        assert f.expected is not None or f.informational, str(f)


def test_every_rule_has_a_failing_case() -> None:
    assert set().union(*(m[2] for m in MUTATIONS)) == set(rs.RULES)
    assert rs.INFORMATIONAL <= set(rs.RULES)


# recorded from llama.cpp's llama-server 11434 (RS-STREAM-002's plain_text turn 0): no sequence_number,
# output_index or content_index on any event
LLAMA = "peers/llama_server_responses.sse"


@pytest.mark.parametrize("fixture", [LLAMA, FC, QR])
def test_a_stream_without_indices_fails_the_index_rules_only(fixture: str) -> None:
    """llama-server's Responses events carry no sequence_number, output_index or content_index (the fault
    rs-no-indices plants the form): the items are placed by their item_id, as the fold and Codex read them, so
    the stream fails the rules of the missing numbers, not the completed output or the item order (an item
    "never added", hand verification against llama-server: both listed besides the index rules)."""
    events = load(fixture)
    for _, d in events:
        for name in ("sequence_number", "output_index", "content_index"):
            d.pop(name, None) if isinstance(d, dict) else None
    findings = rs.validate(frames(events))
    assert rules_of(findings) == {"RS-GRAMMAR-SEQUENCE", "RS-GRAMMAR-OUTPUT-INDEX"}, [str(f) for f in findings[:9]]
    first = next(f for f in findings if f.rule == "RS-GRAMMAR-OUTPUT-INDEX")
    assert first.message == "output_item.added without an integer output_index", str(first)
    assert rs.final_message(frames(events)) == rs.final_message(frames(load(fixture)))  # the same answer


def test_event_line_absent_and_name_differs_say_so() -> None:
    events = load(TXT)
    m_event_name(events)
    events[4][0] = None
    by_rule = {f.rule: f for f in rs.validate(frames(events))}
    assert "absent" in by_rule["RS-GRAMMAR-EVENT-LINE"].message
    assert "differs (event: " in by_rule["RS-GRAMMAR-EVENT-NAME"].message
    events = load(FC)
    m_no_event_lines(events)
    findings = rs.validate(frames(events))  # one finding per event type, not one per frame
    assert len(findings) == len({d["type"] for _, d in events if isinstance(d, dict)})


def test_error_event_and_failed_report_the_body() -> None:
    events = load(TXT)
    m_error_mid_item(events)
    (f,) = rs.validate(frames(events))
    assert f.informational and "rate_limit_exceeded: slow down" in f.message
    assert json.loads(f.observed or "") == {"code": "rate_limit_exceeded", "message": "slow down"}
    events = load(TXT)
    m_failed_mid_item(events)
    (f,) = rs.validate(frames(events))
    assert f.informational and f.frame_index == len(events) - 1
    assert json.loads(f.observed or "") == {"code": "server_error", "message": "engine died"}


def sdk_final_response(events: Ev) -> Any:
    """The official SDK's stream helper (client.responses.stream) over a recorded stream."""
    openai = pytest.importorskip("openai")
    try:  # the SDK build here may run on httpx2
        import httpx2 as httpx  # type: ignore[import-not-found]
    except ImportError:
        import httpx
    body = "".join((f"event: {n}\n" if n else "") + "data: " + (d if isinstance(d, str) else json.dumps(d)) + "\n\n"
                   for n, d in events).encode()
    transport = httpx.MockTransport(lambda req: httpx.Response(200, content=body, headers={"content-type": "text/event-stream"}))
    client = openai.OpenAI(api_key="k", base_url="http://test/v1", http_client=httpx.Client(transport=transport))
    with client.responses.stream(model="m", input="x") as s:
        return s.get_final_response()


@pytest.mark.parametrize("without_event_lines", [False, True])
def test_sdk_folds_queued_reasoning_text_and_no_event_lines(without_event_lines: bool) -> None:
    """The legal variations the grammar passes (absent `event:` lines only recorded, as informational)
    are what the official SDK folds: it reads the data's type."""
    events = [[None if without_event_lines else n, d] for n, d in load(QR)]
    final = sdk_final_response(events)
    assert [o.type for o in final.output] == ["reasoning", "function_call"]
    assert final.output[1].arguments == '{"path": "a.txt"}' and final.usage.total_tokens == 229
    expected = {"RS-GRAMMAR-EVENT-LINE"} if without_event_lines else set()
    findings = rs.validate(frames(events))
    assert rules_of(findings) == expected and all(f.informational for f in findings)


def test_trailing_done_is_tolerated_and_empty_stream_reported() -> None:
    events = load(TXT) + [[None, "[DONE]"]]
    assert rs.validate(frames(events)) == []
    assert rules_of(rs.validate([])) == {"RS-GRAMMAR-COMPLETED", "RS-GRAMMAR-CREATED"}
    early = load(TXT)
    early.insert(len(early) - 1, [None, "[DONE]"])  # the SDK stops reading there
    assert rules_of(rs.validate(frames(early))) == {"RS-GRAMMAR-COMPLETED"}


# -- never raises ---------------------------------------------------------------------------

JSONISH = st.one_of(st.none(), st.booleans(), st.integers(-1, 3), st.text(max_size=4), st.lists(st.integers(), max_size=2))
TYPES = st.sampled_from(sorted(rs.EVENT_TYPES) + ["x"])
ITEMS = st.sampled_from([{"id": "a", "type": "message", "content": []}, {"id": "b", "type": "function_call", "name": "f", "call_id": "c", "arguments": "{}"},
                         {"id": "r", "type": "reasoning", "summary": [{"text": "s"}]}])


@st.composite
def plausible_event(draw: st.DrawFn) -> list[Any]:
    d: dict[str, Any] = {"type": draw(TYPES), "sequence_number": draw(st.integers(0, 4) | JSONISH),
                         "output_index": draw(st.integers(0, 2) | JSONISH), "item_id": draw(st.sampled_from(["a", "b", "r"]) | JSONISH),
                         "content_index": draw(st.integers(0, 1) | JSONISH), "summary_index": draw(st.integers(0, 1) | JSONISH),
                         "delta": draw(st.just("x") | JSONISH), "text": draw(st.just("x") | JSONISH),
                         "arguments": draw(st.just("{}") | JSONISH), "item": draw(ITEMS | JSONISH),
                         "part": draw(st.just({"type": "output_text", "text": "x"}) | JSONISH),
                         "response": draw(st.just({"output": [], "usage": {"input_tokens": 1}}) | JSONISH)}
    return [draw(st.sampled_from([d["type"], None])), draw(st.just(d) | JSONISH | st.sampled_from(["[DONE]", "{x"]))]


@settings(max_examples=100, deadline=None)
@given(st.lists(plausible_event(), max_size=12))
def test_validator_and_fold_never_raise(events: Ev) -> None:
    fr = frames(events)
    findings = rs.validate(fr)
    assert all(isinstance(f, Finding) and f.rule in rs.RULES for f in findings)
    rs.final_message(fr)
    answer_fold.agrees(apis.responses, fr)  # the answer's fold is the recorded one without its record


def test_package_dispatch_and_rule_ids() -> None:
    import harnesscheck.conformance.grammar as g

    assert len(g.ALL_RULES) == len(g.anthropic.RULES) + len(g.chat.RULES) + len(g.responses.RULES)
    for prefix, mod in (("AN-", g.anthropic), ("CH-", g.chat), ("RS-", g.responses)):
        assert all(r.startswith(prefix) and r.upper() == r for r in mod.RULES)
    assert g.module_for("messages") is g.anthropic
    assert g.validate_for("responses", decode_all((FIXTURES / TXT).read_bytes())) == []
    with pytest.raises(KeyError, match="known"):
        g.module_for("nope")
