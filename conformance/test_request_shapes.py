"""Request shapes the real clients send now, accepted as the official APIs accept them (docs/API_FACTS.md,
"Request shapes and tool kinds").

Anthropic:
- ``AN-REQ-004``: cache_control with ``ttl: "1h"`` and at the top level (rule ``<ID>``), with ``scope``
  (``<ID>:scope``, Claude Code's), and on a thinking block sent back (``<ID>:thinking``).
- ``AN-REQ-005``: base64 image blocks inside ``tool_result`` content (screenshots).
- ``AN-REQ-006``: server tools (``web_search_20250305``, ``web_fetch_20250910``) beside a client tool are
  accepted (``<ID>``) and either run (a ``server_tool_use`` block with its result block) or are left out,
  never answered as a client ``tool_use`` (``<ID>:client``); the prompt names the server tool, so an
  endpoint that offers it to the model as a client tool gets its call.
- ``AN-REQ-007``: thinking blocks sent back with their signatures (the endpoint's own, the calculator
  scenario's next turn) are accepted; their order in the prompt is AN-HIST-001's.
- ``AN-USAGE-005``: ``POST /v1/messages/count_tokens?beta=true`` (as Claude Code calls it) is served
  (``<ID>:route``) and counts the system prompt, the tools and the whole history: each added to a request
  makes its count grow (``<ID>``).

Chat:
- ``CH-HIST-003``: an assistant message's reasoning reaches the prompt under ``reasoning_content`` and
  under ``reasoning`` alike, witnessed as the history checks witness it: the chat-form /tokenize rendering
  holds it under both names (or under neither: the template keeps no such reasoning), else the cache
  reads a history sent under the second name as the first one's prefix.
- ``CH-REQ-002``: ``reasoning_effort`` (``<ID>``) and ``chat_template_kwargs: {"enable_thinking": false}``
  (``<ID>:kwargs``) are accepted, and a forced call is still a tool call with thinking off (``<ID>:tools``).

Responses:
- ``RS-REQ-003``: ``text`` without ``format`` (Codex sends ``{"verbosity": ...}``) is accepted (``<ID>``);
  a ``max_output_tokens: 1`` probe is answered, or refused with a 4xx in OpenAI's error shape (the API's
  minimum is 16), never a 5xx (``<ID>:probe``).
"""

from __future__ import annotations

import copy
import uuid
from typing import Any

import pytest

from harnesscheck.protocol import apis
from harnesscheck.conformance.session import Session, final_answer
from harnesscheck.conformance.verdict import CheckFailed, fail, inconclusive, ok_response, skip
from harnesscheck.protocol.wire.transcript import Transcript
from harnesscheck.conformance.witnesses import SLACK, WitnessUnavailable, tokenize_route

CLAUDE_CODE_BETAS = "claude-code-20250219,interleaved-thinking-2025-05-14,context-management-2025-06-27"
# A 1x1 PNG: the smallest screenshot.
PNG_1X1 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
SERVER_TOOLS = [{"type": "web_search_20250305", "name": "web_search", "max_uses": 2},
                {"type": "web_fetch_20250910", "name": "web_fetch", "max_uses": 1}]
SERVER_RESULTS = {"web_search": "web_search_tool_result", "web_fetch": "web_fetch_tool_result"}


def _accepted(t: Transcript, what: str, rule: str) -> None:
    """ok_response, failing on `rule` (a refusal of a request the references allow)."""
    try:
        ok_response(t, what)
    except CheckFailed as failed:
        raise CheckFailed(failed.summary, transcript=t, rule=rule) from None


def _small(body: dict[str, Any], api: str = "anthropic") -> dict[str, Any]:
    """The request not streamed, with a small output limit: only its acceptance is judged."""
    module = apis.get(api)
    body = {**body, "stream": False, module.MAX_TOKENS_FIELD: max(module.MIN_OUTPUT_TOKENS, 32)}
    body.pop("stream_options", None)
    return body


# -- AN-REQ-004: cache_control -------------------------------------------------------------------

def cache_control_bodies(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The calculator request with cache_control as Claude Code sends it, by rule: ttl 1h on the system
    blocks and the last tool plus a top-level cache_control (<ID>), and a system block's with scope."""
    hour = {"type": "ephemeral", "ttl": "1h"}
    ttl = copy.deepcopy(body)
    ttl["system"] = [{"type": "text", "text": body["system"], "cache_control": hour}]
    ttl["tools"][-1]["cache_control"] = hour
    ttl["cache_control"] = {"type": "ephemeral"}
    scope = copy.deepcopy(body)
    scope["system"] = [{"type": "text", "text": body["system"], "cache_control": {**hour, "scope": "global"}}]
    return {"AN-REQ-004": ttl, "AN-REQ-004:scope": scope}


def with_thinking_cache_control(body: dict[str, Any]) -> dict[str, Any] | None:
    """A follow-up with cache_control on the first thinking block sent back (None: it sends back none)."""
    body = copy.deepcopy(body)
    for message in body["messages"]:
        for block in message.get("content") if isinstance(message.get("content"), list) else []:
            if message.get("role") == "assistant" and block.get("type") == "thinking":
                block["cache_control"] = {"type": "ephemeral"}
                return body
    return None


@pytest.mark.check("AN-REQ-004")
def test_cache_control_forms(hc: Session) -> None:
    headers = {"anthropic-beta": CLAUDE_CODE_BETAS}
    for rule, body in cache_control_bodies(_small(hc.body("anthropic", "calculator"))).items():
        what = "cache_control with ttl 1h and at the top level" if rule == "AN-REQ-004" else \
            "cache_control with scope global"
        _accepted(hc.post("anthropic", apis.anthropic.PATH, body, headers=headers, label=what), what, rule)
    answer = final_answer("anthropic", hc.stream("anthropic", "calculator"))
    if answer is not None:
        scenario = hc.scenario("calculator")
        follow = with_thinking_cache_control(apis.anthropic.follow(apis.anthropic.first(scenario, hc.endpoint.model),
                                                                   answer, scenario, 1))
        if follow is not None:
            what = "cache_control on a thinking block sent back"
            _accepted(hc.post("anthropic", apis.anthropic.PATH, _small(follow), headers=headers, label=what), what,
                      "AN-REQ-004:thinking")
    hc.require_exercised("AN-REQ-004")


# -- AN-REQ-005: images in tool results ----------------------------------------------------------

SCREENSHOT_TOOL = {"name": "screenshot", "description": "Take a screenshot of the screen.",
                   "input_schema": {"type": "object", "properties": {}}}


def screenshot_turn(model: str) -> dict[str, Any]:
    """A turn after a screenshot tool's call, its result an image (base64) beside text."""
    return {"model": model, "max_tokens": 32, "tools": [SCREENSHOT_TOOL], "messages": [
        {"role": "user", "content": "Take a screenshot and tell me what the screen shows."},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_kit_shot", "name": "screenshot",
                                           "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_kit_shot", "content": [
            {"type": "text", "text": "The screen:"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG_1X1}}]}]}]}


@pytest.mark.check("AN-REQ-005")
def test_image_in_tool_result(hc: Session) -> None:
    ok_response(hc.post("anthropic", apis.anthropic.PATH, screenshot_turn(hc.endpoint.model),
                        label="an image inside tool_result content"), "a tool_result holding an image block")


# -- AN-REQ-006: server tools --------------------------------------------------------------------

def server_tools_request(model: str, client_tool: dict[str, Any]) -> dict[str, Any]:
    return {"model": model, "max_tokens": 256, "tools": [client_tool, *SERVER_TOOLS], "messages": [
        {"role": "user", "content": "Use web_search to find today's weather in Lima, then answer in one line."}]}


def server_tool_problems(message: dict[str, Any]) -> list[str]:
    """Client tool_use blocks for server tools, and server_tool_use blocks without their result block."""
    blocks = [b for b in message.get("content") or [] if isinstance(b, dict)]
    problems = [f"the server tool {b.get('name')} came back as a client tool_use block (input "
                f"{b.get('input')!r}): the client is asked to run a tool it never declared"
                for b in blocks if b.get("type") == "tool_use" and b.get("name") in SERVER_RESULTS]
    results = {b.get("tool_use_id") for b in blocks if b.get("type") in SERVER_RESULTS.values()}
    problems += [f"server_tool_use {b.get('name')} ({b.get('id')}) has no "
                 f"{SERVER_RESULTS.get(str(b.get('name')), 'result')} "
                 "block: the server tool did not run"
                 for b in blocks if b.get("type") == "server_tool_use" and b.get("id") not in results]
    return problems


@pytest.mark.check("AN-REQ-006")
def test_server_tools_beside_client_tools(hc: Session) -> None:
    client_tool = apis.anthropic.tools(hc.scenario("calculator"))[0]
    t = hc.post("anthropic", apis.anthropic.PATH, server_tools_request(hc.endpoint.model, client_tool),
                label="web_search and web_fetch server tools beside a client tool")
    ok_response(t, "a request with server tools beside a client tool")
    problems = server_tool_problems(t.json_body() or {})
    if problems:
        fail(problems[0], transcript=t, rule="AN-REQ-006:client")


# -- AN-REQ-007: thinking blocks sent back -------------------------------------------------------

@pytest.mark.check("AN-REQ-007")
def test_thinking_blocks_sent_back(hc: Session) -> None:
    t = hc.stream("anthropic", "calculator", turn=1)  # the endpoint's own thinking blocks, signatures included
    ok_response(t, "the next turn with the thinking blocks (and signatures) of the endpoint's answer")
    hc.require_exercised("AN-REQ-007")


# -- AN-USAGE-005: count_tokens ------------------------------------------------------------------

COUNT_PATH = f"{apis.anthropic.PATH}/count_tokens?beta=true"
COUNT_BETA = {"anthropic-beta": "token-counting-2024-11-01"}


def count_bodies(body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(what it adds, body) from the newest message alone to the whole request: each one holds more."""
    last = {"model": body["model"], "messages": body["messages"][-1:]}
    system = {**last, "system": body["system"]}
    tools = {**system, "tools": body["tools"]}
    history = {**tools, "messages": [{"role": "user", "content": "An earlier question: what is 2 + 2?"},
                                     {"role": "assistant", "content": "2 + 2 = 4."}, *body["messages"][-1:]]}
    return [("the newest message alone", last), ("the system prompt", system), ("the tools", tools),
            ("two earlier turns", history)]


def count_problems(counts: list[tuple[str, Any]]) -> list[str]:
    """Where adding a part of the request did not make the count grow."""
    out = []
    for (before, a), (added, b) in zip(counts, counts[1:]):
        if not (isinstance(a, int) and isinstance(b, int)) or b <= a:
            out.append(f"count_tokens counts {b!r} with {added} added, {a!r} before: it does not count {added}")
    return out


@pytest.mark.check("AN-USAGE-005")
def test_count_tokens_counts_the_whole_request(hc: Session) -> None:
    counts: list[tuple[str, Any]] = []
    for what, body in count_bodies(hc.body("anthropic", "calculator", stream=False)):
        t = hc.post("anthropic", COUNT_PATH, body, headers=COUNT_BETA, label=f"count_tokens ({what})")
        if t.status in (404, 405):
            fail(f"POST {COUNT_PATH} answered {t.status}: Claude Code counts tokens there", transcript=t,
                 rule="AN-USAGE-005:route")
        ok_response(t, "count_tokens")
        counts.append((what, (t.json_body() or {}).get("input_tokens") if isinstance(t.json_body(), dict) else None))
    problems = count_problems(counts)
    if problems:
        fail(problems[0] + " (counts: " + ", ".join(f"{w} {c}" for w, c in counts) + ")", transcript=t)


# -- CH-HIST-003: history reasoning under two names ----------------------------------------------

NAMES = ("reasoning_content", "reasoning")


def reasoning_history(body: dict[str, Any], name: str, marker: str) -> dict[str, Any]:
    """The calculator request after the model's turn (reasoning under `name`, one call) and its result."""
    body = copy.deepcopy(body)
    call = {"id": "call_kit_calc", "type": "function",
            "function": {"name": "calculator", "arguments": '{"expression": "15 * 23"}'}}
    body["messages"] += [{"role": "assistant", "content": None, name: f"Reasoning {marker}: 15 * 23 = 345.",
                          "tool_calls": [call]},
                         {"role": "tool", "tool_call_id": "call_kit_calc", "content": LONG_RESULT}]
    return body


# A tool result long enough that the reasoning before it sits more than SLACK tokens (and a cache block)
# before the end of the prompt: a cache witness sees where the two names' renderings part.
LONG_RESULT = "345\n" + "\n".join(f"log line {n}: the calculator evaluated 15 * 23 step by step" for n in range(24))


def _rendered(hc: Session, prefix: str, body: dict[str, Any], name: str) -> str:
    payload = {"model": hc.endpoint.model, "messages": body["messages"], "tools": body.get("tools"),
               "add_generation_prompt": True}
    t = hc.post("chat", f"{prefix}/tokenize", payload, label=f"tokenize (reasoning as {name})")
    ok_response(t, "tokenize")
    tokens = (t.json_body() or {}).get("tokens") if isinstance(t.json_body(), dict) else None
    if not isinstance(tokens, list) or not tokens:
        raise WitnessUnavailable(f"{prefix}/tokenize gave no tokens for this history: {t.text_body()[:120]}")
    back = hc.post("chat", f"{prefix}/detokenize", {"model": hc.endpoint.model, "tokens": tokens},
                   label=f"detokenize (reasoning as {name})")
    ok_response(back, "detokenize")
    return str((back.json_body() or {}).get("prompt", ""))


def _cached(hc: Session, body: dict[str, Any], label: str) -> tuple[int, int]:
    t = hc.post("chat", apis.chat.PATH, _small(body, "chat"), label=label)
    ok_response(t, label)
    prompt, _, cached = apis.chat.usage_tokens(t.json_body() or {})
    return prompt, cached


@pytest.mark.check("CH-HIST-003")
def test_history_reasoning_under_both_names(hc: Session) -> None:
    marker = uuid.uuid4().hex[:12]  # in the reasoning only; the session line keeps other requests' cache apart
    base = apis.chat.with_system_prefix(hc.body("chat", "calculator", stream=False),
                                        f"[session {uuid.uuid4().hex}]\n")
    bodies = {name: reasoning_history(base, name, marker) for name in NAMES}
    bodies[""] = copy.deepcopy(bodies[NAMES[0]])  # the same history without the reasoning
    next(m for m in bodies[""]["messages"] if m["role"] == "assistant").pop(NAMES[0])
    shown: dict[str, bool] | None = None
    why_not = "--witness cache"
    if hc.endpoint.witness in ("auto", "tokenize"):
        try:
            prefix = tokenize_route(hc)
            shown = {name: marker in _rendered(hc, prefix, bodies[name], name) for name in NAMES}
        except WitnessUnavailable as why:
            why_not = str(why)
    if shown is not None:
        if shown[NAMES[0]] != shown[NAMES[1]]:
            kept, lost = (NAMES[0], NAMES[1]) if shown[NAMES[0]] else (NAMES[1], NAMES[0])
            told = hc.attached[-1][1]
            # The generation route has the last word: /tokenize may render a request its own way (vLLM 0.32's
            # tokenize request drops reasoning_content, which its chat route keeps under either name).
            counts = {name: _cached(hc, bodies[name], f"reasoning as {name} (the generation route's count)")[0]
                      for name in (*NAMES, "")}
            if counts[NAMES[0]] == counts[NAMES[1]] > counts[""] > 0:
                hc.note(f"the tokenize route rendered the reasoning only as {kept}; the generation "
                                         f"route counts {counts[NAMES[0]]} prompt tokens under either name and "
                                         f"{counts['']} without it: judged by the generation route's usage")
                return
            fail(f"tokenize witness: the assistant's reasoning reaches the prompt when sent as {kept}, not when "
                 f"sent as {lost}: a client sending {lost} loses it silently (prompt tokens on the generation "
                 f"route: {counts[NAMES[0]]} as {NAMES[0]}, {counts[NAMES[1]]} as {NAMES[1]}, {counts['']} "
                 "without reasoning)", transcript=told)
        if not any(shown.values()):
            inconclusive("not exercised: the chat template renders no history reasoning under either name")
        return
    if hc.endpoint.witness not in ("auto", "cache"):
        skip(f"no {hc.endpoint.witness} witness for this check (tokenize or cache usage): {why_not}")
    # Cache witness: the history under the second name read from the cache the first one filled.
    prompt, _ = _cached(hc, bodies[NAMES[0]], f"reasoning as {NAMES[0]}")
    _, cached_other = _cached(hc, bodies[NAMES[1]], f"the same history, reasoning as {NAMES[1]}")
    _, cached_same = _cached(hc, bodies[NAMES[0]], f"reasoning as {NAMES[0]} again (control)")
    if cached_same < prompt - SLACK:
        skip(f"no witness: {why_not}; the endpoint reports no cache reads for a repeated prompt")
    if cached_other < prompt - SLACK:
        fail(f"cache witness: the history with its reasoning under {NAMES[1]} reads {cached_other} of {prompt} "
             f"prompt tokens from the cache the same history under {NAMES[0]} filled ({cached_same} on a repeat): "
             "the two names render differently", transcript=hc.attached[-2][1])


# -- CH-REQ-002: thinking switches ---------------------------------------------------------------

def thinking_switch_bodies(body: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """(rule its refusal breaks, what it sends, body): a forced calculator call with each switch."""
    forced = {**body, "tool_choice": "required"}
    return [("CH-REQ-002:kwargs", "chat_template_kwargs enable_thinking false",
             {**forced, "chat_template_kwargs": {"enable_thinking": False}}),
            ("CH-REQ-002", "reasoning_effort low", {**forced, "reasoning_effort": "low"})]


@pytest.mark.check("CH-REQ-002")
def test_thinking_switches(hc: Session) -> None:
    for rule, what, body in thinking_switch_bodies(hc.body("chat", "calculator", stream=False)):
        t = hc.post("chat", apis.chat.PATH, body, label=what)
        _accepted(t, f"a request with {what}", rule)
        answer = t.json_body() or {}
        if not apis.chat.tool_calls(answer) and apis.chat.stop_reason(answer) != apis.chat.LENGTH_STOP:
            message = ((answer.get("choices") or [{}])[0] or {}).get("message") or {}
            fail(f"with {what}, a forced call (tool_choice required) came back without tool_calls (finish_reason "
                 f"{apis.chat.stop_reason(answer)!r}, reasoning {str(message.get('reasoning_content'))[:80]!r})",
                 transcript=t, rule="CH-REQ-002:tools")


# -- RS-REQ-003: text without format, the max_output_tokens 1 probe ------------------------------

@pytest.mark.check("RS-REQ-003")
def test_codex_text_and_probe(hc: Session) -> None:
    body = {**_small(hc.body("responses", "calculator"), "responses"), "text": {"verbosity": "low"}}
    ok_response(hc.post("responses", apis.responses.PATH, body, label="text with verbosity only"),
                "a request whose text has no format")
    probe = {**_small(hc.body("responses", "plain_text"), "responses"), "max_output_tokens": 1}
    t = hc.post("responses", apis.responses.PATH, probe, label="a max_output_tokens 1 probe")
    if t.ok or (t.status is not None and 400 <= t.status < 500
                and apis.responses.is_error_body(t.json_body())):
        return
    fail(f"a max_output_tokens 1 probe was answered HTTP {t.status} {t.text_body()[:200]}: expected an answer, or a "
         "4xx in OpenAI's error shape (the API's minimum is 16)", transcript=t, rule="RS-REQ-003:probe")

