"""The levers (conformance/levers.py) as pure functions: what each does to an opening request in each
API, what it never touches, which checks take which, and the dynamo-mocker peer profile's annotation."""

from __future__ import annotations

import copy

from harnesscheck.protocol import apis
from harnesscheck.conformance import catalog, levers
from harnesscheck.conformance.mocker_replay import scripted_texts
from harnesscheck.scenarios.loader import get

MODEL = "m"


def _first(api: str, scenario: str = "calculator") -> dict:
    return apis.get(api).first(get(scenario), MODEL)


def _bend(api: str, names: list[str], body: dict, wanted=(catalog.TOOL_USE,)) -> tuple[dict, list[str]]:
    return levers.bend([levers.BY_NAME[n] for n in names], api, body, wanted)


def test_each_lever_in_each_api_the_references_way():
    for api in apis.NAMES:
        body = _first(api)
        original = copy.deepcopy(body)
        bent, used = _bend(api, ["name-the-tool", "tool-choice-required", "thinking-off", "thinking-off-template"], body)
        assert body == original, "a lever never changes the check's own body"
        assert used == ["name-the-tool", "tool-choice-required", "thinking-off", "thinking-off-template"]
        assert bent["tool_choice"] == apis.get(api).tool_choice("required")
        assert bent["chat_template_kwargs"] == {"enable_thinking": False}
        text = bent["messages"][-1]["content"] if api != "responses" else bent["input"][-1]["content"]
        assert text.startswith(get("calculator").trigger) and text.endswith("Call the calculator tool now.")
    assert _bend("anthropic", ["thinking-off"], _first("anthropic"))[0]["thinking"] == {"type": "disabled"}
    assert _bend("chat", ["thinking-off"], _first("chat"))[0]["reasoning_effort"] == "none"
    assert _bend("responses", ["thinking-off"], _first("responses"))[0]["reasoning"] == {"effort": "none"}
    assert _bend("chat", ["reasoning-minimal"], _first("chat"))[0]["reasoning_effort"] == "minimal"
    on, _ = _bend("anthropic", ["thinking-on"], _first("anthropic"), (catalog.THINKING,))
    assert on["thinking"] == {"type": "enabled", "budget_tokens": 1024} and on["max_tokens"] > 1024
    assert _bend("responses", ["thinking-on"], _first("responses"), (catalog.THINKING,))[0]["reasoning"] == \
        {"effort": "high", "summary": "auto"}
    prefilled, used = _bend("anthropic", ["prefill"], _first("anthropic"))
    assert prefilled["messages"][-1] == {"role": "assistant", "content": "I will call the calculator tool now."}
    assert _bend("chat", ["prefill"], _first("chat"))[1] == []  # only the Messages API takes a prefill


def test_a_bound_leaves_out_a_lever_whose_request_could_not_go_within_it():
    """--quick's bound: Anthropic thinking on needs an output limit above its 1,024-token budget, so under a
    512-token bound it is not pulled; the same switch on the OpenAI APIs asks for no limit and still is; a
    check's own thinking (the least limit before the lever) is not the lever's doing and stays."""
    wanted = (catalog.THINKING,)
    on = [levers.BY_NAME["thinking-on"]]
    assert levers.bend(on, "anthropic", _first("anthropic"), wanted, bound=512)[1] == []
    assert levers.bend(on, "anthropic", _first("anthropic"), wanted, bound=2048)[1] == ["thinking-on"]
    assert levers.bend(on, "anthropic", _first("anthropic"), wanted)[1] == ["thinking-on"]
    for api in ("chat", "responses"):
        assert levers.bend(on, api, _first(api), wanted, bound=512)[1] == ["thinking-on"]
    thinking = apis.get("anthropic").thinking_on(_first("anthropic"))
    words = levers.bend([levers.BY_NAME["name-the-tool"]], "anthropic", thinking, wanted, bound=512)
    assert words[1] == ["name-the-tool"]


def test_a_lever_never_changes_what_the_check_set():
    body = {**_first("chat"), "tool_choice": "none", "reasoning_effort": "high"}
    bent, used = _bend("chat", ["tool-choice-required", "thinking-off"], body)
    assert (bent["tool_choice"], bent["reasoning_effort"], used) == ("none", "high", [])
    no_tools = {k: v for k, v in _first("chat", "plain_text").items() if k != "tools"}
    assert _bend("chat", ["tool-choice-required"], no_tools)[1] == []


def test_only_opening_requests_are_bent():
    for api in apis.NAMES:
        scenario = get("calculator")
        first = _first(api)
        assert levers.is_opening(api, first)
        answer = {"anthropic": {"content": [{"type": "tool_use", "id": "t1", "name": "calculator",
                                             "input": {"expression": "1"}}]},
                  "chat": {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [
                      {"id": "t1", "type": "function", "function": {"name": "calculator", "arguments": "{}"}}]}}]},
                  "responses": {"output": [{"type": "function_call", "call_id": "t1", "name": "calculator",
                                            "arguments": "{}"}]}}[api]
        follow = apis.get(api).follow(first, answer, scenario, 1)
        assert not levers.is_opening(api, follow), api
    assert not levers.is_opening("responses", {"input": "hi", "previous_response_id": "resp_1"})


def test_which_checks_take_which_levers():
    names = lambda api, paths, check="": [lv.name for lv in levers.ladder(api, paths, check_id=check)]  # noqa: E731
    assert names("chat", [catalog.TOOL_USE]) == ["name-the-tool", "tool-choice-required", "thinking-off",
                                                 "reasoning-minimal", "thinking-off-template", "no-think"]
    soft = _bend("chat", ["no-think"], _first("chat"))  # Qwen3's soft switch, after the user's own words
    assert soft[1] == ["no-think"] and soft[0]["messages"][-1]["content"].endswith(" /no_think"), soft
    assert levers.allowed(["no-think"], "CH-TOOLS-001")  # a thinking-off lever: the forcing checks take it
    # an agent turn wants thinking on before a forced call (vLLM constrains the call after the reasoning),
    # and the Messages API refuses forced tool use with thinking: that combination is never sent
    assert names("anthropic", [catalog.AGENT_TURN]) == ["name-the-tool", "thinking-on", "thinking-on-template",
                                                        "tool-choice-required"]
    both = _bend("anthropic", ["thinking-on", "tool-choice-required"], _first("anthropic"), (catalog.AGENT_TURN,))
    assert both[1] == ["thinking-on"] and "tool_choice" not in both[0]
    assert names("anthropic", [catalog.TOOL_USE])[-1] == "prefill"
    assert "tool-choice-required" not in names("chat", [catalog.TOOL_USE], "CH-TOOLS-002")
    assert names("anthropic", [catalog.THINKING], "AN-HIST-003") == []
    assert names("responses", [catalog.THINKING]) == ["name-the-tool", "thinking-on", "thinking-on-template"]
    assert levers.allowed(["name-the-tool", "thinking-off"], "CH-TOOLS-002")
    assert not levers.allowed(["tool-choice-required"], "CH-TOOLS-002")
    assert levers.allowed(["tool-choice-required"], "CH-STREAM-003")
    assert not levers.allowed(["name-the-tool"], "AN-HIST-003") and levers.allowed(["replay:hc-x-0"], "AN-HIST-003")
    # a named forced tool is no lever: on Chat it changes what CH-GRAMMAR-FINISH-TOOL-CALLS may see (stop)
    assert all("named" not in lv.name for lv in levers.LADDER)


def test_the_dynamo_mocker_profile_names_each_scenario_turn():
    for api in apis.NAMES:
        first = _first(api)
        bent, marks = levers.peer_bend("dynamo-mocker", api, first)
        assert bent["nvext"] == {"annotations": ["output_replay_id:hc-calculator-0"]} and marks == ["replay:hc-calculator-0"]
        forced = {**first, "tool_choice": apis.get(api).tool_choice("required")}
        assert levers.peer_bend("dynamo-mocker", api, forced) == (forced, [])  # the mocker cannot force
        assert levers.peer_bend("", api, first) == (first, [])
    texts = scripted_texts("qwen3", "hermes")
    assert set(texts) >= {"hc-calculator-0", "hc-calculator-1", "hc-parallel_tools-0", "hc-plain_text-0"}
    assert texts["hc-calculator-0"].startswith("<think>\n") and '"name": "calculator"' in texts["hc-calculator-0"]
    assert texts["hc-parallel_tools-0"].count("<tool_call>") == 2


def test_a_follow_up_turn_keeps_the_words_and_the_thinking_switch_not_the_forcing():
    """A later turn's history holds the first user message as it was sent, and a client keeps its thinking
    setting; the forced choice and the prefill bend the opening request only."""
    names = ["name-the-tool", "tool-choice-required", "thinking-off", "prefill"]
    opening, _ = _bend("anthropic", names, _first("anthropic"))
    answer = {"content": [{"type": "tool_use", "id": "t1", "name": "calculator", "input": {"expression": "1"}}]}
    follow = apis.get("anthropic").follow(_first("anthropic"), answer, get("calculator"), 1)
    bent, used = _bend("anthropic", names, follow)
    assert used == ["name-the-tool", "thinking-off"] and "tool_choice" not in bent
    assert bent["thinking"] == {"type": "disabled"} and bent["messages"][-1]["role"] == "user"
    assert bent["messages"][0] == opening["messages"][0]  # the words as sent, once
    assert _bend("anthropic", names, bent)[0]["messages"][0] == opening["messages"][0]  # not twice


def test_a_tool_input_that_is_no_json_is_kept_as_sent():
    """vLLM 0.32 under a forced choice streamed `Infinity` as a tool's input: Python's json reads it, but
    it is no JSON (RFC 8259) and a history holding the float could never be sent again (a kit error in
    every later check): the fold keeps the text, and the grammar reports it."""
    from harnesscheck.protocol.apis import anthropic

    block = anthropic._parse_tool_input({"type": "tool_use", "id": "t", "name": "calculator",
                                         "_partial_json": "Infinity"})
    assert block["input"] == "Infinity"
    assert anthropic._parse_tool_input({"type": "tool_use", "_partial_json": '{"a": NaN}'})["input"] == '{"a": NaN}'
    assert anthropic._parse_tool_input({"type": "tool_use", "_partial_json": '{"a": 1}'})["input"] == {"a": 1}
    # a number past a float's range (vLLM 0.32 streamed '4293...e672...' under a forced choice): Python reads
    # inf, the same kit error in every later check (docs/peers/vllm-0.32.md)
    parse = anthropic._parse_tool_input
    assert parse({"type": "tool_use", "_partial_json": "42e67234172"})["input"] == "42e67234172"
    assert parse({"type": "tool_use", "_partial_json": '{"a": 2.5e3}'})["input"] == {"a": 2500.0}
