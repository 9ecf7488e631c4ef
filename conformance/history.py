"""Witnesses that turn N's reasoning and tool calls come back verbatim, in order, in turn N+1's
prompt. Strongest first; `--witness` forces one, `auto` takes the strongest the endpoint offers:

1. tokenize: the chat-form /tokenize rendering of turn N+1's history starts with turn N's prompt
   and holds turn N's parts (r0, t0, r1, t1) in order after it;
2. cache: turn N+1 reads at least turn N's prompt plus output from the prefix cache, less SLACK
   tokens of block granularity;
3. timing: turn N+1's time to first token with the history as the endpoint returned it costs about
   what a fully cached repeat costs, far less than with the reasoning deliberately rewritten (a
   paired Wilcoxon test shows the rewrite is slower, so prefix reuse is measurable at all).

A witness that cannot be used raises WitnessUnavailable; the check then tries the next one (auto)
or is skipped (forced), saying why.
"""

from __future__ import annotations

import copy
import statistics
import uuid
from collections.abc import Callable
from typing import Any

from conformance import requests as reqs
from conformance.harness import PATHS, Harness, final_answer
from conformance.verdict import fail, inconclusive, ok_response
from conformance.wire.transcript import Transcript
from stats import wilcoxon_test

WITNESSES = ("tokenize", "cache", "timing")
SLACK = 64  # tokens: block granularity plus the end-of-turn marker
TIMING_PAIRS = 8  # sessions; Wilcoxon p < 0.05 survives a pair the wrong way
TIMING_SHARE = 0.35  # the share of a full rewrite's extra cost that verbatim history may still pay


class WitnessUnavailable(Exception):
    pass


# -- shared pieces ---------------------------------------------------------------------------------

def fresh_first(hc: Harness, api: str, scenario: str) -> dict[str, Any]:
    """Turn 1 with a unique first system line, so no other request warmed its cache."""
    body = reqs.first(api, hc.scenario(scenario), hc.endpoint.model)
    nonce = f"[session {uuid.uuid4().hex}]\n"
    if api == "anthropic":
        body["system"] = nonce + body.get("system", "")
    elif api == "chat":
        body["messages"][0]["content"] = nonce + body["messages"][0]["content"]
    else:
        body["instructions"] = nonce + body.get("instructions", "")
    return body


def run_turn1(hc: Harness, api: str, scenario: str) -> tuple[dict[str, Any], dict[str, Any], Transcript]:
    body = fresh_first(hc, api, scenario)
    t = hc.post(api, PATHS[api], body, stream=True, label="turn 1")
    ok_response(t, "turn 1")
    answer = final_answer(api, t)
    if answer is None:
        fail("turn 1's stream folds to no answer", transcript=t)
    return body, answer, t


def parts_of(api: str, answer: dict[str, Any]) -> list[tuple[str, str]]:
    """(kind, text) in model order: reasoning text, or a tool call's name."""
    out = []
    if api == "anthropic":
        for b in answer.get("content", []):
            if b.get("type") == "thinking":
                out.append(("reasoning", b.get("thinking", "")))
            elif b.get("type") == "tool_use":
                out.append(("tool", b.get("name", "")))
    elif api == "chat":
        message = answer["choices"][0]["message"] if "choices" in answer else answer
        if message.get("reasoning_content") or message.get("reasoning"):
            out.append(("reasoning", message.get("reasoning_content") or message.get("reasoning")))
        out += [("tool", c["function"]["name"]) for c in message.get("tool_calls") or []]
    else:
        for item in answer.get("output", []):
            if item.get("type") == "reasoning":
                out.append(("reasoning", "".join(p.get("text", "") for p in item.get("content") or [])))
            elif item.get("type") == "function_call":
                out.append(("tool", item.get("name", "")))
    return out


def usage_of(api: str, answer: dict[str, Any]) -> tuple[int, int, int]:
    """(prompt total, output tokens, cached prompt tokens) in each API's accounting."""
    u = answer.get("usage") or {}
    if api == "anthropic":
        cached = int(u.get("cache_read_input_tokens") or 0)
        return (int(u.get("input_tokens") or 0) + cached + int(u.get("cache_creation_input_tokens") or 0),
                int(u.get("output_tokens") or 0), cached)
    if api == "chat":
        return (int(u.get("prompt_tokens") or 0), int(u.get("completion_tokens") or 0),
                int((u.get("prompt_tokens_details") or {}).get("cached_tokens") or 0))
    return (int(u.get("input_tokens") or 0), int(u.get("output_tokens") or 0),
            int((u.get("input_tokens_details") or {}).get("cached_tokens") or 0))


def rewritten(api: str, answer: dict[str, Any]) -> dict[str, Any]:
    """The answer with its first reasoning edited at its start (so everything after is new to the
    cache), as a client or server that rewrites history would send it."""
    answer = copy.deepcopy(answer)
    edit = "(revised) "
    if api == "anthropic":
        for block in answer.get("content", []):
            if block.get("type") == "thinking":
                block["thinking"] = edit + block["thinking"]
                return answer
    elif api == "chat":
        message = answer["choices"][0]["message"] if "choices" in answer else answer
        for key in ("reasoning_content", "reasoning"):
            if message.get(key):
                message[key] = edit + message[key]
                return answer
    else:
        for item in answer.get("output", []):
            if item.get("type") == "reasoning":
                item.pop("encrypted_content", None)
                item["content"] = [{"type": "reasoning_text",
                                    "text": edit + "".join(p.get("text", "") for p in item.get("content") or [])}]
                return answer
    raise WitnessUnavailable("the model's turn has no reasoning to rewrite")


def _second(hc: Harness, api: str, body: dict[str, Any], *, label: str, max_tokens: int | None = None) -> Transcript:
    body = copy.deepcopy(body)
    body["stream"] = False
    body.pop("stream_options", None)
    if max_tokens:
        body["max_output_tokens" if api == "responses" else "max_tokens"] = max_tokens
    t = hc.post(api, PATHS[api], body, label=label)
    ok_response(t, label)
    return t


# -- witnesses -------------------------------------------------------------------------------------

def _rendered(hc: Harness, api: str, body: dict[str, Any], *, add_generation_prompt: bool) -> str:
    payload: dict[str, Any] = {"model": hc.endpoint.model, "add_generation_prompt": add_generation_prompt,
                               "tools": body.get("tools")}
    if api == "responses":
        payload["input"] = ([{"type": "message", "role": "system", "content": body["instructions"]}]
                            if body.get("instructions") else []) + body["input"]
    else:
        payload["messages"] = body["messages"]
        if api == "anthropic" and body.get("system"):
            payload["system"] = body["system"]
    t = hc.post("chat", "/v1/tokenize", payload, label="tokenize (chat form)")
    if t.status in (404, 405):
        raise WitnessUnavailable("the endpoint offers no chat-form /v1/tokenize")
    if t.status == 400:
        raise WitnessUnavailable(f"chat-form /v1/tokenize refused this history shape: {t.text_body()[:160]}")
    ok_response(t, "tokenize")
    back = hc.post("chat", "/v1/detokenize", {"model": hc.endpoint.model, "tokens": (t.json_body() or {})["tokens"]},
                   label="detokenize")
    if back.status in (404, 405):
        raise WitnessUnavailable("the endpoint offers /v1/tokenize but no /v1/detokenize")
    ok_response(back, "detokenize")
    return (back.json_body() or {}).get("prompt", "")


def tokenize_witness(hc: Harness, api: str, scenario: str) -> None:
    body, answer, turn1 = run_turn1(hc, api, scenario)
    parts = parts_of(api, answer)
    before = _rendered(hc, api, body, add_generation_prompt=True)
    after_body = reqs.follow(api, body, answer, hc.scenario(scenario), 1)
    after = _rendered(hc, api, after_body, add_generation_prompt=True)
    cursor = 0
    # The generation prompt may carry an opened <think>; compare up to the last user text.
    stem = before[: before.rfind(hc.scenario(scenario).trigger)]
    if not after.startswith(stem):
        fail("turn 2's rendered prompt does not start with turn 1's prompt", transcript=hc.attached[-1][1])
    cursor = len(stem)
    for kind, text in parts:
        at = after.find(text.strip(), cursor)
        if at < 0:
            what = "reasoning" if kind == "reasoning" else f"tool call {text}"
            fail(f"tokenize witness: turn 2's rendered history lacks or reorders the {what} of turn 1; expected "
                 f"{' -> '.join(k + ':' + t.strip()[:24] for k, t in parts)} in order", transcript=hc.attached[-1][1])
        cursor = at + len(text.strip())


def cache_witness(hc: Harness, api: str, scenario: str) -> None:
    body, answer, _ = run_turn1(hc, api, scenario)
    prompt1, output1, _ = usage_of(api, answer)
    follow = reqs.follow(api, body, answer, hc.scenario(scenario), 1)
    second = _second(hc, api, follow, label="turn 2 (history kept)")
    _, _, cached2 = usage_of(api, second.json_body() or {})
    if cached2 == 0:
        repeat = _second(hc, api, follow, label="turn 2 repeated (control)")
        if usage_of(api, repeat.json_body() or {})[2] == 0:
            raise WitnessUnavailable("the endpoint reports no cached prompt tokens")
    if cached2 < prompt1 + output1 - SLACK:
        fail(f"cache witness: turn 2 read {cached2} prompt tokens from the cache; turn 1's prompt ({prompt1}) plus "
             f"output ({output1}) less {SLACK} is {prompt1 + output1 - SLACK}: the history did not come back "
             "verbatim", transcript=second)


def _ttft_ms(t: Transcript) -> float:
    if t.timings.end_ns is None:
        return float("nan")
    # A non-stream answer of the API's smallest output (1 token; 16 on Responses): prefill plus a
    # fixed, small number of decode steps, the same in the three requests compared.
    return t.timings.end_ns / 1e6


def timing_witness(hc: Harness, api: str, scenario: str) -> None:
    """Per session: turn 2 as returned (first time), the same again (now fully cached), and turn 2
    with its reasoning rewritten at the start (everything from there recomputed). If the history
    came back verbatim, the first turn 2 costs about what the repeat costs: only the new tail
    (tool results) is computed. Judged on the share of the rewrite's extra cost that it pays."""
    kept, repeat, edited = [], [], []
    cap = reqs.MIN_OUTPUT_TOKENS[api]
    for _ in range(TIMING_PAIRS):
        body, answer, _ = run_turn1(hc, api, scenario)
        follow = reqs.follow(api, body, answer, hc.scenario(scenario), 1)
        other = reqs.follow(api, body, rewritten(api, answer), hc.scenario(scenario), 1)
        kept.append(_ttft_ms(_second(hc, api, follow, label="turn 2, history as returned", max_tokens=cap)))
        repeat.append(_ttft_ms(_second(hc, api, follow, label="turn 2 again (cached)", max_tokens=cap)))
        edited.append(_ttft_ms(_second(hc, api, other, label="turn 2, reasoning rewritten", max_tokens=cap)))
    med_kept, med_repeat, med_edited = (statistics.median(x) for x in (kept, repeat, edited))
    control = wilcoxon_test(repeat, edited)  # ranks: one load spike does not decide the verdict
    if not (control.p_value < 0.05 and med_edited - med_repeat > 2.0):
        raise WitnessUnavailable(f"no measurable prefix reuse (rewritten {med_edited:.1f} ms vs repeat "
                                 f"{med_repeat:.1f} ms, Wilcoxon p = {control.p_value:.3f})")
    share = (med_kept - med_repeat) / (med_edited - med_repeat)
    if share > TIMING_SHARE:
        fail(f"timing witness: turn 2 with the history as returned took {med_kept:.1f} ms (median) vs {med_repeat:.1f}"
             f" ms once cached and {med_edited:.1f} ms with its reasoning rewritten: it paid {share:.0%} of a "
             "rewrite's recompute, so the returned history was not reused verbatim", transcript=hc.attached[-3][1])


RUNNERS: dict[str, Callable[[Harness, str, str], None]] = {
    "tokenize": tokenize_witness, "cache": cache_witness, "timing": timing_witness}


def judge(hc: Harness, api: str, scenario: str, *, witnesses: tuple[str, ...] = WITNESSES) -> str:
    """Run the forced witness, or the strongest available one; return the witness used."""
    forced = hc.endpoint.witness
    order = [forced] if forced != "auto" else list(witnesses)
    reasons = []
    for name in order:
        if name not in witnesses:
            reasons.append(f"{name}: this check has no {name} witness")
            continue
        try:
            RUNNERS[name](hc, api, scenario)
            return name
        except WitnessUnavailable as why:
            reasons.append(f"{name}: {why}")
    from conformance.verdict import skip

    skip("no witness available: " + "; ".join(reasons))
    return ""


def require_interleaving(hc: Harness, api: str, scenario: str) -> None:
    answer = final_answer(api, hc.stream(api, scenario))
    kinds = [k for k, _ in parts_of(api, answer or {})]
    if kinds.count("reasoning") < 2 or kinds.count("tool") < 2 or kinds.index("tool") > kinds.index("reasoning", 1):
        inconclusive(f"the model did not interleave reasoning and tool calls (got {kinds})")
