"""A fourth API is one module (issue 32): a throwaway API, "echo", written here as the one module a
newcomer would add to ``protocol/apis/`` (its own stream validator included: ``GRAMMAR`` names the
module itself), registered with ``apis.register`` and nothing else, is picked up by every generic part
of the kit that holds per-API knowledge: the registry's lists, the grammar lookup, the fold, the client
runner's reading of a recorded exchange, replay's request forms, trace validation, its snapshot views,
its timed fold and its HTTP client, and the error check's id.

Each test would fail if a table or list keyed by the three API names came back in the part it drives
(a KeyError, or the echo API missing from a list). Cheap: no server but one in-process socket that
answers one recorded stream.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import types
from collections.abc import Iterator
from typing import Any

import pytest

from harnesscheck.protocol import apis
from harnesscheck.conformance import grammar
from harnesscheck.protocol.apis import base
from harnesscheck.protocol.wire.sse import decode_all

NAME = "echo"
MODULE = "harnesscheck_test_echo_api"  # where the throwaway module lives while a test runs

# The whole API module, as a newcomer would write it in protocol/apis/echo.py. Its wire: SSE events
# echo.start, echo.text, echo.call (a whole call at once), echo.end (stop and usage), echo.error.
ECHO_SOURCE = '''
import copy
import json
from typing import Any

from harnesscheck.protocol.apis import base
from harnesscheck.protocol.apis.base import ToolCall
from harnesscheck.conformance.grammar.findings import Finding, frames_and_request

NAME = "echo"
PATH = "/v1/echo"
PREFIX = "EC"
LABEL = "Echo"
SDK = ""
SIGNS_THINKING = False
MIN_OUTPUT_TOKENS = 1
MAX_TOKENS_FIELD = "max_tokens"
LENGTH_STOP = "length"
GRAMMAR = __name__  # the validator below
ALIASES = ("echo-api",)
ANSWER_ENDS = ("echo.end",)
BAD_REQUESTS = (("messages not an array", {"model": "{model}", "messages": 3}),)
ALLOWED_REQUESTS = ()
FORM = base.Form("messages", "system", True, "text", ("authorization", "Bearer {key}"),
                 roles=("user", "assistant", "tool"))
PER_CALL_END = True
stream_grown = None


def headers(api_key=None):
    return base.headers(api_key)


def first(scenario, model, *, stream=True):
    user = {"role": "user", "content": base.user_text(scenario)}
    body = {"model": model, "stream": stream, "messages": [user], "max_tokens": base.output_budget(scenario)}
    if scenario.tools:
        body["tools"] = tools(scenario)
    return body


def tool(spec, *, strict=None):
    out = {"name": spec["name"], "parameters": spec["parameters"]}
    return out if strict is None else {**out, "strict": strict}


def tools(scenario):
    return [tool(t) for t in scenario.tools]


def tool_choice(mode, name=""):
    return {"mode": "named", "name": name} if mode == "named" else mode


PARALLEL_FIELD = "parallel"


def without_parallel(body):
    return {**body, PARALLEL_FIELD: False}


def cut_answer(name, arguments):
    return {"id": "e_cut", "text": "", "calls": {0: {"id": "call_cut", "name": name, "arguments": arguments}},
            "usage": {}, "stop": LENGTH_STOP}


def follow(body, answer, scenario, turn):
    body = copy.deepcopy(body)
    calls = tool_calls(answer)
    body["messages"].append({"role": "assistant", "content": (answer or {}).get("text", ""),
                             "calls": [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in calls]})
    for c in calls:
        body["messages"].append({"role": "tool", "call_id": c.id, "content": scenario.result_for(c.name, c.arguments)})
    user = base.next_user(scenario, turn)
    if user:
        body["messages"].append({"role": "user", "content": user})
    return body


fold_input = base.fold_input


def stream_part(snap, key):
    return "text" if key == "text" else f"call {key}"


def parts(answer):
    return ([("text", answer["text"])] if answer.get("text") else []) + \
        [("tool_call", c.name) for c in tool_calls(answer)]


def usage(answer):
    return dict(answer.get("usage") or {})


def usage_tokens(answer):
    u = usage(answer)
    return int(u.get("input_tokens") or 0), int(u.get("output_tokens") or 0), int(u.get("cached_tokens") or 0)


def stop_reason(answer):
    return answer.get("stop")


def rewritten(answer):
    return None  # no reasoning to rewrite


def without_reasoning(answer):
    return None


def missing_calls(answer):
    return ""


def kit_answer(scenario, *, signature=""):
    return {"id": "e_kit", "text": "The kit's answer.", "calls": {}, "usage": {}, "stop": "end"}


def thinking_on(body):
    return dict(body)


def with_system_prefix(body, prefix):
    return {**body, "system": prefix + str(body.get("system") or "")}


def append_user(body, user):
    return {**body, "messages": [*body.get("messages", []), {"role": "user", "content": user}]}


def tokenize_fields(body):
    return {k: body[k] for k in ("system", "messages", "tools") if k in body}


def is_error_body(body):
    error = body.get("error") if isinstance(body, dict) else None
    return isinstance(error, dict) and isinstance(error.get("message"), str)


def malformed_history(body):
    for m in (body.get("messages") or []) if isinstance(body, dict) else []:
        for c in (m.get("calls") or []) if isinstance(m, dict) and m.get("role") == "assistant" else []:
            if not base.json_object_text(c.get("arguments")):
                return f"call {c.get('id')} with arguments {str(c.get('arguments'))[:80]!r}"
    return ""


def agent_request(model, system, tools, new, max_tokens):
    return {"model": model, "system": system, "tools": tools, "messages": new, "max_tokens": max_tokens,
            "stream": True}


def history_answer(texts, calls):
    return [{"role": "assistant", "content": "\\n".join(texts),
             "calls": [{"id": i, "name": c.name, "arguments": c.arguments} for i, c in calls]}]


def history_results(results):
    return [{"role": "tool", "call_id": i, "content": r} for i, r in results]


def is_opening(body):
    return not any(isinstance(m, dict) and m.get("role") in ("assistant", "tool") for m in body.get("messages") or [])


def least_limit(body):
    return MIN_OUTPUT_TOKENS


def forcing_refused(body):
    return False


def lever_thinking_off(body):
    return None  # echo has no thinking setting: the lever is never pulled


lever_thinking_on = lever_thinking_off
lever_reasoning_minimal = None
lever_prefill = None


def is_stream_event(e):
    return isinstance(e, dict) and str(e.get("type", "")).startswith("echo.")


def answer_values(answer):
    return [("text", answer.get("text")), *(("call", c.id) for c in tool_calls(answer))]


def overflow_marker_problem(body):
    message = ((body or {}).get("error") or {}).get("message") if isinstance(body, dict) else None
    return None if isinstance(message, str) and "too long" in message else "no 'too long' in the refusal"


def streamed_refusal(frames):
    return None  # echo refuses over HTTP only


def accumulate(event, snapshot):
    if not isinstance(event, dict):
        return snapshot
    typ = event.get("type")
    if typ == "echo.start":
        return {"id": event.get("id"), "text": "", "calls": {}, "usage": {}, "stop": None}
    if snapshot is None:
        return None
    if typ == "echo.text" and isinstance(event.get("text"), str):
        return {**snapshot, "text": snapshot["text"] + event["text"]}
    if typ == "echo.call" and base.is_int(event.get("index")):
        key = event["index"]
        call = {"id": event.get("id", ""), "name": event.get("name", ""),
                "arguments": event.get("arguments", "")}
        return base.completed({**snapshot, "calls": {**snapshot["calls"], key: call}}, key, "echo.call")
    if typ == "echo.end":
        return {**snapshot, "stop": event.get("stop"), "usage": dict(event.get("usage") or {}), "_end": True}
    if typ == "echo.error":
        return {**snapshot, "error": event.get("message")}
    return base.unplaced(snapshot, str(typ))


def final_message(source):
    snap = base.fold(source, accumulate)
    return None if snap is None else base.public(snap)


final_answer = final_message
place = accumulate  # no per-event record: the answer's fold is the fold


def tool_calls(answer):
    calls = (answer or {}).get("calls") or {}
    done = (answer or {}).get("_complete") or {}
    return [ToolCall(k, i, c["id"], c["name"], c["arguments"], k in done or "_complete" not in (answer or {}),
                     done.get(k, "")) for i, (k, c) in enumerate(sorted(calls.items()))]


def is_content(event):
    return isinstance(event, dict) and event.get("type") in ("echo.text", "echo.call")


def error_of(event):
    return event.get("message") if isinstance(event, dict) and event.get("type") == "echo.error" else None


stream_error = error_of


def stream_history(snap):
    snap = snap or {}
    return [{"role": "assistant", "content": snap.get("text", ""),
             "calls": [dict(c) for _, c in sorted((snap.get("calls") or {}).items())]}]


def stream_structure(snap, kinds):
    snap = snap or {}
    return {"blocks": ["text"] if snap.get("text") else [],
            "tool_calls": [c["name"] for _, c in sorted((snap.get("calls") or {}).items())],
            "stop": snap.get("stop")}


def stream_usage(snap):
    return base.snapshot_usage(snap)


def stream_stop(snap):
    return (snap or {}).get("stop")


def stream_ended(snap):
    return base.snapshot_ended(snap)


def answer_text(answer):
    return "".join(e.get("content", "") for e in answer or [])


def answer_call_ids(answer):
    return [c["id"] for e in answer or [] for c in e.get("calls", [])]


RULES = {
    "EC-GRAMMAR-START": "The stream opens with echo.start.",
    "EC-GRAMMAR-EVENT": "Every event after echo.start is one the fold places.",
    "EC-GRAMMAR-ARGS": "A call's arguments are a JSON object.",
    "EC-GRAMMAR-END": "The stream ends with echo.end.",
}


def validate(source, request=None):
    """The grammar reads the fold's record: no stream state of its own."""
    frames, _ = frames_and_request(source, request)
    snap, out = None, []
    for f in frames:
        before = snap
        snap = accumulate(f.json, snap)
        if snap is None:
            out.append(Finding("EC-GRAMMAR-START", f.index, "an event before echo.start"))
        elif len(snap.get("_unplaced", ())) > len((before or {}).get("_unplaced", ())):
            out.append(Finding("EC-GRAMMAR-EVENT", f.index, "an event the fold could not place",
                               observed=snap["_unplaced"][-1]))
    last = frames[-1].index if frames else None
    for call in tool_calls(snap):
        if not base.json_object_text(call.arguments):
            out.append(Finding("EC-GRAMMAR-ARGS", last, "arguments not a JSON object",
                               observed=call.arguments))
    if not stream_ended(snap):
        out.append(Finding("EC-GRAMMAR-END", last, "no echo.end"))
    return out
'''


@pytest.fixture()
def echo() -> Iterator[types.ModuleType]:
    """The echo API module, registered for one test (and importable by its name, as GRAMMAR needs)."""
    module = types.ModuleType(MODULE)
    sys.modules[MODULE] = module
    try:
        exec(compile(ECHO_SOURCE, f"<{MODULE}>", "exec"), module.__dict__)
        undo = apis.register(module)
        try:
            yield module
        finally:
            undo()
    finally:
        sys.modules.pop(MODULE, None)
    assert NAME not in apis.NAMES and "EC" not in apis.PREFIXES  # the undo leaves the three


EVENTS: list[dict[str, Any]] = [
    {"type": "echo.start", "id": "e1"},
    {"type": "echo.text", "text": "Looking "},
    {"type": "echo.text", "text": "it up."},
    {"type": "echo.call", "index": 0, "id": "call_1", "name": "lookup", "arguments": "{\"q\": \"pi\"}"},
    {"type": "echo.end", "stop": "tool_use", "usage": {"input_tokens": 7, "output_tokens": 5}},
]


def _sse(events: list[dict[str, Any]]) -> bytes:
    return b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events)


def _recorded(events: list[dict[str, Any]]) -> dict[str, Any]:
    """A recorded exchange as the client runner reads it (agents/clients/turns.py)."""
    return {"method": "POST", "url": "http://127.0.0.1:9/v1/echo?beta=1",
            "frames": [{"data": json.dumps(e)} for e in events]}


def test_the_registry_lists_a_registered_api(echo: types.ModuleType) -> None:
    assert apis.NAMES[-1] == NAME and apis.PREFIXES[-1] == "EC" and len(apis.NAMES) == 4
    assert apis.get(NAME) is echo and apis.by_prefix("EC") is echo
    assert apis.for_path("/proxy/v1/echo?x=1") is echo and apis.for_path("/v1/nothing") is None
    with pytest.raises(ValueError):
        apis.register(echo)  # once only
    from harnesscheck.conformance import options
    from harnesscheck.replay.benchmarks.common import PATHS
    from harnesscheck.replay.trace import DEFAULT_PATHS

    # what other parts keep per API is read from the registry when asked, not copied at their import
    assert options.validate_options(endpoint=None, apis="echo", expect=(), tries=1, timeout=1.0) is None
    assert DEFAULT_PATHS[NAME] == PATHS[NAME] == "/v1/echo" and NAME in list(DEFAULT_PATHS)


def test_grammar_finds_the_api_own_validator(echo: types.ModuleType) -> None:
    assert grammar.module_for(NAME) is echo and grammar.module_for("echo-api") is echo
    assert grammar.validate_for(NAME, decode_all(_sse(EVENTS))) == []
    bad = [{"type": "echo.text", "text": "early"}, *EVENTS[:3], {"type": "echo.mystery"},
           {**EVENTS[3], "arguments": "[1]"}]
    rules = [f.rule for f in grammar.validate_for(NAME, decode_all(_sse(bad)))]
    assert rules == ["EC-GRAMMAR-START", "EC-GRAMMAR-EVENT", "EC-GRAMMAR-ARGS", "EC-GRAMMAR-END"]


def test_the_fold_and_the_client_runner_read_it(echo: types.ModuleType) -> None:
    from harnesscheck.agents.clients import turns

    answer = apis.get(NAME).final_message(decode_all(_sse(EVENTS)))
    assert answer is not None and answer["text"] == "Looking it up." and answer["stop"] == "tool_use"
    t = _recorded(EVENTS)
    assert turns.api_of(t) is echo and turns.is_model_request(t)
    assert turns.stream_complete(t) and not turns.stream_complete(_recorded(EVENTS[:-1]))
    assert turns.tool_calls(t) == [{"id": "call_1", "name": "lookup", "arguments": "{\"q\": \"pi\"}"}]


def test_replay_forms_traces_and_views_read_it(echo: types.ModuleType) -> None:
    from harnesscheck.replay import fold, forms
    from harnesscheck.replay.trace import TraceTurn, history_key, validate_turn_dict

    assert forms.form(NAME) is echo.FORM and forms.FORMS[NAME] is echo.FORM and NAME in forms.FORMS
    assert forms.api_for_path("/v1/echo") == NAME
    assert TraceTurn(session="s", turn=0, api=NAME).path == "/v1/echo" and history_key(NAME) == "messages"
    turn = {"session": "s", "turn": 0, "api": NAME, "request": {"model": "m", "messages": [{"role": "user",
                                                                                           "content": "hi"}]}}
    assert validate_turn_dict(turn) == []
    watch, snap, completed = fold.CallWatch(NAME), None, []
    for event in EVENTS:
        snap = echo.accumulate(event, snap)
        completed += [(c.name, source) for c, source in watch.step(snap)[1]]
    assert completed == [("lookup", "echo.call")]
    view = fold.view(NAME)
    assert view.ended(snap) and view.stop(snap) == "tool_use" and view.usage(snap)["output_tokens"] == 5


def test_replay_client_streams_it_over_http(echo: types.ModuleType) -> None:
    from harnesscheck.replay.client import StreamClient, run_async

    body = _sse(EVENTS)

    async def main() -> Any:
        async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), 0)
            await reader.readexactly(length)
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: "
                         + str(len(body)).encode() + b"\r\n\r\n" + body)
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(answer, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            async with StreamClient(timeout=10, read_timeout=10) as client:
                return await client.post(f"http://127.0.0.1:{port}{echo.PATH}", {"model": "m"}, api=NAME)
        finally:
            server.close()
            await server.wait_closed()

    r = run_async(main())
    assert r.ok and r.finished, (r.status, r.error)
    assert len(r.token_ns) == 3 and r.stop_reason == "tool_use" and r.usage["input_tokens"] == 7
    assert [t.name for t in r.tool_ready] == ["lookup"] and r.answer is not None
    assert r.structure == {"blocks": ["text"], "tool_calls": ["lookup"], "stop": "tool_use"}


def test_the_error_check_names_it_by_its_prefix(echo: types.ModuleType) -> None:
    from harnesscheck.conformance import test_errors

    assert test_errors.check_of(NAME) == "EC-ERR-001"
    assert echo.BAD_REQUESTS and base.Form is type(echo.FORM)


# -- registration is checked, the catalog binds or refuses, and one real check runs end to end -------------

def test_register_names_what_an_incomplete_module_lacks() -> None:
    module = types.ModuleType("half_api")
    exec(compile(ECHO_SOURCE, "<half_api>", "exec"), module.__dict__)
    for member in ("follow", "PARALLEL_FIELD", "fold_input"):
        delattr(module, member)
    with pytest.raises(apis.IncompleteApi) as caught:
        apis.register(module)
    assert "PARALLEL_FIELD, fold_input, follow" in str(caught.value) and NAME not in apis.NAMES
    assert apis.missing(module) == ["PARALLEL_FIELD", "fold_input", "follow"]


def test_the_catalog_binds_its_families_or_refuses(echo: types.ModuleType) -> None:
    from harnesscheck.conformance import catalog
    from harnesscheck.reports.schema import results_schema

    check = catalog.get("EC-TURN-001")  # bound at call time, with its rules
    assert check.api == NAME and check.level == catalog.MUST and catalog.rule("EC-TURN-001:refused").level == catalog.SHOULD
    assert check.own_rules == ("EC-TURN-001", "EC-TURN-001:refused") and check in catalog.CHECKS
    assert catalog.family(NAME, "TURN") == [check] and NAME in catalog.APIS
    with pytest.raises(catalog.UnboundFamily, match=r"the TOOLS checks of the registered API 'echo' \(EC\) stand "
                                                    r"on its own reference"):
        catalog.family(NAME, "TOOLS")
    assert NAME in results_schema()["$defs"]["check"]["properties"]["api"]["enum"]


def test_an_api_gone_leaves_the_catalog() -> None:
    from harnesscheck.conformance import catalog

    catalog.bind()
    assert not any(c.api == NAME for c in catalog.CHECKS) and "EC-TURN-001" not in catalog.RULES
    with pytest.raises(KeyError):
        catalog.get("EC-TURN-001")


class _EchoServer:
    """An echo endpoint on loopback: a streamed first turn calls calculator, a follow-up answers text;
    a history whose call's arguments are no JSON object is refused with a 400 in echo's error shape.
    ``follow_up_status`` bends the follow-up built from a complete answer (a 500: EC-TURN-001 fails)."""

    def __init__(self, follow_up_status: int = 200) -> None:
        import http.server
        import threading

        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._send(404, {"error": {"type": "not_found", "message": f"no route {self.path}"}})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
                if not self.path.split("?")[0].endswith("/v1/echo"):
                    return self._send(404, {"error": {"type": "not_found", "message": "no route"}})
                history = body.get("messages") or []
                calls = [c for m in history if m.get("role") == "assistant" for c in m.get("calls") or []]
                if any(not base.json_object_text(c.get("arguments")) for c in calls):
                    return self._send(400, {"error": {"type": "invalid_request", "message": "arguments not JSON"}})
                if calls and outer.follow_up_status != 200:
                    return self._send(outer.follow_up_status, {"error": {"type": "server", "message": "boom"}})
                events = EVENTS[:1] + ([{"type": "echo.text", "text": "It is 4."},
                                        {"type": "echo.end", "stop": "end", "usage": {"input_tokens": 9,
                                                                                      "output_tokens": 3}}]
                                       if calls else [{**EVENTS[3], "name": "calculator",
                                                       "arguments": "{\"expression\": \"2 + 2\"}"}, EVENTS[4]])
                if not body.get("stream"):
                    return self._send(200, {"id": "e2", "text": "It is 4.", "calls": {}, "stop": "end", "usage": {}})
                data = _sse(events)
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _send(self, status: int, obj: Any) -> None:
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.follow_up_status = follow_up_status
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()


def _run_echo_check(tmp_path: Any, monkeypatch: pytest.MonkeyPatch, follow_up_status: int) -> dict[str, Any]:
    """catalog -> session -> verdict -> results.json: the kit's suite run (runner.run_suite, its own pytest
    process) against the echo endpoint, with the echo module loaded as a plugin that registers it, taking
    the one check the catalog binds for it."""
    from harnesscheck.conformance.runner import SuiteOptions, run_suite
    from harnesscheck.reports.schema import load_results

    plugin = tmp_path / "plugins" / f"{MODULE}.py"
    plugin.parent.mkdir()
    plugin.write_text(ECHO_SOURCE + "\n\nimport sys as _sys\nfrom harnesscheck.protocol import apis as _apis\n"
                      "_apis.register(_sys.modules[__name__])\n")
    monkeypatch.setenv("PYTHONPATH", f"{plugin.parent}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    monkeypatch.setenv("PYTEST_ADDOPTS", f"-p {MODULE}")
    with _EchoServer(follow_up_status) as url:
        doc = run_suite(SuiteOptions(endpoint=url, model="echo-1", apis=NAME, tries=1, timeout=10,
                                     witness="auto", select="EC-TURN-001", min_verdicts=0, min_must_verdicts=0),
                        tmp_path / "out", subprocess_run=True, quiet=True)
    # the document validates where echo is registered (the results schema's api list is the registry's)
    assert load_results(tmp_path / "out" / "results.json")["checks"] == doc["checks"]
    return doc


def test_a_registered_api_runs_a_real_check_end_to_end(echo: types.ModuleType, tmp_path: Any,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    doc = _run_echo_check(tmp_path, monkeypatch, 200)
    assert [(c["id"], c["api"], c["outcome"]) for c in doc["checks"]] == [("EC-TURN-001", NAME, "pass")], doc["checks"]


def test_the_end_to_end_check_fails_a_broken_echo_endpoint(echo: types.ModuleType, tmp_path: Any,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    doc = _run_echo_check(tmp_path, monkeypatch, 500)
    [check] = doc["checks"]
    assert (check["id"], check["outcome"], check["level"]) == ("EC-TURN-001", "fail", "MUST"), check
    assert "HTTP 500" in json.dumps(check)
