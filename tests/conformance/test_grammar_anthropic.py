"""Anthropic stream grammar: recorded fixtures pass; each mutation breaks exactly one rule."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from harnesscheck.conformance.grammar import anthropic as an
from harnesscheck.conformance.grammar.findings import Finding, rules_of
from harnesscheck.protocol import apis
from harnesscheck.protocol.wire.sse import SSEFrame, decode_all
from harnesscheck.protocol.wire.transcript import Transcript

from tests.conformance import answer_fold

FIXTURES = Path(__file__).parent / "fixtures"
VALID = sorted(p.name for p in FIXTURES.glob("anthropic_*.sse"))

Ev = list[list[Any]]  # [[event_name, data], ...]; data may be a str for raw text


def load(name: str) -> Ev:
    return [[f.event, f.json] for f in decode_all((FIXTURES / name).read_bytes()) if f.kind == "event"]


def frames(events: Ev) -> list[SSEFrame]:
    return [SSEFrame.make(data, event=name, index=i) for i, (name, data) in enumerate(events)]


def find(events: Ev, pred: Callable[[dict], bool], nth: int = 0) -> int:
    hits = [i for i, (_, d) in enumerate(events) if isinstance(d, dict) and pred(d)]
    return hits[nth]


def typ(t: str) -> Callable[[dict], bool]:
    return lambda d: d.get("type") == t


def delta_of(kind: str) -> Callable[[dict], bool]:
    return lambda d: d.get("type") == "content_block_delta" and d["delta"]["type"] == kind


def start_of(kind: str) -> Callable[[dict], bool]:
    return lambda d: d.get("type") == "content_block_start" and d["content_block"]["type"] == kind


@pytest.mark.parametrize("name", VALID)
def test_valid_fixture_has_no_findings(name: str) -> None:
    fr = decode_all((FIXTURES / name).read_bytes())
    assert an.validate(fr) == []
    t = Transcript(api="anthropic", method="POST", url="http://x/v1/messages", frames=fr)
    assert an.validate(t) == []


def test_fixture_coverage() -> None:
    assert {"anthropic_text.sse", "anthropic_thinking.sse", "anthropic_tool_use.sse",
            "anthropic_interleaved.sse", "anthropic_parallel_tools.sse", "anthropic_pings_two_deltas.sse"} <= set(VALID)


def test_final_message_fold() -> None:
    m = an.final_message(decode_all((FIXTURES / "anthropic_thinking.sse").read_bytes()))
    assert m is not None
    assert [b["type"] for b in m["content"]] == ["thinking", "text"]
    assert m["content"][0]["signature"].startswith("EqQB") and m["content"][1]["text"] == "27 * 453 = 12,231"
    assert m["stop_reason"] == "end_turn" and m["usage"]["output_tokens"] == 120
    m = an.final_message(decode_all((FIXTURES / "anthropic_parallel_tools.sse").read_bytes()))
    assert [(b["type"], b.get("input")) for b in m["content"]] == [
        ("text", None), ("tool_use", {"path": "a.txt"}), ("tool_use", {})]
    assert all("_partial_json" not in b for b in m["content"])


def test_accumulate_is_pure() -> None:
    evs = [d for _, d in load("anthropic_tool_use.sse")]
    snap = None
    history = []
    for e in evs:
        before = copy.deepcopy(snap)
        new = an.accumulate(e, snap)
        assert snap == before  # the old snapshot was not touched
        history.append(new)
        snap = new
    assert snap["content"][1]["input"] == {"location": "San Francisco, CA", "unit": "fahrenheit"}
    assert an.accumulate({"type": "content_block_start"}, None) is None  # before message_start


def sdk_final_message(body: bytes) -> dict[str, Any]:
    """The official SDK's stream helper over a recorded body (served by an in-process transport)."""
    anthropic = pytest.importorskip("anthropic")
    try:  # this anthropic SDK build runs on httpx2 and rejects plain httpx objects
        import httpx2 as httpx  # type: ignore[import-not-found]
    except ImportError:
        import httpx

    transport = httpx.MockTransport(lambda req: httpx.Response(200, content=body, headers={"content-type": "text/event-stream"}))
    client = anthropic.Anthropic(api_key="k", base_url="http://test", http_client=httpx.Client(transport=transport))
    with client.messages.stream(model="m", max_tokens=10, messages=[{"role": "user", "content": "x"}]) as s:
        return s.get_final_message().model_dump()  # type: ignore[no-any-return]


def serialize(events: Ev) -> bytes:
    out = []
    for name, data in events:
        line = f"event: {name}\n" if name is not None else ""
        out.append(line + "data: " + (data if isinstance(data, str) else json.dumps(data)) + "\n\n")
    return "".join(out).encode()


def test_sdk_agrees_with_the_fold() -> None:
    body = (FIXTURES / "anthropic_interleaved.sse").read_bytes()
    sdk = sdk_final_message(body)
    ours = an.final_message(decode_all(body))
    assert [b["type"] for b in sdk["content"]] == [b["type"] for b in ours["content"]]
    assert [b.get("input") for b in sdk["content"]] == [b.get("input") for b in ours["content"]]
    assert [b.get("signature") for b in sdk["content"]] == [b.get("signature") for b in ours["content"]]
    assert sdk["stop_reason"] == ours["stop_reason"]


def test_sdk_folds_the_legal_variations() -> None:
    """Pings anywhere, two message_delta events, a trailing [DONE] and an unknown event type: the
    official SDK still folds the message (the grammar passes the first two, and records the others
    as a SHOULD and as informational)."""
    events = load("anthropic_pings_two_deltas.sse")
    events.insert(3, ["surprise_event", {"type": "surprise_event", "detail": 1}])
    events.append([None, "[DONE]"])
    sdk = sdk_final_message(serialize(events))
    assert sdk["stop_reason"] == "tool_use" and sdk["usage"]["output_tokens"] == 21
    assert [b["type"] for b in sdk["content"]] == ["text", "tool_use"] and sdk["content"][1]["input"] == {"path": "a.txt"}
    findings = an.validate(frames(events))
    assert rules_of(findings) == {"AN-GRAMMAR-UNKNOWN-EVENT", "AN-GRAMMAR-DONE"}
    assert [f.informational for f in findings if f.rule == "AN-GRAMMAR-UNKNOWN-EVENT"] == [True]


def test_sdk_drops_frames_without_event_line() -> None:
    """Why AN-GRAMMAR-EVENT-LINE is its own rule: the SDK dispatches on the SSE event name, so a
    stream whose frames lack it folds to nothing, while a name that differs but is known still works."""
    events = load("anthropic_text.sse")
    without = [[None, d] for _, d in events]
    with pytest.raises((AssertionError, RuntimeError)):  # the SDK never saw a message_start
        sdk_final_message(serialize(without))
    assert rules_of(an.validate(frames(without))) == {"AN-GRAMMAR-EVENT-LINE"}
    renamed = copy.deepcopy(events)
    m_event_name(renamed)
    text = "".join(d["delta"]["text"] for _, d in events if d.get("type") == "content_block_delta")
    assert sdk_final_message(serialize(renamed))["content"][0]["text"] == text


# -- mutations ------------------------------------------------------------------------------

def m_non_json(e: Ev) -> None:
    e.insert(2, ["content_block_delta", "{not json"])


def m_done(e: Ev) -> None:
    e.append([None, "[DONE]"])


def m_event_name(e: Ev) -> None:
    e[find(e, delta_of("text_delta"))][0] = "message_delta"


def m_event_name_missing(e: Ev) -> None:
    e[find(e, delta_of("text_delta"))][0] = None


def m_event_name_unknown_to_sdk(e: Ev) -> None:
    e[find(e, delta_of("text_delta"))][0] = "delta"


def m_unknown(e: Ev) -> None:
    e.insert(2, ["surprise", {"type": "surprise"}])


def m_unknown_anywhere_ok(e: Ev) -> None:  # before message_start, inside a block, after message_stop
    e.insert(0, ["surprise", {"type": "surprise"}])
    e.insert(find(e, delta_of("text_delta")), ["citations_summary", {"type": "citations_summary", "n": 0}])
    e.append(["surprise", {"type": "surprise"}])


def m_type_not_a_string(e: Ev) -> None:
    e[find(e, delta_of("text_delta"))][1]["type"] = ["content_block_delta"]


def m_ping_everywhere_ok(e: Ev) -> None:
    for i in range(len(e), -1, -1):
        e.insert(i, ["ping", {"type": "ping"}])


def m_two_message_deltas_ok(e: Ev) -> None:  # usage cumulative; the stop_reason in the last one
    i = find(e, typ("message_delta"))
    first = copy.deepcopy(e[i])
    first[1]["delta"]["stop_reason"] = None
    first[1]["usage"]["output_tokens"] = 1
    e.insert(i, first)


def m_two_message_deltas_both_set_ok(e: Ev) -> None:
    i = find(e, typ("message_delta"))
    e.insert(i, copy.deepcopy(e[i]))


def m_last_message_delta_clears_stop_reason(e: Ev) -> None:  # the SDK takes every message_delta's value
    i = find(e, typ("message_delta"))
    last = copy.deepcopy(e[i])
    last[1]["delta"]["stop_reason"] = None
    e.insert(i + 1, last)


def m_start_late(e: Ev) -> None:
    e.insert(0, e.pop(find(e, typ("content_block_start"))))


def m_start_twice(e: Ev) -> None:
    e.insert(1, copy.deepcopy(e[0]))


def m_start_shape(e: Ev) -> None:
    e[0][1]["message"]["usage"].pop("input_tokens")


def m_start_content(e: Ev) -> None:
    e[0][1]["message"]["stop_reason"] = "end_turn"


def m_order(e: Ev) -> None:  # a whole new block after message_delta
    i = find(e, typ("message_delta"))
    e[i + 1 : i + 1] = [
        ["content_block_start", {"type": "content_block_start", "index": 2, "content_block": {"type": "text", "text": ""}}],
        ["content_block_delta", {"type": "content_block_delta", "index": 2, "delta": {"type": "text_delta", "text": "x"}}],
        ["content_block_stop", {"type": "content_block_stop", "index": 2}],
    ]


def m_index_gap(e: Ev) -> None:
    for _, d in e:
        if d.get("index") == 1:
            d["index"] = 2


def m_index_reuse(e: Ev) -> None:
    for _, d in e:
        if d.get("index") == 1:
            d["index"] = 0


def m_one_open(e: Ev) -> None:
    e.insert(find(e, typ("content_block_start"), 1), e.pop(find(e, typ("content_block_stop"), 0)))
    # the stop of block 0 now comes after block 1's start


def m_block_start_shape(e: Ev) -> None:
    e[find(e, start_of("text"))][1]["content_block"] = "text"


def m_delta_unstarted(e: Ev) -> None:
    e.insert(1, ["content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "x"}}])


def m_delta_after_stop(e: Ev) -> None:
    i = find(e, typ("content_block_stop"))
    e.insert(i + 1, ["content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "x"}}])


def m_double_stop(e: Ev) -> None:
    i = find(e, typ("content_block_stop"))
    e.insert(i + 1, copy.deepcopy(e[i]))


def m_unstopped(e: Ev) -> None:
    del e[find(e, typ("content_block_stop"), 1)]


def m_delta_type_tool(e: Ev) -> None:
    i = find(e, delta_of("input_json_delta"), 0)  # the fixture's first fragment is ""
    e[i][1]["delta"] = {"type": "text_delta", "text": "oops"}


def m_delta_malformed(e: Ev) -> None:
    e[find(e, delta_of("text_delta"))][1]["delta"] = {"type": "text_delta", "content": "x"}


def m_signature_missing(e: Ev) -> None:
    del e[find(e, delta_of("signature_delta"))]


def m_signature_empty(e: Ev) -> None:
    e[find(e, delta_of("signature_delta"))][1]["delta"]["signature"] = ""


def m_signature_after_stop(e: Ev) -> None:
    i = find(e, delta_of("signature_delta"))
    sig = e.pop(i)
    e.insert(i + 1, sig)


def m_thinking_after_signature(e: Ev) -> None:
    i = find(e, delta_of("signature_delta"))
    e.insert(i - 1, e.pop(i))


def m_tool_start(e: Ev) -> None:
    e[find(e, start_of("tool_use"))][1]["content_block"]["name"] = ""


def m_tool_start_input(e: Ev) -> None:
    e[find(e, start_of("tool_use"))][1]["content_block"]["input"] = {"location": "x"}


def m_tool_json(e: Ev) -> None:
    del e[find(e, delta_of("input_json_delta"), 2)]


def m_delta_usage(e: Ev) -> None:
    e[find(e, typ("message_delta"))][1]["usage"] = {}


def m_stop_reason_bad(e: Ev) -> None:
    e[find(e, typ("message_delta"))][1]["delta"]["stop_reason"] = "done"


def m_stop_reason_missing(e: Ev) -> None:
    e[find(e, typ("message_delta"))][1]["delta"]["stop_reason"] = None


def m_end_turn_after_tools(e: Ev) -> None:
    e[find(e, typ("message_delta"))][1]["delta"]["stop_reason"] = "end_turn"


def m_tool_use_without_tools(e: Ev) -> None:
    e[find(e, typ("message_delta"))][1]["delta"]["stop_reason"] = "tool_use"


def m_after_stop(e: Ev) -> None:
    e.append(copy.deepcopy(e[find(e, typ("message_delta"))]))


def m_ping_after_stop_ok(e: Ev) -> None:
    e.append(["ping", {"type": "ping"}])


def m_stop_missing(e: Ev) -> None:
    del e[-1]


def m_error(e: Ev) -> None:
    i = find(e, typ("content_block_stop"))
    e[i:] = [["error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}]]


def m_error_in_thinking(e: Ev) -> None:  # overloaded inside an open thinking block: no signature, no stop
    i = find(e, delta_of("signature_delta"))
    e[i:] = [["error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}]]


def m_error_first(e: Ev) -> None:  # the error right after the 200, before any message_start
    e[:] = [["error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}]]


def m_error_then_done(e: Ev) -> None:
    m_error(e)
    e.append([None, "[DONE]"])


def m_ping_after_error_ok(e: Ev) -> None:
    m_error(e)
    e.append(["ping", {"type": "ping"}])


def m_after_error(e: Ev) -> None:
    m_error(e)
    e.append(["message_stop", {"type": "message_stop"}])


MUTATIONS: list[tuple[str, Callable[[Ev], None], set[str]]] = [
    ("anthropic_text.sse", m_non_json, {"AN-GRAMMAR-JSON"}),
    ("anthropic_text.sse", m_done, {"AN-GRAMMAR-DONE"}),
    ("anthropic_text.sse", m_event_name, {"AN-GRAMMAR-EVENT-NAME"}),
    ("anthropic_text.sse", m_event_name_unknown_to_sdk, {"AN-GRAMMAR-EVENT-NAME"}),
    ("anthropic_text.sse", m_event_name_missing, {"AN-GRAMMAR-EVENT-LINE"}),
    ("anthropic_text.sse", m_unknown, {"AN-GRAMMAR-UNKNOWN-EVENT"}),
    ("anthropic_text.sse", m_unknown_anywhere_ok, {"AN-GRAMMAR-UNKNOWN-EVENT"}),
    ("anthropic_text.sse", m_type_not_a_string, {"AN-GRAMMAR-JSON"}),
    ("anthropic_interleaved.sse", m_ping_everywhere_ok, set()),
    ("anthropic_tool_use.sse", m_two_message_deltas_ok, set()),
    ("anthropic_text.sse", m_two_message_deltas_both_set_ok, set()),
    ("anthropic_text.sse", m_last_message_delta_clears_stop_reason, {"AN-GRAMMAR-STOP-REASON"}),
    ("anthropic_text.sse", m_start_late, {"AN-GRAMMAR-START"}),
    ("anthropic_text.sse", m_start_twice, {"AN-GRAMMAR-START"}),
    ("anthropic_text.sse", m_start_shape, {"AN-GRAMMAR-MESSAGE-START"}),
    ("anthropic_text.sse", m_start_content, {"AN-GRAMMAR-MESSAGE-START"}),
    ("anthropic_thinking.sse", m_order, {"AN-GRAMMAR-ORDER"}),
    ("anthropic_thinking.sse", m_index_gap, {"AN-GRAMMAR-INDEX"}),
    ("anthropic_tool_use.sse", m_index_reuse, {"AN-GRAMMAR-INDEX"}),
    ("anthropic_thinking.sse", m_one_open, {"AN-GRAMMAR-ONE-OPEN"}),
    ("anthropic_text.sse", m_block_start_shape, {"AN-GRAMMAR-BLOCK-START"}),
    ("anthropic_text.sse", m_delta_unstarted, {"AN-GRAMMAR-BLOCK-UNKNOWN"}),
    ("anthropic_text.sse", m_delta_after_stop, {"AN-GRAMMAR-BLOCK-CLOSED"}),
    ("anthropic_text.sse", m_double_stop, {"AN-GRAMMAR-BLOCK-CLOSED"}),
    ("anthropic_thinking.sse", m_unstopped, {"AN-GRAMMAR-BLOCK-UNSTOPPED"}),
    ("anthropic_tool_use.sse", m_delta_type_tool, {"AN-GRAMMAR-DELTA-TYPE"}),
    ("anthropic_text.sse", m_delta_malformed, {"AN-GRAMMAR-DELTA-TYPE"}),
    ("anthropic_thinking.sse", m_signature_missing, {"AN-GRAMMAR-SIGNATURE-MISSING"}),
    ("anthropic_thinking.sse", m_signature_empty, {"AN-GRAMMAR-SIGNATURE-MISSING"}),
    ("anthropic_thinking.sse", m_signature_after_stop, {"AN-GRAMMAR-SIGNATURE"}),
    ("anthropic_thinking.sse", m_thinking_after_signature, {"AN-GRAMMAR-SIGNATURE"}),
    ("anthropic_tool_use.sse", m_tool_start, {"AN-GRAMMAR-TOOL-START"}),
    ("anthropic_tool_use.sse", m_tool_start_input, {"AN-GRAMMAR-TOOL-START"}),
    ("anthropic_tool_use.sse", m_tool_json, {"AN-GRAMMAR-TOOL-JSON"}),
    ("anthropic_text.sse", m_delta_usage, {"AN-GRAMMAR-DELTA-USAGE"}),
    ("anthropic_text.sse", m_stop_reason_bad, {"AN-GRAMMAR-STOP-REASON"}),
    ("anthropic_text.sse", m_stop_reason_missing, {"AN-GRAMMAR-STOP-REASON"}),
    ("anthropic_parallel_tools.sse", m_end_turn_after_tools, {"AN-GRAMMAR-STOP-TOOL-USE"}),
    ("anthropic_text.sse", m_tool_use_without_tools, {"AN-GRAMMAR-STOP-TOOL-USE"}),
    ("anthropic_text.sse", m_after_stop, {"AN-GRAMMAR-AFTER-STOP"}),
    ("anthropic_text.sse", m_ping_after_stop_ok, set()),
    ("anthropic_interleaved.sse", m_stop_missing, {"AN-GRAMMAR-STOP-MISSING"}),
    ("anthropic_text.sse", m_error, {"AN-GRAMMAR-ERROR-EVENT"}),
    ("anthropic_thinking.sse", m_error_in_thinking, {"AN-GRAMMAR-ERROR-EVENT"}),
    ("anthropic_tool_use.sse", m_error_first, {"AN-GRAMMAR-ERROR-EVENT"}),
    ("anthropic_text.sse", m_error_then_done, {"AN-GRAMMAR-ERROR-EVENT", "AN-GRAMMAR-DONE"}),
    ("anthropic_text.sse", m_ping_after_error_ok, {"AN-GRAMMAR-ERROR-EVENT"}),
    ("anthropic_text.sse", m_after_error, {"AN-GRAMMAR-ERROR-EVENT", "AN-GRAMMAR-AFTER-ERROR"}),
]


@pytest.mark.parametrize(("fixture", "mutate", "expected"), MUTATIONS, ids=[m[1].__name__ for m in MUTATIONS])
def test_mutation_breaks_exactly_one_rule(fixture: str, mutate: Callable[[Ev], None], expected: set[str]) -> None:
    events = load(fixture)
    mutate(events)
    findings = an.validate(frames(events))
    assert rules_of(findings) == expected, [str(f) for f in findings]
    assert all(f.rule in an.RULES for f in findings)
    for f in findings:  # what was seen, what was wanted, where; informational exactly for those rules
        assert f.frame_index is not None and f.message and f.observed is not None, str(f)
        assert f.informational == (f.rule in an.INFORMATIONAL), str(f)
        assert f.expected is not None or f.informational, str(f)


def test_every_rule_has_a_failing_case() -> None:
    covered = set().union(*(m[2] for m in MUTATIONS))
    assert covered == set(an.RULES)
    assert an.INFORMATIONAL <= set(an.RULES)


def test_event_line_absent_and_name_differs_say_so() -> None:
    events = load("anthropic_text.sse")
    events[find(events, delta_of("text_delta"), 0)][0] = None  # the first text delta loses its line
    events[find(events, delta_of("text_delta"), 1)][0] = "message_delta"  # the second is misnamed
    by_rule = {f.rule: f for f in an.validate(frames(events))}
    absent, differs = by_rule["AN-GRAMMAR-EVENT-LINE"], by_rule["AN-GRAMMAR-EVENT-NAME"]
    assert "absent" in absent.message and "differs" not in absent.message
    assert "differs (event: message_delta, type: content_block_delta)" in differs.message
    assert absent.observed == "no event: line" and differs.observed == "event: message_delta, type: content_block_delta"


def test_event_line_summed_per_kind() -> None:
    """A stream without any `event:` line gets one finding per event type, at its first frame."""
    events = [[None, d] for _, d in load("anthropic_thinking.sse")]
    findings = an.validate(frames(events))
    assert rules_of(findings) == {"AN-GRAMMAR-EVENT-LINE"}
    kinds = {d["type"] for _, d in events} - {"ping"}  # the SDK skips pings with or without a name
    assert len(findings) == len(kinds)
    deltas = [f for f in findings if "`content_block_delta`" in f.message]
    n = sum(1 for _, d in events if d["type"] == "content_block_delta")
    assert len(deltas) == 1 and f"{n} `content_block_delta` frames" in deltas[0].message
    assert deltas[0].frame_index == find(events, typ("content_block_delta"))


def test_error_event_reports_the_body() -> None:
    events = load("anthropic_text.sse")
    m_error(events)
    (f,) = an.validate(frames(events))
    assert f.rule == "AN-GRAMMAR-ERROR-EVENT" and f.informational and f.frame_index == len(events) - 1
    assert json.loads(f.observed or "") == {"type": "overloaded_error", "message": "Overloaded"}
    assert "overloaded_error: Overloaded" in f.message
    assert "(informational)" in str(f)


def test_missing_end_points_at_the_last_frame() -> None:
    events = load("anthropic_interleaved.sse")
    m_stop_missing(events)
    (f,) = an.validate(frames(events))
    assert f.rule == "AN-GRAMMAR-STOP-MISSING" and f.frame_index == len(events) - 1
    assert f"ended after frame #{len(events) - 1}" in f.message and f.observed == "last event: message_delta"


def test_finding_points_at_the_frame() -> None:
    events = load("anthropic_text.sse")
    m_delta_after_stop(events)
    (f,) = an.validate(frames(events))
    assert f.frame_index == find(events, typ("content_block_stop")) + 1
    assert "AN-GRAMMAR-BLOCK-CLOSED at frame #" in str(f)
    assert isinstance(f, Finding) and f.to_dict()["rule"] == "AN-GRAMMAR-BLOCK-CLOSED"


def test_empty_stream() -> None:
    assert rules_of(an.validate([])) == {"AN-GRAMMAR-START", "AN-GRAMMAR-STOP-MISSING"}
    assert all(f.frame_index is None and "no frame" in f.message for f in an.validate([]))
    assert an.validate("garbage") != []  # not a frame list: treated as empty, never raises


# -- never raises ---------------------------------------------------------------------------

JSONISH = st.one_of(
    st.none(), st.booleans(), st.integers(-2, 3), st.text(max_size=4),
    st.lists(st.integers(), max_size=2), st.dictionaries(st.sampled_from(["type", "text", "index"]), st.integers(), max_size=2),
)
TYPES = st.sampled_from(sorted(an.EVENT_TYPES) + ["x"])
BLOCKS = st.sampled_from([{"type": "text", "text": ""}, {"type": "thinking"}, {"type": "tool_use", "id": "a", "name": "b", "input": {}}])
DELTAS = st.sampled_from([{"type": "text_delta", "text": "x"}, {"type": "input_json_delta", "partial_json": "{"},
                          {"type": "thinking_delta", "thinking": "t"}, {"type": "signature_delta", "signature": "s"},
                          {"stop_reason": "tool_use"}])


@st.composite
def plausible_event(draw: st.DrawFn) -> list[Any]:
    d: dict[str, Any] = {"type": draw(TYPES), "index": draw(st.integers(-1, 3) | JSONISH)}
    d["content_block"] = draw(BLOCKS | JSONISH)
    d["delta"] = draw(DELTAS | JSONISH)
    d["message"] = draw(st.just({"content": [], "stop_reason": None, "usage": {"input_tokens": 1, "output_tokens": 1}}) | JSONISH)
    d["usage"] = draw(JSONISH)
    name = draw(st.sampled_from([d["type"], None, "ping"]))
    return [name, draw(st.just(d) | JSONISH | st.sampled_from(["[DONE]", "{bad"]))]


@settings(max_examples=100, deadline=None)
@given(st.lists(plausible_event(), max_size=15))
@example([[None, {"type": ["message_start"]}],  # a type or stop_reason that is a list must not raise
          ["message_delta", {"type": "message_delta", "delta": {"stop_reason": ["end_turn"]}, "usage": {}}]])
def test_validator_and_fold_never_raise(events: Ev) -> None:
    fr = frames(events)
    findings = an.validate(fr)
    assert all(isinstance(f, Finding) and f.rule in an.RULES for f in findings)
    an.final_message(fr)
    answer_fold.agrees(apis.anthropic, fr)  # the answer's fold is the recorded one without its record
    json.dumps([f.to_dict() for f in findings])
