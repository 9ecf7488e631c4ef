"""The context window and usage across turns, in all three APIs (issue 30; docs/API_FACTS.md "Context
overflow" and "Usage across turns").

- <P>-CTX-001: a prompt longer than the window the endpoint announces (GET /v1/models:
  ``max_model_len`` and kin, conformance/window.py) is refused with a 400 in the API's error shape
  carrying the overflow marker the clients match (Anthropic "prompt is too long", OpenAI
  ``context_length_exceeded``). A refusal inside a 200 stream (the API's in-stream error after the
  stream opened) is judged as an HTTP error is: neither the 400 nor, unless its error says so, the
  marker. A context-length refusal is inconclusive (endpoint-config) for every other check
  (verdict.ok_response); this one judges it.
- <P>-CTX-002: in a 10-turn agent session (scenario long_session), the prompt total the usage reports
  grows on every turn: it counts the whole prompt, history included, not only the new turn's input.
- <P>-CTX-003: the same session for 30 turns, its usage growing turn by turn as the prompt does, then
  one more turn whose tool result takes the prompt past the window: refused in the recognised form.
- <P>-CTX-004: in that session the prefix cache reuses each turn's prefix: the cached part of each
  turn's prompt covers the turn before's whole prompt (judged where the endpoint reports cached tokens).

The session's turns are the shared scenario streams (``hc.stream``): CTX-002's ten are the first ten
of CTX-003's thirty, and CTX-004 reads the same thirty; the first of these checks fetches the sessions
of all the checked APIs at once, one thread each (``_prefetch``). A session whose turn 0 made no call is
sampled again through the levers (``hc.streams_taking``: the tool named, a call forced, thinking off;
each check's result says which were tried); its later turns then keep the words and the thinking switch,
as a client keeps them, and are fetched one after the other. Each turn adds a ~80-character tool result,
so the whole session stays small (a few thousand tokens) and fast against the scripted engine; the
window is reached by the last request's tool result, sized from the session's own tokens per character.
"""

from __future__ import annotations

import copy
import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from harnesscheck.protocol import apis
from harnesscheck.conformance import catalog, grammar, window
from harnesscheck.conformance.session import Session
from harnesscheck.conformance.verdict import Problems, fail, inconclusive, ok_response
from harnesscheck.protocol.wire import client
from harnesscheck.protocol.wire.transcript import Transcript

SESSION = "long_session"
USAGE_TURNS = 10
SESSION_TURNS = 30
CACHE_STEP = 128  # OpenAI's prompt cache grows in 128-token steps (prompt caching guide); vLLM's blocks are 16
# The turn before's generation prompt need not come back in the history: Qwen3's template under thinking off
# opens the answer with an empty think block (`<think>\n\n</think>\n\n`) that the history leaves out, so the next
# prompt parts a few tokens before the turn before's ended (vLLM 0.32, by /tokenize: 4 tokens)
GENERATION_TAIL = 16
CACHE_SLACK = CACHE_STEP + GENERATION_TAIL  # how far below the turn before's whole prompt a reuse may read


def _check_id(api: str, number: str) -> str:
    return f"{apis.get(api).PREFIX}-CTX-{number}"


def _params(number: str) -> list[Any]:
    return [pytest.param(api, marks=pytest.mark.check(_check_id(api, number)), id=_check_id(api, number))
            for api in apis.NAMES if catalog.has(_check_id(api, number))]  # what the catalog binds


def _window(hc: Session) -> int | None:
    """The model's context window in any stack's dialect (window.known_window), the path marked; None when
    nothing says it (the over-long prompts are then FAR_CHARS of filler, past any served window)."""
    known = window.known_window(hc)
    if known is None:
        hc.note("no context window known (--context-window, GET /v1/models max_model_len and kin, /props, "
                f"/api/show, /model/info): the over-long prompt carries {window.FAR_CHARS} characters of filler")
        return None
    hc.saw(catalog.CONTEXT_WINDOW)
    hc.note(f"context window {known[0]} tokens ({known[1]})")
    return known[0]


def _judged_unknown(hc: Session, api: str, transcript: Transcript, where: str) -> None:
    """With no window known, an answer to the far prompt is judged only when it refused: a 2xx (a window
    larger still, or a prompt truncated silently) says nothing the kit can hold against the endpoint."""
    if transcript.status is not None and 200 <= transcript.status < 300 and \
            apis.get(api).streamed_refusal(transcript.frames) is None:
        inconclusive(f"not exercised: {where}: answered HTTP {transcript.status}; with no context window known "
                     "the kit cannot tell a larger window from a prompt truncated silently (give it with "
                     "--context-window N)")
    hc.saw(catalog.CONTEXT_WINDOW)


def _judge_refusal(api: str, transcript: Transcript, where: str, rules: dict[str, str]) -> None:
    """Fail with every problem of the answer to an over-long prompt (window.refusal_problems: a 500 without
    the marker breaks both rules), each under the rule ``rules`` names for its part ("" status and shape,
    "marker"), the weightiest first."""
    if transcript.error and transcript.status is None:
        ok_response(transcript, where)  # a timeout is inconclusive, a cut connection a failure
    if transcript.status == 413:
        inconclusive(f"{where}: HTTP 413, the endpoint refused the body for its size before reading the prompt "
                     f"({transcript.text_body()[:200]!r})", cause="endpoint-config")
    problems = Problems(rules[""].split(":")[0])
    for part, problem in window.refusal_problems(api, transcript):
        problems.add(f"{where}: {problem}", transcript=transcript, rule=rules[part])
    problems.raise_if_any()


@pytest.mark.parametrize("api", _params("001"))
def test_overflow_refused(hc: Session, api: str) -> None:
    check_id = _check_id(api, "001")
    size = _window(hc)
    transcript, chars = window.over_long(hc, api, hc.body(api, "plain_text"), size, label="over-long prompt")
    where = f"a prompt with {chars} characters of filler ({f'window {size} tokens' if size else 'no window known'})"
    if size is None:
        _judged_unknown(hc, api, transcript, where)
    _judge_refusal(api, transcript, where, {"": check_id, "marker": f"{check_id}:marker"})
    hc.require_exercised(check_id)


def _prefetch(hc: Session) -> None:
    """The session of every checked API whose session has not started, fetched at once (a thread per
    API, each turn after the other within it), into the shared streams ``hc.stream`` then reads and
    records: the three sessions' 90 requests overlap instead of queueing (most of their time is the
    endpoint's)."""
    todo = [api for api in apis.NAMES if api in hc.endpoint.apis and (api, SESSION, 0) not in hc._streams]
    if hc.stalled or len(todo) < 2:
        return
    for api in todo:  # imported in the main thread, not in two threads at once (test_client_sessions says why)
        grammar.module_for(api)
    with ThreadPoolExecutor(len(todo), thread_name_prefix="hc-session") as pool:
        for done in [pool.submit(_fetch, hc, api) for api in todo]:
            done.result()
    # a stream that went silent is a stall, as hc.post would have found (the check that reads it says so)
    for k, t in list(hc._streams.items()):
        if k[0] in todo and k[1] == SESSION:
            hc.note_stall([(f"{SESSION} turn {k[2]} ({k[0]})", t)])


def _fetch(hc: Session, api: str) -> None:
    """One API's session, turn by turn, as ``hc.stream`` would build it (the endpoint's own answers)."""
    module, scenario = apis.get(api), hc.scenario(SESSION)
    body = hc.quick_bound(api, module.first(scenario, hc.endpoint.model))[0]
    for turn in range(SESSION_TURNS):
        transcript = client.stream_request(hc.endpoint.url.rstrip("/") + module.PATH, headers=hc.endpoint.headers(api),
                                           json_body=body, timeout=hc.endpoint.timeout, api=api,
                                           read_timeout=hc.endpoint.timeout)
        hc._streams[(api, SESSION, turn)] = transcript
        answer = module.final_answer(transcript) if transcript.ok and not transcript.error else None
        if not answer or not module.tool_calls(answer):
            return
        body = hc.quick_bound(api, hc.conversation_levers(api, module.follow(body, answer, scenario, turn + 1),
                                                          SESSION))[0]


def _turn_usage(hc: Session, api: str, turn: int) -> tuple[Transcript, tuple[int, int, int] | None]:
    """Turn ``turn`` of the session (shared stream), and its usage (prompt total, output, cached) if reported."""
    if turn == 0:
        _prefetch(hc)
        if hc.stalled:  # the sessions fetched at once found the stall: this check says so, not "timeout"
            inconclusive(f"the endpoint stalled: {hc.stalled}", cause="stalled")
        # the session's first call, through the levers where the shared turn 0 made none (the tool named, a
        # call forced, thinking off); later turns keep the words and the thinking switch (Session.request_for)
        transcript = hc.streams_taking(api, SESSION, (catalog.TOOL_USE,))[-1]
    else:
        transcript = hc.stream(api, SESSION, turn=turn)
    if (stalled := hc.note_stall([(f"{SESSION} turn {turn} ({api})", transcript)])):  # fetched apart from hc.post
        inconclusive(f"the endpoint stalled: {stalled}", cause="stalled")
    if turn > 0 and transcript.status is not None and not 200 <= transcript.status < 300:
        inconclusive(f"{SESSION} turn {turn}: HTTP {transcript.status} {transcript.text_body()[:200]!r}: a refused "
                     "follow-up turn is its own finding (<P>-TURN-001)", cause="endpoint-error")
    ok_response(transcript, f"{SESSION} turn {turn}")
    answer = apis.get(api).final_answer(transcript) or {}
    if not apis.get(api).usage(answer):
        return transcript, None
    if not apis.get(api).tool_calls(answer):
        inconclusive(f"not exercised: {SESSION} turn {turn} made no tool call, so the session ended early",
                     cause="not-exercised")
    return transcript, apis.get(api).usage_tokens(answer)


def _alone(hc: Session, api: str, turn: int) -> tuple[int, int] | None:
    """A miss seen while the sessions of every API were fetched at once (``_prefetch``: on a server of few
    cache slots, such as llama-server's, one session's turn 0 can take the slot of another's history, as
    three clients would) confirmed alone: turn ``turn - 1``'s request sent again, then turn ``turn``'s, one
    after the other; (turn ``turn - 1``'s prompt total, turn ``turn``'s cached tokens) as the endpoint
    reported them, or None where either answer reported no usage."""
    module, seen = apis.get(api), []
    for k in (turn - 1, turn):
        sent = hc.stream(api, SESSION, turn=k).request_body
        transcript = hc.post(api, module.PATH, sent, stream=True, label=f"{SESSION} turn {k} again, alone")
        answer = module.final_answer(transcript) if transcript.ok and not transcript.error else None
        if not answer or not module.usage(answer):
            return None
        seen.append(module.usage_tokens(answer))
    return seen[0][0], seen[1][2]


def _usage_grows(hc: Session, api: str, turns: int, rule: str) -> list[tuple[int, int, int]]:
    """Run the session's first ``turns`` turns; fail ``rule`` where a turn's prompt total is not larger
    than the turn before's. Returns every turn's (prompt total, output, cached)."""
    seen: list[tuple[int, int, int]] = []
    for turn in range(turns):
        transcript, usage = _turn_usage(hc, api, turn)
        if usage is None:
            inconclusive(f"not exercised: {SESSION} turn {turn}: the endpoint reported no usage (the stream checks "
                         "judge its absence)")
        if seen and usage[0] == 0 and all(u[0] == 0 for u in seen):  # no count at all: not "the new turn only"
            fail(f"{SESSION} turns 0 to {turn}: the usage reports 0 prompt tokens on every turn: it counts no prompt "
                 f"at all (a client's context meter reads 0 and never compacts)", transcript=transcript, rule=rule)
        if seen and usage[0] <= seen[-1][0]:
            fail(f"{SESSION} turn {turn}: the usage counts {usage[0]} prompt tokens, turn {turn - 1} counted "
                 f"{seen[-1][0]}, though the prompt grew by turn {turn - 1}'s answer and a tool result: the usage "
                 f"counts the new turn's input, not the whole prompt (a client's context meter reads "
                 f"{usage[0]} and never compacts)", transcript=transcript, rule=rule)
        seen.append(usage)
    return seen


@pytest.mark.parametrize("api", _params("002"))
def test_usage_counts_history(hc: Session, api: str) -> None:
    _usage_grows(hc, api, USAGE_TURNS, _check_id(api, "002"))


@pytest.mark.parametrize("api", _params("003"))
def test_long_session_to_window(hc: Session, api: str) -> None:
    check_id = _check_id(api, "003")
    seen = _usage_grows(hc, api, SESSION_TURNS, check_id)
    size = _window(hc)
    body = hc.request_for(api, SESSION, SESSION_TURNS)  # turn 30's request: the history of all thirty turns
    grown = len(json.dumps(hc.request_for(api, SESSION, SESSION_TURNS - 1))) - len(json.dumps(hc.body(api, SESSION)))
    ratio = max(0.1, (seen[-1][0] - seen[0][0]) / max(1, grown))  # tokens per character (JSON overcounts: safe)
    label = f"{SESSION} turn {SESSION_TURNS}: a tool result that passes the window"
    if size is None:
        transcript, _ = window.far(hc, api, lambda chars: _with_result_padding(api, body, None, 0, 1.0, chars),
                                   label=label)
    else:
        transcript = hc.post(api, apis.get(api).PATH, _with_result_padding(api, body, size, seen[-1][0], ratio),
                             stream=True, label=label)
    where = (f"{SESSION} turn {SESSION_TURNS} ({f'window {size} tokens' if size else 'no window known'}, turn "
             f"{SESSION_TURNS - 1} at {seen[-1][0]})")
    if size is None:
        _judged_unknown(hc, api, transcript, where)
    _judge_refusal(api, transcript, where, {"": f"{check_id}:window", "marker": f"{check_id}:marker"})
    hc.require_exercised(check_id)


def _with_result_padding(api: str, body: dict[str, Any], size: int | None, tokens: int,
                         ratio: float, chars: int = 0) -> dict[str, Any]:
    """The request with its last tool result grown to pass the window by a tenth (no window known:
    ``chars`` of filler, window.far's step)."""
    if size is not None:
        chars = int(max(size * window.OVERSHOOT - tokens, size * (window.OVERSHOOT - 1)) / ratio) + 1
    extra = window.filler(chars)
    body = copy.deepcopy(body)
    history = body[apis.get(api).FORM.history_key]
    for entry in reversed(history):
        if _pad_result(entry, extra):
            return body
    return apis.get(api).append_user(body, extra)


def _pad_result(entry: Any, extra: str) -> bool:
    """Append ``extra`` to a tool result entry of any API (Anthropic tool_result block, Chat tool
    message, Responses function_call_output item); False when ``entry`` holds none."""
    if not isinstance(entry, dict):
        return False
    if entry.get("role") == "tool" and isinstance(entry.get("content"), str):
        entry["content"] += "\n" + extra
        return True
    if entry.get("type") == "function_call_output" and isinstance(entry.get("output"), str):
        entry["output"] += "\n" + extra
        return True
    content = entry.get("content")
    if isinstance(content, list):
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_result" and isinstance(block.get("content"), str):
                block["content"] += "\n" + extra
                return True
    return False


@pytest.mark.parametrize("api", _params("004"))
def test_long_session_cache(hc: Session, api: str) -> None:
    """From turn 2 on, the cached part of each turn's prompt covers the turn before's whole prompt (to
    within CACHE_SLACK tokens: a cache step and the turn before's generation prompt). Judged once a turn
    after the first reported cached tokens at all (turn 0's prompt may be cached by any earlier request
    with its prefix)."""
    check_id = _check_id(api, "004")
    seen: list[tuple[int, int, int]] = []
    hit = False  # a turn after the first reported cached tokens
    for turn in range(SESSION_TURNS):
        transcript, usage = _turn_usage(hc, api, turn)
        if usage is None:
            inconclusive(f"not exercised: {SESSION} turn {turn}: the endpoint reported no usage")
        hit = hit or (turn >= 1 and usage[2] > 0)
        if turn >= 2 and hit and usage[2] < seen[-1][0] - CACHE_SLACK:
            alone = _alone(hc, api, turn)
            if alone is not None and alone[1] >= alone[0] - CACHE_SLACK:
                hc.note(f"{SESSION} turn {turn}: {usage[2]} cached of the turn before's {seen[-1][0]} while the "
                        f"sessions of the other APIs ran beside it; sent again alone, right after the turn "
                        f"before, it read {alone[1]} of {alone[0]} from the cache: the kit's own sessions had "
                        "evicted it, not judged")
            else:
                again = "" if alone is None else (f"; sent again alone right after the turn before, it read "
                                                  f"{alone[1]} of {alone[0]}")
                fail(f"{SESSION} turn {turn}: {usage[2]} cached prompt tokens, though turn {turn - 1}'s whole "
                     f"prompt ({seen[-1][0]} tokens) is this turn's prefix: the cache did not reuse it (turn "
                     f"{turn - 1} had {seen[-1][2]} cached){again}", transcript=transcript)
        seen.append(usage)
    if not hit:
        inconclusive(f"not exercised: no turn of {SESSION} after the first reported cached prompt tokens "
                     f"({catalog.CACHE_HIT})")
    hc.require_exercised(check_id)
