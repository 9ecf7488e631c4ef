"""The request-shape and tool-kind checks (conformance/test_request_shapes.py, test_tool_kinds.py): their
requests are requests the official SDKs type (so a real API takes them), their judges on answers written by
hand, and the reference server's answers to them judged by the official SDKs. That the clean server passes
each check and each planted fault fails it is the fault matrix's proof (test_self_conformance.py); the
levels follow their evidence (last test)."""

from __future__ import annotations

import json

import httpx
import openai

from harnesscheck.protocol import apis
from harnesscheck.conformance import catalog
from harnesscheck.protocol.apis.base import ToolCall
from harnesscheck.conformance.test_request_shapes import (
    cache_control_bodies,
    count_bodies,
    count_problems,
    reasoning_history,
    screenshot_turn,
    server_tool_problems,
    server_tools_request,
    thinking_switch_bodies,
    with_thinking_cache_control,
)
from harnesscheck.protocol.wire.sse import SSEFrame
from harnesscheck.conformance.test_tool_kinds import (
    PATCH,
    argument_problems,
    codex_tools,
    custom_call_problems,
    custom_items_input,
    custom_stream_problems,
    patch_request,
    replayed_without_ids,
    strict_tools,
)
from harnesscheck.scenarios.loader import load_all
from tests.conformance.test_apis import sdk_accepts, with_sdk_required

MODEL = "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4"  # the reference server's default model
CALCULATOR = load_all()["calculator"]


def test_the_responses_requests_are_sdk_requests() -> None:
    body = apis.responses.first(CALCULATOR, MODEL, stream=False)
    sdk_accepts("responses", with_sdk_required({**body, "tools": codex_tools(body["tools"])}))
    sdk_accepts("responses", with_sdk_required({**body, "text": {"verbosity": "low"}}))
    for stream in (True, False):
        sdk_accepts("responses", with_sdk_required(patch_request(MODEL, stream=stream)))
    sdk_accepts("responses", with_sdk_required(custom_items_input(MODEL)))
    sdk_accepts("responses", replayed_without_ids(MODEL))  # as it is: no id or status to fill in


def test_the_anthropic_and_chat_requests_are_sdk_requests() -> None:
    sdk_accepts("anthropic", screenshot_turn(MODEL))
    sdk_accepts("anthropic", server_tools_request(MODEL, apis.anthropic.tools(CALCULATOR)[0]))
    body = apis.anthropic.first(CALCULATOR, MODEL, stream=False)
    sdk_accepts("anthropic", cache_control_bodies(body)["AN-REQ-004"])  # scope is Claude Code's, not typed
    chat = apis.chat.first(CALCULATOR, MODEL, stream=False)
    typed = [b for rule, _, b in thinking_switch_bodies(chat) if rule == "CH-REQ-002"]
    sdk_accepts("chat", typed[0])  # chat_template_kwargs is vLLM's and SGLang's extension, not typed
    for api in apis.NAMES:
        tools, _ = strict_tools(api, CALCULATOR.tools)
        sdk_accepts(api, with_sdk_required({**apis.get(api).first(CALCULATOR, MODEL), "tools": tools,
                                            "tool_choice": apis.get(api).tool_choice("required")}))


# -- the judges, on answers written by hand ------------------------------------------------------

CUSTOM_ITEM = {"type": "custom_tool_call", "id": "ctc_1", "call_id": "call_1", "name": "apply_patch", "input": PATCH,
               "status": "completed"}


def test_custom_call_judge() -> None:
    assert custom_call_problems({"output": [CUSTOM_ITEM]}, "apply_patch") == []
    as_function = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "apply_patch",
                   "arguments": json.dumps({"input": PATCH})}
    (problem,) = custom_call_problems({"output": [as_function]}, "apply_patch")
    assert "came back as a function_call item" in problem
    (problem,) = custom_call_problems({"output": [{"type": "message", "content": []}]}, "apply_patch")
    assert problem.startswith("the forced custom tool apply_patch was not called (the answer: message)")
    wrapped = {**CUSTOM_ITEM, "input": json.dumps({"input": PATCH}), "call_id": ""}
    assert [p.split(" (")[0] for p in custom_call_problems({"output": [wrapped]}, "apply_patch")] == [
        "the custom_tool_call has no call_id", "the custom_tool_call's input is the JSON of a function's arguments"]


def _custom_events(deltas: list[str], done: str, final: str) -> list[SSEFrame]:
    """A Responses stream with one custom tool call: its input deltas, its .done and its item at the end."""
    where = {"item_id": "ctc_1", "output_index": 0}
    events = [{"type": "response.created", "response": {"id": "r", "output": []}},
              {"type": "response.in_progress", "response": {"id": "r", "output": []}},
              {"type": "response.output_item.added", "output_index": 0, "item": {**CUSTOM_ITEM, "input": ""}},
              *({"type": "response.custom_tool_call_input.delta", "delta": d, **where} for d in deltas),
              {"type": "response.custom_tool_call_input.done", "input": done, **where},
              {"type": "response.output_item.done", "output_index": 0, "item": {**CUSTOM_ITEM, "input": final}},
              {"type": "response.completed", "response": {"id": "r", "status": "completed", "output": []}}]
    return [SSEFrame.make({**e, "sequence_number": i}, event=e["type"], index=i) for i, e in enumerate(events)]


def test_custom_stream_judge() -> None:
    assert custom_stream_problems(_custom_events(["*** Begin", " Patch"], "*** Begin Patch", "*** Begin Patch")) == []
    (problem,) = custom_stream_problems(_custom_events(["*** Begin"], "*** Begin Patch", "*** Begin Patch"))
    assert "the joined deltas '*** Begin'" in problem
    events = [f for f in _custom_events(["x"], "x", "x") if f.event != "response.custom_tool_call_input.done"]
    assert custom_stream_problems(events) == ["custom_tool_call ctc_1 ended without "
                                              "response.custom_tool_call_input.done"]


def test_streamed_argument_judge() -> None:
    _, schemas = strict_tools("anthropic", CALCULATOR.tools)
    right = ToolCall(0, 0, "toolu_1", "calculator", '{"expression": "15 * 23"}')
    assert argument_problems([right], schemas) == []
    empty = ToolCall(0, 0, "toolu_1", "calculator", "{}")  # `input: {}` on a streamed tool_use
    (problem,) = argument_problems([empty], schemas)
    assert "'expression' is a required property" in problem
    assert "a tool the request does not declare" in argument_problems([ToolCall(0, 0, "x", "nope", "{}")], schemas)[0]
    assert "not JSON" in argument_problems([ToolCall(0, 0, "x", "calculator", "")], schemas)[0]


def test_server_tool_judge() -> None:
    ran = {"content": [{"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "q"}},
                       {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []},
                       {"type": "text", "text": "Sunny."}]}
    assert server_tool_problems(ran) == []
    assert server_tool_problems({"content": [{"type": "text", "text": "I cannot search."}]}) == []  # left out
    (problem,) = server_tool_problems({"content": [{"type": "tool_use", "id": "toolu_1", "name": "web_search",
                                                    "input": {}}]})
    assert "came back as a client tool_use block" in problem
    (problem,) = server_tool_problems({"content": ran["content"][:1]})
    assert "has no web_search_tool_result block" in problem


def test_count_judge_and_bodies() -> None:
    body = apis.anthropic.first(CALCULATOR, MODEL, stream=False)
    bodies = count_bodies(body)
    assert [set(b) for _, b in bodies] == [{"model", "messages"}, {"model", "messages", "system"},
                                           {"model", "messages", "system", "tools"}] + [
        {"model", "messages", "system", "tools"}]
    assert len(bodies[-1][1]["messages"]) == 3
    assert count_problems([("a", 40), ("b", 60), ("c", 120), ("d", 140)]) == []
    assert count_problems([("a", 40), ("the system prompt", 40), ("c", 120), ("d", None)]) == [
        "count_tokens counts 40 with the system prompt added, 40 before: it does not count the system prompt",
        "count_tokens counts None with d added, 120 before: it does not count d"]


def test_request_builders() -> None:
    body = apis.anthropic.first(CALCULATOR, MODEL, stream=False)
    forms = cache_control_bodies(body)
    assert forms["AN-REQ-004"]["cache_control"] == {"type": "ephemeral"}
    assert forms["AN-REQ-004"]["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert forms["AN-REQ-004:scope"]["system"][0]["cache_control"]["scope"] == "global"
    assert "cache_control" not in body and isinstance(body["system"], str)  # the builders copy
    turn = {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "t", "signature": "s"}, {"type": "text", "text": "a"}]}]}
    marked = with_thinking_cache_control(turn)
    assert marked is not None and marked["messages"][1]["content"][0]["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in turn["messages"][1]["content"][0]
    assert with_thinking_cache_control({"messages": [{"role": "user", "content": "q"}]}) is None
    chat = apis.chat.first(CALCULATOR, MODEL, stream=False)
    for name in ("reasoning_content", "reasoning"):
        assistant = reasoning_history(chat, name, "m1")["messages"][-2]
        assert assistant[name] == "Reasoning m1: 15 * 23 = 345." and assistant["tool_calls"]


# -- the reference server's answers, judged by the official SDK ----------------------------------

def test_the_openai_sdk_folds_a_custom_tool_call_stream(reference_server: str) -> None:
    """openai-python's Responses stream helper over the reference server's forced custom tool: the final
    response holds a ResponseCustomToolCall with the patch as its input, and every event parses."""
    client = openai.OpenAI(base_url=reference_server + "/v1", api_key="x")
    body = patch_request(MODEL, stream=True)
    body.pop("stream")
    with client.responses.stream(**body) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()
    assert "response.custom_tool_call_input.delta" in kinds and "response.custom_tool_call_input.done" in kinds
    (call,) = [item for item in final.output if item.type == "custom_tool_call"]
    assert (call.name, call.input) == ("apply_patch", PATCH) and call.call_id
    answer = client.responses.create(**body)  # not streamed: the same call
    assert [(i.type, getattr(i, "input", None)) for i in answer.output] == [("custom_tool_call", PATCH)]


def test_the_reference_server_takes_the_tool_kinds_and_items(reference_server: str) -> None:
    body = apis.responses.first(CALCULATOR, MODEL, stream=False)
    r = httpx.post(reference_server + "/v1/responses", json={**body, "tools": codex_tools(body["tools"])}, timeout=30)
    assert r.status_code == 200, r.text
    for follow in (custom_items_input(MODEL), replayed_without_ids(MODEL)):
        r = httpx.post(reference_server + "/v1/responses", json=follow, timeout=30)
        assert r.status_code == 200, r.text
    # the namespace's function is offered to the model, and its call names the namespace
    body = {"model": MODEL, "stream": False, "max_output_tokens": 200, "tools": codex_tools([]),
            "input": [{"type": "message", "role": "user", "content": "Use search_docs to find the install guide."}]}
    (call,) = [i for i in httpx.post(reference_server + "/v1/responses", json=body, timeout=30).json()["output"]
               if i["type"] == "function_call"]
    assert (call["name"], call["namespace"]) == ("search_docs", "mcp__docs")


def test_levels_follow_the_evidence() -> None:
    """MUST where a reference states it; SHOULD for client habits the references do not type."""
    should = {"RS-TOOLKIND-002:stream", "AN-REQ-004:scope", "AN-REQ-004:thinking", "AN-USAGE-005:route",
              "CH-HIST-003", "CH-REQ-002:kwargs"}
    ours = [r for r in catalog.RULES if r.split(":")[0] in {
        "RS-TOOLKIND-001", "RS-TOOLKIND-002", "RS-TOOLKIND-003", "AN-TOOLS-006", "CH-TOOLS-006", "RS-TOOLS-006",
        "AN-REQ-004", "AN-REQ-005", "AN-REQ-006", "AN-REQ-007", "AN-USAGE-005", "CH-HIST-003", "CH-REQ-002",
        "RS-REQ-003"}]
    client = {"RS-TOOLKIND-002:call-id"}  # Codex measured to drop a call without call_id (rs-missing-call-id)
    assert len(ours) == 24
    for rule in ours:
        level = catalog.RULES[rule].level
        assert str(level) == ("SHOULD" if rule in should else "MUST"), rule
        assert catalog.RULES[rule].evidence_kind == (
            "none" if rule in should else "client" if rule in client else "reference"), rule

