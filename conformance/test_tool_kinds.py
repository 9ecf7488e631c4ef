"""Tool kinds the real clients declare, and the tool calls they run (docs/API_FACTS.md, "Request shapes and
tool kinds").

- ``RS-TOOLKIND-001``: Codex's mixed tool array (function, custom with a Lark and a regex grammar,
  namespace, web_search, local_shell, tool_search, image_generation) is accepted; the kinds an endpoint
  cannot run are left out, never refused.
- ``RS-TOOLKIND-002``: a custom tool (Codex's freeform apply_patch) reaches the model and its call comes
  back as a ``custom_tool_call`` item whose ``input`` is the text, not the JSON the model may have been
  offered (rule ``<ID>``); streamed, its ``response.custom_tool_call_input.delta`` events join to the
  ``.done`` event's input and to the item's (``<ID>:stream``). The tool is forced (``tool_choice``
  ``{"type": "custom"}``), so a dropped tool shows whatever the model.
- ``RS-TOOLKIND-003``: ``custom_tool_call`` / ``_output`` and ``tool_search_call`` / ``_output`` items are
  accepted as input (``<ID>``), and so are replayed items without ``id`` or ``status`` (``<ID>:ids``).
- ``<P>-TOOLS-006``: a streamed, forced call of a strict tool carries its arguments: they validate against
  the tool's JSON schema, as a client that runs them needs (an ``input: {}`` on every streamed tool_use
  fails), and the forced stream has its call (a Chat stream whose call became empty content with
  ``finish_reason: stop`` fails). An answer the output limit cut is sampled again, through the levers
  (thinking off: a reasoning model that reasons to the limit never reaches the forced call; the forced
  choice stays the check's own); a call it cut is the cut-call rules' (``<P>-TOOLS-005``), not this one's.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from harnesscheck.protocol import apis
from harnesscheck.conformance import catalog, grammar
from harnesscheck.protocol.apis.base import ToolCall
from harnesscheck.conformance.session import Session
from harnesscheck.conformance.verdict import CheckFailed, fail, inconclusive, ok_response

# A small Lark grammar in the shape of Codex's apply_patch (an envelope of file operations), and a regex one.
PATCH_GRAMMAR = "\n".join([
    'start: "*** Begin Patch" LF op+ "*** End Patch" LF?',
    'op: add | delete',
    'add: "*** Add File: " /[^\\n]+/ LF line+',
    'delete: "*** Delete File: " /[^\\n]+/ LF',
    'line: "+" /[^\\n]*/ LF',
    '%import common.LF'])
PATCH = "*** Begin Patch\n*** Add File: notes/hello.txt\n+Hello, \"harnesscheck\" \\ é\n*** End Patch\n"
APPLY_PATCH: dict[str, Any]
APPLY_PATCH = {"type": "custom", "name": "apply_patch", "description": "Edit files with a patch.",
               "format": {"type": "grammar", "syntax": "lark", "definition": PATCH_GRAMMAR}}
TICKET: dict[str, Any] = {"type": "custom", "name": "ticket_id", "description": "Look a ticket up by its id.",
          "format": {"type": "grammar", "syntax": "regex", "definition": r"^[A-Z]{2,5}-[0-9]{1,6}$"}}
SEARCH_DOCS = {"type": "function", "name": "search_docs", "description": "Search the documentation.",
               "strict": False, "parameters": {"type": "object", "properties": {"query": {"type": "string"}},
                                               "required": ["query"]}}
HOSTED: list[dict[str, Any]]
HOSTED = [{"type": "namespace", "name": "mcp__docs", "description": "Tools of the docs MCP server.",
           "tools": [SEARCH_DOCS]},
          {"type": "web_search", "external_web_access": False},
          {"type": "local_shell"},
          {"type": "tool_search", "execution": "client", "description": "Find more tools.",
           "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}},
          {"type": "image_generation", "output_format": "png"}]


def codex_tools(scenario_tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The scenario's function tools and every other kind Codex sends (catalog profiles and fallback)."""
    return [*scenario_tools, APPLY_PATCH, TICKET, *HOSTED]


def patch_request(model: str, *, stream: bool, tools: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A request that forces the custom tool apply_patch (tool_choice {"type": "custom"}), the patch quoted."""
    return {"model": model, "stream": stream, "max_output_tokens": 400, "store": False,
            "tools": tools if tools is not None else [APPLY_PATCH, SEARCH_DOCS],
            "tool_choice": {"type": "custom", "name": "apply_patch"},
            "input": [{"type": "message", "role": "user",
                       "content": f"Apply this patch with apply_patch: `{PATCH}`"}]}


# -- RS-TOOLKIND-001 --------------------------------------------------------------------------------

@pytest.mark.check("RS-TOOLKIND-001")
def test_mixed_tool_array_accepted(hc: Session) -> None:
    body = hc.body("responses", "calculator", stream=False)
    body["tools"] = codex_tools(body["tools"])
    ok_response(hc.post("responses", apis.responses.PATH, body, label="Codex's mixed tool array"),
                "a request with function, custom, namespace, web_search, local_shell, tool_search and "
                "image_generation tools")


# -- RS-TOOLKIND-002 --------------------------------------------------------------------------------

NO_CALL_ID = "the custom_tool_call has no call_id"  # its own rule (:call-id): what Codex was measured to break on


def custom_call_problems(answer: dict[str, Any], name: str) -> list[str]:
    """What is wrong with a forced custom tool's call in an answer (a response, or a folded stream)."""
    items = [it for it in answer.get("output") or [] if isinstance(it, dict)]
    calls = [it for it in items if it.get("type") == "custom_tool_call" and it.get("name") == name]
    if not calls:
        functions = [it for it in items if it.get("type") == "function_call" and it.get("name") == name]
        if functions:
            return [f"the custom tool {name}'s call came back as a function_call item (arguments "
                    f"{str(functions[0].get('arguments'))[:120]}), not a custom_tool_call item"]
        kinds = ", ".join(str(it.get("type")) for it in items) or "no output items"
        return [f"the forced custom tool {name} was not called (the answer: {kinds}): the tool did not reach "
                "the model, or the forced choice was ignored"]
    problems = []
    for call in calls:
        if not isinstance(call.get("call_id"), str) or not call["call_id"]:
            problems.append(f"{NO_CALL_ID} ({call.get('call_id')!r})")
        text = call.get("input")
        if not isinstance(text, str):
            problems.append(f"the custom_tool_call's input is {text!r}, not a string")
            continue
        try:
            wrapped = json.loads(text)
        except ValueError:
            wrapped = None
        if isinstance(wrapped, dict) and "input" in wrapped:
            problems.append(f"the custom_tool_call's input is the JSON of a function's arguments ({text[:80]!r}), "
                            "not the tool's text")
    return problems


def custom_stream_problems(source: Any) -> list[str]:
    """Where a streamed custom call's input deltas, its .done and its item at output_item.done disagree: the
    Responses grammar's RS-GRAMMAR-CUSTOM-INPUT findings, read from the stream's fold (``source``: a Transcript
    or its frames)."""
    return [f.message for f in grammar.validate_for("responses", source) if f.rule == CUSTOM_INPUT_RULE]


CUSTOM_INPUT_RULE = "RS-GRAMMAR-CUSTOM-INPUT"


@pytest.mark.check("RS-TOOLKIND-002")
def test_custom_tool_call(hc: Session) -> None:
    t = hc.post("responses", apis.responses.PATH, patch_request(hc.endpoint.model, stream=True),
                label="a forced custom tool (apply_patch), streamed")
    ok_response(t, "a request with a custom tool forced")
    answer = apis.responses.final_answer(t) or {}
    problems = custom_call_problems(answer, APPLY_PATCH["name"])
    if problems:  # a call without call_id is the measured break; not called, or called otherwise, the reference's
        fail(problems[0], transcript=t, rule="RS-TOOLKIND-002:call-id" if problems[0].startswith(NO_CALL_ID) else None)
    problems = custom_stream_problems(t)
    if problems:
        fail(problems[0], transcript=t, rule="RS-TOOLKIND-002:stream")


# -- RS-TOOLKIND-003 --------------------------------------------------------------------------------

def custom_items_input(model: str) -> dict[str, Any]:
    """A turn after a custom tool's call and a client tool search, as Codex sends it back (no ids)."""
    return {"model": model, "stream": False, "max_output_tokens": 64, "store": False, "tools": [SEARCH_DOCS],
            "input": [{"type": "message", "role": "user", "content": f"Apply this patch with apply_patch: `{PATCH}`"},
                      {"type": "tool_search_call", "call_id": "ts_kit_1", "execution": "client",
                       "arguments": {"query": "patch tools"}, "status": "completed"},
                      {"type": "tool_search_output", "call_id": "ts_kit_1", "execution": "client",
                       "status": "completed", "tools": [SEARCH_DOCS]},
                      {"type": "custom_tool_call", "call_id": "call_kit_patch", "name": "apply_patch",
                       "input": PATCH},
                      {"type": "custom_tool_call_output", "call_id": "call_kit_patch",
                       "output": "Success. Updated the following files:\nA notes/hello.txt"}]}


def replayed_without_ids(model: str) -> dict[str, Any]:
    """A turn whose replayed assistant message and function call carry no id and no status."""
    return {"model": model, "stream": False, "max_output_tokens": 64, "store": False, "tools": [SEARCH_DOCS],
            "input": [{"type": "message", "role": "user", "content": "Find the install guide."},
                      {"type": "message", "role": "assistant", "content": "I will search the docs."},
                      {"type": "function_call", "call_id": "call_kit_docs", "name": "search_docs",
                       "arguments": json.dumps({"query": "install guide"})},
                      {"type": "function_call_output", "call_id": "call_kit_docs", "output": "docs/install.md"}]}


@pytest.mark.check("RS-TOOLKIND-003")
def test_tool_items_as_input(hc: Session) -> None:
    ok_response(hc.post("responses", apis.responses.PATH, custom_items_input(hc.endpoint.model),
                        label="custom_tool_call / _output and tool_search_call / _output items"),
                "input with custom_tool_call, custom_tool_call_output, tool_search_call and tool_search_output")
    t = hc.post("responses", apis.responses.PATH, replayed_without_ids(hc.endpoint.model),
                label="a replayed message and function_call without id or status")
    try:
        ok_response(t, "input items replayed without id or status")
    except CheckFailed as failed:
        raise CheckFailed(failed.summary, transcript=t, rule="RS-TOOLKIND-003:ids") from None


# -- <P>-TOOLS-006 ----------------------------------------------------------------------------------

def strict_tools(api: str, tools: tuple[dict[str, Any], ...]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The scenario's tools as strict tools (no other properties allowed), and each one's schema by name."""
    schemas = {t["name"]: {**t["parameters"], "additionalProperties": False} for t in tools}
    return [apis.get(api).tool({**t, "parameters": schemas[t["name"]]}, strict=True) for t in tools], schemas


def argument_problems(calls: list[ToolCall], schemas: dict[str, Any]) -> list[str]:
    """Each call whose arguments do not validate against its tool's schema, with why."""
    out = []
    for call in calls:
        schema = schemas.get(call.name)
        if schema is None:
            out.append(f"the streamed call names {call.name!r}, a tool the request does not declare")
            continue
        try:
            jsonschema.validate(json.loads(call.arguments or ""), schema)
        except (ValueError, jsonschema.ValidationError) as problem:
            why = problem.message if isinstance(problem, jsonschema.ValidationError) else f"not JSON ({problem})"
            out.append(f"the streamed arguments of {call.name} do not follow its schema: {why}; arguments "
                       f"{call.arguments[:160]!r}")
    return out


def _params() -> list[Any]:
    return [pytest.param(api, marks=pytest.mark.check(f"{apis.get(api).PREFIX}-TOOLS-006"),
                         id=f"{apis.get(api).PREFIX}-TOOLS-006") for api in apis.NAMES
            if catalog.has(f"{apis.get(api).PREFIX}-TOOLS-006")]  # what the catalog binds


PLAIN_SAMPLES = 3  # non-streamed samples that must each make the forced call before a streamed miss is a lost call


def _lost_from_the_stream(hc: Session, api: str, body: dict[str, Any], answer: dict[str, Any], t: Any, label: str,
                          forced_check: str) -> None:
    """A forced streamed answer without a call: the call was lost from the stream only when the endpoint honours
    the forced choice, i.e. the same request not streamed makes the call in each of PLAIN_SAMPLES samples; one
    sample without a call is an ignored forced choice (its check judges it), never a lost call (issue 41: on
    llama-server's Responses route one non-streamed sample in seven made a call, by chance)."""
    module = apis.get(api)
    plain_body = {**{k: v for k, v in body.items() if k != "stream_options"}, "stream": False}
    for n in range(1, PLAIN_SAMPLES + 1):
        plain = hc.post(api, module.PATH, plain_body, label=f"{label}, not streamed (was a call made? sample {n})")
        made = plain.json_body() if isinstance(plain.json_body(), dict) else {}
        if not plain.ok:
            inconclusive(f"not exercised: the forced streamed answer made no call, and the same request not streamed "
                         f"was answered HTTP {plain.status}")
        if not module.tool_calls(made):
            inconclusive(f"not exercised: the endpoint made no call though one was forced (streamed, and not streamed "
                         f"in sample {n} of {PLAIN_SAMPLES}): an ignored forced choice, {forced_check}:forced judges that")
    fail(f"the forced streamed answer has no tool call (stop: {module.stop_reason(answer)!r}) while the same request "
         f"not streamed made one in each of {PLAIN_SAMPLES} samples: the call was lost from the stream", transcript=t)


@pytest.mark.parametrize("api", _params())
def test_streamed_arguments_follow_the_schema(hc: Session, api: str) -> None:
    module = apis.get(api)
    body = hc.body(api, "calculator", stream=True)
    body["tools"], schemas = strict_tools(api, hc.scenario("calculator").tools)
    body["tool_choice"] = module.tool_choice("required")
    tries = 0
    forced_check = f"{module.PREFIX}-TOOLS-001"

    def attempt() -> bool:  # one sample, judged; whether it had a whole call (not cut by the limit)
        nonlocal tries
        tries += 1
        label = "a forced call of a strict tool, streamed" + (f" (try {tries})" if tries > 1 else "")
        t = hc.post(api, module.PATH, body, stream=True, label=label)
        if t.status is not None and 400 <= t.status < 500 and t.status not in (401, 403, 408, 429) and \
                "tool_choice" in body:
            unforced = {k: v for k, v in body.items() if k != "tool_choice"}
            again = hc.post(api, module.PATH, unforced, stream=True, label=label + ", not forced")
            if again.ok:  # the refusal was the forced choice's: the check that sends it for itself judges it
                hc.note(f"the endpoint refused the forced choice (HTTP {t.status}): {forced_check} judges that "
                        "refusal; the strict tool's arguments judged on an unforced answer")
                body.pop("tool_choice")
                t = again
        ok_response(t, label)
        answer = module.final_answer(t) or {}
        calls, cut = module.tool_calls(answer), module.stop_reason(answer) == module.LENGTH_STOP
        if cut:
            calls = calls[:-1]  # a call the limit cut is the cut-call rules' (TOOLS-005)
        if not calls and cut:
            return False  # the limit cut the answer before a whole call: sampled again
        if not calls and "tool_choice" not in body:
            inconclusive(f"not exercised: the endpoint refuses a forced call ({forced_check} judges that) and the "
                         "unforced answer made none")
        if not calls:
            _lost_from_the_stream(hc, api, body, answer, t, label, forced_check)
        problems = argument_problems(calls, schemas)
        if problems:
            fail(problems[0], transcript=t)
        return True

    # sampled again through the levers (catalog.LEVERS_OWN_FORCING: thinking off only; the forced choice stays)
    if not hc.until_taken((catalog.TOOL_USE,), attempt, bool)[1]:
        inconclusive("not exercised: the output limit cut every forced answer before a whole call")
