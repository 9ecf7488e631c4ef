"""A follow-up turn is answered, never with a 5xx (``<P>-TURN-001``), in all three APIs.

A multi-turn check charges a failure to the turn and the rule it broke: when the endpoint answers a
later turn with an HTTP error, the earlier turn's stream rules keep their own outcome (the stream
checks do not judge a turn that was not answered) and the error is judged here, as an error check:

- the scenario's follow-up turn, built from the endpoint's own answer (the stream checks' shared
  calculator turn 1: its tool call and the scenario's tool result) must not get a 5xx (rule ``<ID>``,
  MUST). Where that answer's last call was cut by the output limit, its arguments do not parse and the
  history is the client's mistake to make: a 4xx in the API's error shape is the right answer, a 2xx a
  lenient one. A 4xx to a history built from a complete answer is a refusal of a valid turn (rule
  ``<ID>:refused``, SHOULD);
- a history whose tool call's arguments are not JSON (a cut call replayed: Chat's and Responses'
  arguments string, Anthropic's tool_use input sent as that text instead of an object) is answered
  with a 2xx or a 4xx in the API's error shape, never a 5xx or a refusal outside the shape (rule
  ``<ID>``).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from harnesscheck.protocol import apis
from harnesscheck.conformance import catalog
from harnesscheck.conformance.session import Session, final_answer
from harnesscheck.conformance.verdict import fail, inconclusive, timed_out
from harnesscheck.protocol.wire.transcript import Transcript

SCENARIO = "calculator"
CUT_ARGUMENTS = '{"expression": "15 *'  # a call's arguments as the output limit leaves them
# The answer of turn 0 with one call cut by the limit is the API module's ``cut_answer`` (its non-stream
# shape; Anthropic's input is an object: the cut text in its place is the client's mistake).


def _check_id(api: str) -> str:
    return f"{apis.get(api).PREFIX}-TURN-001"


def _params() -> list[Any]:
    return [pytest.param(api, marks=pytest.mark.check(_check_id(api)), id=_check_id(api)) for api in apis.NAMES
            if catalog.has(_check_id(api))]  # every registered API's (a generic family: catalog.GENERIC_FAMILIES)


def _unparsed(api: str, answer: dict[str, Any]) -> list[str]:
    """The calls of an answer whose arguments do not parse as a JSON object (a call cut by the limit)."""
    bad = []
    for call in apis.get(api).tool_calls(answer):
        try:
            ok = isinstance(json.loads(call.arguments), dict)
        except ValueError:
            ok = False
        if not ok:
            bad.append(f"{call.name} {call.arguments[:60]!r}")
    return bad


def _in_shape(api: str, t: Transcript) -> bool:
    return apis.get(api).is_error_body(t.json_body())


def _no_server_error(api: str, t: Transcript, what: str, check_id: str) -> None:
    """A 5xx, or a refusal outside the API's error shape, fails the rule."""
    if t.status is not None and t.status >= 500:
        fail(f"{what} was answered HTTP {t.status} (a server error where the request is at most the client's "
             f"mistake: expected a 4xx in the API's error shape, or an answer): {t.text_body()[:200]}",
             transcript=t, rule=check_id)
    if t.status is not None and 400 <= t.status < 500 and not _in_shape(api, t):
        fail(f"{what} was refused with HTTP {t.status} outside the {api} error shape: {t.text_body()[:200]}",
             transcript=t, rule=check_id)


@pytest.mark.parametrize("api", _params())
def test_follow_up_turn_is_answered(hc: Session, api: str) -> None:
    module, check_id = apis.get(api), _check_id(api)
    unjudged = _judge_follow_up(hc, api, check_id)  # the model's own turn first: the finding of the run
    # then the kit's own history with a cut call's arguments: no model needed
    body = module.first(hc.scenario(SCENARIO), hc.endpoint.model, stream=False)
    body = module.follow(body, module.cut_answer("calculator", CUT_ARGUMENTS), hc.scenario(SCENARIO), 1)
    body[module.MAX_TOKENS_FIELD] = module.MIN_OUTPUT_TOKENS
    t = hc.post(api, module.PATH, body, label="a history whose tool call's arguments are not JSON")
    if t.error is None:
        _no_server_error(api, t, f"a history whose tool call's arguments are not JSON ({CUT_ARGUMENTS!r})",
                         check_id)
    if unjudged:
        inconclusive(unjudged[0], cause=unjudged[1])


def _judge_follow_up(hc: Session, api: str, check_id: str) -> tuple[str, str] | None:
    """Judge the scenario's follow-up turn; (why, cause) when it could not be judged."""
    first = hc.stream(api, SCENARIO, turn=0)  # shared with the stream checks
    answer = final_answer(api, first) if first.ok else None
    if answer is None:
        return (f"not exercised: turn 0 of {SCENARIO} was not answered (HTTP {first.status} {first.error or ''}), "
                "so no follow-up was built from it", "not-exercised")
    follow = hc.stream(api, SCENARIO, turn=1)
    if follow.status is None:  # no answer at all: a deadline or a broken connection
        cause = "timeout" if timed_out(follow) else "not-exercised"
        return f"turn 1 of {SCENARIO} got no HTTP answer ({follow.error_kind}: {follow.error})", cause
    cut = _unparsed(api, answer)
    history = (f"turn 1 of {SCENARIO}, whose history replays turn 0's call with arguments that do not parse "
               f"(cut by the output limit: {', '.join(cut)})" if cut else
               f"turn 1 of {SCENARIO}, built from turn 0's complete answer")
    _no_server_error(api, follow, history, check_id)
    if 400 <= follow.status < 500 and not cut:
        fail(f"{history} was refused: HTTP {follow.status} {follow.text_body()[:200]}", transcript=follow,
             rule=f"{check_id}:refused")
    return None
