"""Usage in message_start is real (Anthropic accounting): input_tokens + cache_read + cache_creation
is the prompt total, equal to count_tokens and to the final usage, never 0 or an estimate, and split
between its three fields as the final usage splits it (AN-USAGE-004). In Chat and Responses, usage
arrives once, at the end: cached tokens are part of the prompt tokens, and the total adds up
(CH-USAGE-001, RS-USAGE-001).

count_tokens is itself documented as an estimate, so AN-USAGE-001 never takes it on trust: it is
cross-checked first against the same request's non-streamed usage, and a count that differs from it by
more than the tolerance (COUNT_SLACK tokens or COUNT_SHARE of it, whichever is more) is the finding,
naming both counts (and, where offered, the endpoint's own chat-form /tokenize count); message_start's
total is then judged against the usage, not against the count (issue 41: a gateway's local estimate,
129 for a prompt its usage counted 324, served as the yardstick). The split and the cached counts are judged on a
prompt sent twice, so a prefix cache can hit; where no cache field is ever reported they are not
exercised (inconclusive)."""

from __future__ import annotations

import uuid

import pytest

from harnesscheck.protocol import apis
from harnesscheck.conformance import catalog
from harnesscheck.conformance.grammar import anthropic as grammar
from harnesscheck.conformance.session import Session
from harnesscheck.conformance.verdict import fail, inconclusive, ok_response
from harnesscheck.protocol.wire.transcript import Transcript


def _total(usage: dict) -> int:
    return sum(int(usage.get(k) or 0) for k in ("input_tokens", "cache_creation_input_tokens",
                                                "cache_read_input_tokens"))


def _start_and_final(hc: Session, body: dict, label: str = "usage stream") -> tuple[dict, dict, Transcript]:
    transcript = hc.post("anthropic", apis.anthropic.PATH, body, stream=True, label=label)
    ok_response(transcript, "stream")
    start = next((f.json for f in transcript.events if isinstance(f.json, dict) and f.json.get("type") ==
                  "message_start"), None)
    if start is None:
        fail("no message_start in the stream", transcript=transcript)
    final = grammar.final_message(transcript) or {}
    return start["message"].get("usage") or {}, final.get("usage") or {}, transcript


def _fresh_body(hc: Session) -> dict:
    # A prompt no cache has seen: a random line up front.
    body = hc.body("anthropic", "calculator")
    body["system"] = f"session {uuid.uuid4().hex}\n" + body.get("system", "")
    return body


COUNT_SLACK, COUNT_SHARE = 3, 0.01  # count_tokens may differ from the usage by this much (it is an estimate)


@pytest.mark.check("AN-USAGE-001")
def test_message_start_total_equals_count_tokens(hc: Session) -> None:
    body = _fresh_body(hc)
    counted = hc.post("anthropic", f"{apis.anthropic.PATH}/count_tokens",
                      {k: v for k, v in body.items() if k not in ("stream", "max_tokens")}, label="count_tokens")
    if counted.status in (404, 405):  # not an optional feature: AN-USAGE-005:route fails on the missing route
        inconclusive("not exercised: the endpoint has no /v1/messages/count_tokens to compare with (AN-USAGE-005 "
                     "fails on that)")
    ok_response(counted, "count_tokens")
    count = (counted.json_body() or {}).get("input_tokens") if isinstance(counted.json_body(), dict) else None
    plain = hc.post("anthropic", apis.anthropic.PATH, {**body, "stream": False, "max_tokens": 1},
                    label="the same request, not streamed (its usage: the yardstick)")
    ok_response(plain, "the same request, not streamed")
    usage = _total((plain.json_body() or {}).get("usage") or {}) if isinstance(plain.json_body(), dict) else 0
    start, final, transcript = _start_and_final(hc, body)
    problems = []
    tolerance = max(COUNT_SLACK, round(COUNT_SHARE * usage))
    if not isinstance(count, int) or abs(count - usage) > tolerance:
        tokenized = _tokenize_count(hc, body)
        problems.append(f"count_tokens answers {count!r} for a prompt the same request's non-streamed usage counts "
                        f"{usage}" + (f" (the endpoint's chat-form /tokenize: {tokenized})" if tokenized is not None
                                      else "") + f", more than {tolerance} apart: count_tokens is no yardstick here"
                        + (" (the usage reports 0)" if usage == 0 else ""))
    if _total(start) != usage:
        problems.append(f"message_start prompt total {_total(start)} (input {start.get('input_tokens')} + cache read "
                        f"{start.get('cache_read_input_tokens')} + cache creation "
                        f"{start.get('cache_creation_input_tokens')}) differs from the non-streamed usage's {usage} "
                        f"(the final usage total: {_total(final)})")
    if problems:
        fail("; ".join(problems), transcript=transcript if _total(start) != usage else counted)


def _tokenize_count(hc: Session, body: dict) -> int | None:
    """The endpoint's own count of this prompt from its chat-form /tokenize (vLLM, Dynamo), if offered."""
    messages = [{"role": "system", "content": body["system"]}, *body["messages"]] if body.get("system") else \
        body["messages"]
    for path in ("/v1/tokenize", "/tokenize"):
        t = hc.post("anthropic", path, {"model": hc.endpoint.model, "messages": messages, "tools": body.get("tools"),
                                        "add_generation_prompt": True}, label=f"tokenize ({path})")
        count = (t.json_body() or {}).get("count") if t.ok else None
        if isinstance(count, int):
            return count
    return None


@pytest.mark.check("AN-USAGE-002")
def test_message_start_total_equals_final(hc: Session) -> None:
    start, final, transcript = _start_and_final(hc, _fresh_body(hc))
    if _total(start) != _total(final):
        fail(f"message_start prompt total {_total(start)} differs from the final usage total {_total(final)}",
             transcript=transcript)


@pytest.mark.check("AN-USAGE-003")
def test_uncached_input_tokens_not_zero(hc: Session) -> None:
    start, _, transcript = _start_and_final(hc, _fresh_body(hc))
    if not start.get("input_tokens"):
        fail(f"message_start usage.input_tokens is {start.get('input_tokens')!r} for a prompt no cache has seen",
             transcript=transcript)


SPLIT = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")


def split_differences(start: dict, final: dict) -> list[str]:
    """The prompt fields whose message_start value differs from the final usage's (an absent field
    counts 0). message_delta usage is cumulative (streaming docs), so the final usage is the message's
    own count and message_start's must already agree with it, field by field."""
    return [f"{k} {start.get(k, '(absent)')} at message_start but {final.get(k, '(absent)')} in the final "
            "usage" for k in SPLIT if int(start.get(k) or 0) != int(final.get(k) or 0)]


@pytest.mark.check("AN-USAGE-004")
def test_message_start_split_equals_final(hc: Session) -> None:
    body = _fresh_body(hc)

    def twice() -> None:  # the same prompt again: a prefix cache can hit on the second
        for label in ("usage split", "usage split (same prompt again)"):
            start, final, transcript = _start_and_final(hc, body, label)
            if any(int(u.get("cache_read_input_tokens") or 0) for u in (start, final)):
                hc.saw(catalog.CACHE_HIT)
            if any(int(u.get("cache_creation_input_tokens") or 0) for u in (start, final)):
                hc.saw(catalog.CACHE_WRITE)
            differences = split_differences(start, final)
            if differences:
                fail(f"message_start splits the prompt differently from the final usage: "
                     f"{'; '.join(differences)} (a client reading usage at message_start counts "
                     f"{start.get('input_tokens')} uncached tokens)", transcript=transcript)

    hc.until_taken((catalog.CACHE_HIT, catalog.CACHE_WRITE), twice)
    hc.require_exercised("AN-USAGE-004")


def usage_problems(prompt: int, completion: int, total: int | None, cached: int) -> list[tuple[str, str]]:
    """(part, problem) for an OpenAI usage object's counts: "cached" when the cached tokens exceed the
    prompt tokens they are part of, "total" when total_tokens is not prompt + output."""
    out = []
    if cached > prompt:
        problem = f"{cached} cached tokens but only {prompt} prompt tokens (cached tokens are part of the prompt)"
        out.append(("cached", problem))
    if total is not None and total != prompt + completion:
        out.append(("total", f"total_tokens {total} is not prompt {prompt} + output {completion}"))
    return out


def _openai_usage(hc: Session, api: str, check_id: str) -> None:
    body = apis.get(api).with_system_prefix(hc.body(api, "calculator"), f"session {uuid.uuid4().hex}\n")
    reported: list[bool] = []

    def twice() -> None:
        for label in ("usage", "usage (same prompt again)"):
            transcript = hc.post(api, apis.get(api).PATH, body, stream=True, label=label)
            ok_response(transcript, label)
            answer = apis.get(api).final_answer(transcript) or {}
            usage = apis.get(api).usage(answer)
            if not usage:
                continue
            reported.append(True)
            prompt, completion, cached = apis.get(api).usage_tokens(answer)
            total = usage.get("total_tokens")
            for part, problem in usage_problems(prompt, completion, total if isinstance(total, int) else None,
                                                cached):
                fail(f"{label}: {problem}", transcript=transcript,
                     rule=f"{check_id}:cached" if part == "cached" else check_id)

    hc.until_taken((catalog.CACHE_HIT,), twice)
    if not reported:
        inconclusive("not exercised: the endpoint reported no usage (the stream checks judge its absence)")
    hc.require_exercised(check_id)


@pytest.mark.check("CH-USAGE-001")
def test_chat_usage_adds_up(hc: Session) -> None:
    _openai_usage(hc, "chat", "CH-USAGE-001")


@pytest.mark.check("RS-USAGE-001")
def test_responses_usage_adds_up(hc: Session) -> None:
    _openai_usage(hc, "responses", "RS-USAGE-001")
