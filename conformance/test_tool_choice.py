"""tool_choice, parallel tool use off, strict arguments, and a forced call cut off by the output limit,
in all three APIs (docs/API_FACTS.md, "Tool choice and strict arguments").

- ``<P>-TOOLS-001``: every tool_choice mode the reference defines is accepted (auto, none, required /
  any, a named tool: rule ``<ID>``), and a forced one is obeyed: required / any makes at least one call
  (``<ID>:forced``), a named tool calls that tool and no other (``<ID>:named``). The prompt asks for no
  tool: forcing is what the endpoint guarantees (guided decoding, Anthropic's prefilled tool use), not
  what a model may choose, so a forced answer without its call fails, whatever the model and whatever
  the stop reason: text where the reference requires a call is the server's failure (Anthropic prefills
  the tool use of a forced choice; OpenAI's required / named choice makes the model call). The one
  answer that says nothing yet is one the output limit cut in reasoning alone, before any text or call
  (a model may reason first: vLLM constrains the call only after the reasoning): it is sampled again
  with thinking turned off (``Session.until_taken``; ``levers=LEVERS_OWN_FORCING`` on the catalog entry takes only the thinking-off
  levers, the forced choice stays the check's), and not exercised if every sample was cut so (the result
  says which levers were tried). The three APIs are read alike.
- ``<P>-TOOLS-002``: tool_choice none makes no call, judged where the same request under auto made one
  (the calculator scenario, asked plainly and sampled up to --tries times); else not exercised.
- ``<P>-TOOLS-003``: parallel tool use off (Anthropic ``disable_parallel_tool_use``, OpenAI
  ``parallel_tool_calls: false``) makes at most one call, judged where the same request made two.
- ``<P>-TOOLS-004``: a strict tool's arguments validate against its JSON schema (strict-mode schemas,
  sampled until a complete call is made, through the levers: the tool named, a call forced, thinking off;
  every sample's calls judged). A call the output limit cut (the answer's stop reason says
  so and the call is its last part) is judged by the cut-call rules (TOOLS-005) only: the references
  let the limit truncate an answer, a call's arguments included.
- ``<P>-TOOLS-005``: a forced call cut off by a small output limit, streamed and not: where the answer
  reached the limit its stop reason says so (max_tokens / length / incomplete, rule ``<ID>``), and the
  cut call is a structured call or absent, never tool-call markup as text (``<ID>:markup``). An answer
  that ended before the limit, or whose limit reasoning alone used up, did not take the path: sampled
  again with thinking off (the named choice and the limit stay the check's), else not exercised.

Checks 001-004 judge non-streamed answers: what they speak of is the same in both forms, and the
stream grammar has checks of its own (a stream fault would fail them for another reason).
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import jsonschema
import pytest

from harnesscheck.protocol import apis
from harnesscheck.conformance import catalog, levers
from harnesscheck.protocol.apis.base import ToolCall
from harnesscheck.conformance.session import Session
from harnesscheck.conformance.verdict import fail, inconclusive, ok_response
from harnesscheck.protocol.wire.transcript import Transcript

# The kit's own tools, written for strict mode (every property required, no others allowed).
WEATHER = {"name": "get_weather", "description": "Current weather for a city.",
           "parameters": {"type": "object", "properties": {
               "city": {"type": "string", "enum": ["Paris", "Tokyo", "Lima"]},
               "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
               "required": ["city", "unit"], "additionalProperties": False}}
CLOCK = {"name": "get_time", "description": "The current time in a time zone.",
         "parameters": {"type": "object", "properties": {"timezone": {"type": "string"}},
                        "required": ["timezone"], "additionalProperties": False}}
_REPORT_FIELDS = ["title", "summary", "details", "owner", "next_steps"]
REPORT = {"name": "file_report", "description": "File a status report.",
          "parameters": {"type": "object", "properties": {k: {"type": "string"} for k in _REPORT_FIELDS},
                         "required": _REPORT_FIELDS, "additionalProperties": False}}
CUT_LIMIT = 24  # the output limit of the cut-call check: far below the forced call (Responses' minimum is 16)
# A call the server began, as text: the opening call markup of the common model families (hermes/Qwen's
# <tool_call> before the call's JSON or qwen3-coder's <function=, or cut right after it; Granite/Kimi
# <|tool_call..., Llama, Mistral, DeepSeek's begin tokens), or the call's own JSON (its name, or its arguments:
# what guided decoding of a named call writes). Closing tags alone are no call: llama-server, its object
# tool_choice ignored, streamed a base model's '</tool_call>\n</tools></tools>...' as text, no call opened.
MARKUP = re.compile(r"<tool_call>\s*(?:[\[{]|<function=|\Z)|<\|tool_call(?![a-z_]*end\|)|<\|python_tag\|>|"
                    r"\[TOOL_CALLS\]|<｜tool▁calls?▁begin|<function=|\"name\"\s*:\s*\"file_report\"|"
                    r"^\s*\[?\s*\{\s*\"(?:title|summary|details|owner|next_steps|name)\"\s*:")


def _check_id(api: str, number: str) -> str:
    return f"{apis.get(api).PREFIX}-TOOLS-{number}"


def _params(number: str) -> list[Any]:
    """One parameter per API, marked with that API's check of this number."""
    return [pytest.param(api, marks=pytest.mark.check(_check_id(api, number)), id=_check_id(api, number))
            for api in apis.NAMES if catalog.has(_check_id(api, number))]  # what the catalog binds


def _answer(api: str, transcript: Transcript) -> dict[str, Any]:
    """The answer of a streamed or non-streamed exchange, in the non-stream shape."""
    answer = apis.get(api).final_answer(transcript) if transcript.frames else transcript.json_body()
    return answer if isinstance(answer, dict) else {}


def _post(hc: Session, api: str, body: dict[str, Any], label: str) -> tuple[Transcript, list[ToolCall]]:
    """Post a request that must be accepted; the exchange and the answer's tool calls."""
    transcript = hc.post(api, apis.get(api).PATH, body, stream=bool(body.get("stream")), label=label)
    ok_response(transcript, label)
    return transcript, apis.get(api).tool_calls(_answer(api, transcript))


def _names(calls: list[ToolCall]) -> str:
    return ", ".join(c.name for c in calls) or "none"


# -- <P>-TOOLS-001: every mode accepted, forced modes obeyed ------------------------------------------

def _cut_in_reasoning(api: str, answer: dict[str, Any]) -> bool:
    """The output limit cut the answer while it was reasoning: no text and no call began, reasoning did."""
    module = apis.get(api)
    kinds = {kind for kind, text in module.parts(answer) if text}
    return module.stop_reason(answer) == module.LENGTH_STOP and kinds == {"reasoning"}


def cut_call(api: str, answer: dict[str, Any], calls: list[ToolCall]) -> ToolCall | None:
    """The call the output limit cut, if any: the answer stopped at its limit and the call is its last
    part (what follows a call was said after it, so that call was complete). None otherwise."""
    module = apis.get(api)
    if not calls or module.stop_reason(answer) != module.LENGTH_STOP:
        return None
    kinds = [kind for kind, _ in module.parts(answer)]
    return calls[-1] if kinds and kinds[-1] == "tool_call" else None


def _forced(hc: Session, api: str, body: dict[str, Any],
            label: str) -> tuple[Transcript, list[ToolCall]] | None:
    """A forced request through the levers (Session.until_taken; catalog.LEVERS_OWN_FORCING: thinking off only,
    the forced choice stays the check's), sampled again while the output limit cut its answer in reasoning
    alone (before any text or call: a model may reason first, and vLLM constrains the call only after
    it); None when every answer was cut so. Any other answer is the one the caller judges: a call, or text
    where a call was required."""
    tries: list[tuple[Transcript, list[ToolCall]]] = []

    def attempt() -> tuple[Transcript, list[ToolCall]]:
        tries.append(_post(hc, api, body, f"{label} (try {len(tries) + 1})" if tries else label))
        return tries[-1]

    answered, took = hc.until_taken((catalog.TOOL_USE,), attempt,
                                    lambda r: bool(r[1]) or not _cut_in_reasoning(api, _answer(api, r[0])))
    return answered if took else None


def _said(api: str, transcript: Transcript) -> str:
    """What a forced answer without its call said instead, in a few words: its text, its stop reason."""
    module = apis.get(api)
    answer = _answer(api, transcript)
    text = " ".join(t for kind, t in module.parts(answer) if kind == "text" and t).strip()
    what = f"text {text[:80]!r}" if text else "no text and no call"
    return f"{what} (stop reason {module.stop_reason(answer)!r})"


@pytest.mark.parametrize("api", _params("001"))
def test_tool_choice_modes(hc: Session, api: str) -> None:
    module, check_id = apis.get(api), _check_id(api, "001")
    body = hc.body(api, "plain_text", stream=False)  # a question no tool answers
    body["tools"] = [module.tool(WEATHER), module.tool(CLOCK)]
    cut: list[str] = []  # forced modes whose every answer the output limit cut before a call
    unplayed: list[str] = []  # forced modes whose answer the peer profile leaves to no model (levers.plays_forced)
    for mode, name in (("auto", ""), ("none", ""), ("required", ""), ("named", CLOCK["name"])):
        choice = module.tool_choice(mode, name)
        label = f"tool_choice {json.dumps(choice)}"
        request = {**body, "tool_choice": choice}
        if mode in ("auto", "none"):
            _post(hc, api, request, label)  # refused: rule <ID>
            continue
        answered = _forced(hc, api, request, label)
        if answered is None:
            cut.append(label)
            continue
        transcript, calls = answered
        if not levers.plays_forced(hc.endpoint.peer):
            unplayed.append(label)
            continue
        if mode == "required" and not calls:
            fail(f"{label} (a call is required) was answered without a tool call: {_said(api, transcript)}",
                 transcript=transcript, rule=f"{check_id}:forced")
        if mode == "named" and (not calls or any(c.name != name for c in calls)):
            said = f"; it said {_said(api, transcript)}" if not calls else ""
            fail(f"{label} forces a call of {name}; the answer called: {_names(calls)}{said}",
                 transcript=transcript, rule=f"{check_id}:named")
    if cut:
        inconclusive(f"not exercised: the output limit cut every answer to {' and '.join(cut)} while the model "
                     f"was still reasoning, before any text or call")
    if unplayed:
        inconclusive(f"not exercised: under the peer profile {hc.endpoint.peer} no model answers a forced request "
                     f"(the mocker emits random tokens where no scripted output is named, and a scripted call would "
                     f"be the kit obeying for the endpoint), so the answers to {' and '.join(unplayed)} show "
                     "nothing of the endpoint's forcing; the modes were accepted")


# -- <P>-TOOLS-002: none makes no call ----------------------------------------------------------------

@pytest.mark.parametrize("api", _params("002"))
def test_tool_choice_none(hc: Session, api: str) -> None:
    module, check_id = apis.get(api), _check_id(api, "002")
    hc.streams_taking(api, "calculator", (catalog.TOOL_USE,))  # the same request under auto makes a call
    body = {**hc.body(api, "calculator", stream=False), "tool_choice": module.tool_choice("none")}
    transcript, calls = _post(hc, api, body, "calculator with tool_choice none")
    if calls:
        fail(f"tool_choice none was answered with tool calls ({_names(calls)})", transcript=transcript)
    claimed = module.missing_calls(_answer(api, transcript))
    if claimed:  # the answer says it called; the call is only in its text (the shape: <P>-SHAPE-001:calls)
        fail(f"tool_choice none was answered with a call: {claimed}", transcript=transcript)
    hc.require_exercised(check_id)


# -- <P>-TOOLS-003: parallel tool use off makes at most one call ----------------------------------------

@pytest.mark.parametrize("api", _params("003"))
def test_parallel_tool_use_off(hc: Session, api: str) -> None:
    module, check_id = apis.get(api), _check_id(api, "003")
    hc.streams_taking(api, "parallel_tools", (catalog.PARALLEL,))  # the same request makes two calls
    body = module.without_parallel(hc.body(api, "parallel_tools", stream=False))
    field = module.PARALLEL_FIELD
    transcript, calls = _post(hc, api, body, f"parallel_tools with parallel tool use off ({field})")
    if len(calls) > 1:
        fail(f"parallel tool use was turned off ({field}: {json.dumps(body[field])}) but the answer made "
             f"{len(calls)} calls ({_names(calls)})", transcript=transcript)
    claimed = module.missing_calls(_answer(api, transcript))
    if claimed:  # how many calls it made cannot be read: never a pass on "no second call block"
        inconclusive(f"not exercised: the answer says it called but holds its calls only as text ({claimed}; "
                     f"{module.PREFIX}-SHAPE-001:calls judges that shape): how many calls it made cannot be read")
    hc.require_exercised(check_id)


# -- <P>-TOOLS-004: a strict tool's arguments follow its schema ---------------------------------------------

def _strict_tools(api: str, scenario: Any) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """The scenario's tools as strict tools (its schemas with additionalProperties false: every
    property of theirs is required already), and each tool's schema by name."""
    schemas = {t["name"]: {**t["parameters"], "additionalProperties": False} for t in scenario.tools}
    tools = [apis.get(api).tool({**t, "parameters": schemas[t["name"]]}, strict=True) for t in scenario.tools]
    return tools, schemas


@pytest.mark.parametrize("api", _params("004"))
def test_strict_arguments_follow_the_schema(hc: Session, api: str) -> None:
    scenario = hc.scenario("calculator")
    body = hc.body(api, "calculator", stream=False)
    body["tools"], schemas = _strict_tools(api, scenario)
    complete = cut = tries = 0  # calls judged; calls the output limit cut (TOOLS-005's, not judged here)

    def attempt() -> int:  # one sample, every complete call judged; how many there were
        nonlocal complete, cut, tries
        tries += 1
        transcript, calls = _post(hc, api, copy.deepcopy(body), f"calculator with strict tools (try {tries})")
        truncated = cut_call(api, _answer(api, transcript), calls)
        for call in calls:
            if call is truncated:
                cut += 1
                continue
            complete += 1
            schema = schemas.get(call.name)
            if schema is None:
                fail(f"a strict call names {call.name!r}, a tool the request does not declare",
                     transcript=transcript)
            try:
                jsonschema.validate(json.loads(call.arguments), schema)
            except (ValueError, jsonschema.ValidationError) as problem:
                why = (problem.message if isinstance(problem, jsonschema.ValidationError)
                       else f"not JSON ({problem})")
                fail(f"the arguments of strict call {call.name} do not follow its schema: {why}; arguments "
                     f"{call.arguments[:200]}", transcript=transcript)
        return complete

    # sampled again, through the levers (a call forced, thinking off, ...), only while no complete call came
    hc.until_taken((catalog.TOOL_USE,), attempt, bool)
    if not complete and cut:
        inconclusive(f"not exercised: every strict call ({cut}) was cut by the output limit "
                     f"({tries} tries); a cut call is judged by {_check_id(api, '005')}")
    hc.require_exercised(_check_id(api, "004"))


# -- <P>-TOOLS-005: a forced call cut off by the output limit keeps its structure ---------------------------

def _judge_cut(hc: Session, api: str, transcript: Transcript, calls: list[ToolCall], how: str) -> bool:
    """Judge one answer to the forced request with the small limit; whether the limit cut a call (or text
    in its place: the path), marked as cut-call."""
    module, check_id = apis.get(api), _check_id(api, "005")
    answer = _answer(api, transcript)
    stop, output = module.stop_reason(answer), module.usage_tokens(answer)[1]
    sent = transcript.request_body if isinstance(transcript.request_body, dict) else {}
    limit = sent.get(module.MAX_TOKENS_FIELD)  # the limit sent: CUT_LIMIT, or a budget the levers grew
    limit = limit if isinstance(limit, int) and not isinstance(limit, bool) else CUT_LIMIT
    if output >= limit and stop != module.LENGTH_STOP:
        fail(f"the forced call ({how}) used all {output} output tokens of the limit, but the stop reason "
             f"is {stop!r}, not {module.LENGTH_STOP!r}", transcript=transcript, rule=check_id)
    texts = [t for kind, t in module.parts(answer) if kind == "text" and t]
    claimed = module.missing_calls(answer)
    if claimed or (not calls and any(REPORT["name"] in t for t in texts)):  # the forced call as text
        hc.saw(catalog.CUT_CALL)
        fail(f"the forced call came back ({how}) as text: "
             + (claimed or f"{next(t for t in texts if REPORT['name'] in t)[:160]!r}, no structured call"),
             transcript=transcript, rule=f"{check_id}:markup")
    if stop != module.LENGTH_STOP or not (calls or texts):
        return False  # it ended before the limit, or the limit cut reasoning alone: no call was cut
    hc.saw(catalog.CUT_CALL)
    text = next((t for t in texts if MARKUP.search(t)), None)
    markup = MARKUP.search(text) if text is not None else None
    if text is not None and markup is not None:  # the text was picked for holding markup
        fail(f"the forced call cut off by the limit came back ({how}) as text with tool-call markup "
             f"({markup.group()!r}): {text[:160]!r}; structured calls: {_names(calls)}",
             transcript=transcript, rule=f"{check_id}:markup")
    return True


@pytest.mark.parametrize("api", _params("005"))
def test_forced_call_cut_by_the_limit(hc: Session, api: str) -> None:
    """Each answer judged as it comes; the forced request sampled again through the levers (thinking off
    only, catalog.LEVERS_OWN_FORCING: the named choice and the small limit stay the check's) while the limit cut
    no call (it ended first, or reasoning used it up)."""
    module, check_id = apis.get(api), _check_id(api, "005")
    for stream in (True, False):
        body = hc.body(api, "plain_text", stream=stream)
        body.update({"tools": [module.tool(REPORT)], module.MAX_TOKENS_FIELD: CUT_LIMIT,
                     "tool_choice": module.tool_choice("named", REPORT["name"])})
        how = "streamed" if stream else "not streamed"
        label = f"a forced call with {module.MAX_TOKENS_FIELD} {CUT_LIMIT} ({how})"
        tries: list[Transcript] = []

        def attempt(body: dict[str, Any] = body, label: str = label, how: str = how) -> bool:
            transcript, calls = _post(hc, api, body, f"{label} (try {len(tries) + 1})" if tries else label)
            tries.append(transcript)
            return _judge_cut(hc, api, transcript, calls, how)

        hc.until_taken((catalog.TOOL_USE,), attempt, bool)
    hc.require_exercised(check_id)
