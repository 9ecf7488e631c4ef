"""Multi-turn history (article 1's central point): turn N's reasoning and tool calls come back in
turn N+1's prompt in the order the model wrote them — `<think>r0</think> t0 <think>r1</think> t1`
— not flattened, not stripped on agent turns, not rewritten. See conformance/witnesses.py for the
witnesses (tokenize, cache usage, timing), `--witness` to force one, and the two cases of the
interleaved checks (the kit's own turn, then the model's, sampled up to --tries times)."""

from __future__ import annotations

import pytest

from harnesscheck.protocol import apis
from harnesscheck.conformance import catalog
from harnesscheck.conformance.session import Session
from harnesscheck.protocol.wire.transcript import Transcript
from harnesscheck.conformance.witnesses import judge_agent_turn, judge_interleaved

INTERLEAVED = "long_reasoning"  # r0 t0 r1 t1 with ~700-token reasoning segments (visible in timing)
AGENT_TURN = "long_agent_turn"  # one ~1K-token reasoning segment, then a tool call
ORDER = ("tokenize", "cache", "timing")  # order is best seen in the rendered history
VERBATIM = ("cache", "timing", "tokenize")  # verbatim reuse is best seen in what the cache served


@pytest.mark.check("AN-HIST-001")
def test_anthropic_interleaved_history(hc: Session) -> None:
    judge_interleaved(hc, "anthropic", kit_scenario=INTERLEAVED, model_scenario=INTERLEAVED, witnesses=ORDER)


@pytest.mark.check("RS-HIST-001")
def test_responses_interleaved_history(hc: Session) -> None:
    judge_interleaved(hc, "responses", kit_scenario=INTERLEAVED, model_scenario=INTERLEAVED, witnesses=ORDER)


@pytest.mark.check("AN-HIST-002")
def test_anthropic_agent_turn_history(hc: Session) -> None:
    judge_agent_turn(hc, "anthropic", AGENT_TURN, witnesses=VERBATIM)


@pytest.mark.check("CH-HIST-002")
def test_chat_agent_turn_history(hc: Session) -> None:
    judge_agent_turn(hc, "chat", AGENT_TURN, witnesses=VERBATIM)


@pytest.mark.check("RS-HIST-002")
def test_responses_agent_turn_history(hc: Session) -> None:
    judge_agent_turn(hc, "responses", AGENT_TURN, witnesses=VERBATIM)


@pytest.mark.check("AN-HIST-003")
def test_thinking_on_unless_turned_off(hc: Session) -> None:
    """Asked for thinking, the model must think at least once in --tries samples (else inconclusive);
    then a request that says nothing about thinking must think at least once in --tries samples."""
    from harnesscheck.conformance.verdict import fail, inconclusive, ok_response

    body = hc.body("anthropic", "calculator", stream=False)
    # The reference: budget_tokens >= 1024 and below max_tokens.
    asked_body = {**body, "max_tokens": max(body["max_tokens"], 2048),
                  "thinking": {"type": "enabled", "budget_tokens": 1024}}

    def sample(request: dict, label: str) -> Transcript:
        t = hc.post("anthropic", apis.anthropic.PATH, request, label=label)
        ok_response(t, label)
        return t

    _, thinks = hc.until_taken((catalog.THINKING,), lambda: sample(asked_body, "thinking asked for"))
    if not thinks:
        inconclusive(f"not exercised: no answer carried reasoning even when thinking was asked for, in "
                     f"{hc.endpoint.tries} tries (a model that does not reason, a server without a reasoning "
                     "parser, or a gateway that drops the reasoning it converts)")
    silent, thinks = hc.until_taken((catalog.THINKING,), lambda: sample(body, "thinking not mentioned"))
    if not thinks:
        fail("the model thinks when asked but not when the request says nothing about thinking: thinking should "
             "stay on unless the client turns it off", transcript=silent)
