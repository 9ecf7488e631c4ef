"""The tool_choice / strict / cut-call checks' requests and the reference server's side of them.

The kit's requests for every tool_choice mode, strict tools and parallel tool use off validate as the
official SDKs' create-params types (so a real API accepts them), and the reference server takes them as
the references do: every mode accepted, a strict tool with a schema strict mode cannot take refused in
OpenAI's words (Chat, Responses), a strict-compatible one accepted. That each fault fails exactly its
checks, and the clean server passes them, is the fault matrix's proof (test_self_conformance.py)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from harnesscheck.protocol import apis
from harnesscheck.conformance.test_tool_choice import CLOCK, REPORT, WEATHER
from harnesscheck.scenarios.loader import load_all
from tests.conformance.test_apis import sdk_accepts, with_sdk_required

MODEL = "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4"  # the reference server's default model
MODES = [("auto", ""), ("none", ""), ("required", ""), ("named", "get_time")]
LOOSE = {"name": "lookup", "description": "Look something up.",
         "parameters": {"type": "object", "properties": {"q": {"type": "string"}, "n": {"type": "integer"}},
                        "required": ["q"]}}


def _body(api: str, tools: list[dict[str, Any]], *, strict: bool | None = None, stream: bool = True) -> dict[str, Any]:
    module = apis.get(api)
    body = module.first(load_all()["plain_text"], "m", stream=stream)
    body["tools"] = [module.tool(t, strict=strict) for t in tools]
    return body


@pytest.mark.parametrize("api", apis.NAMES)
def test_the_checks_requests_are_sdk_requests(api: str) -> None:
    module = apis.get(api)
    for mode, name in MODES:
        for stream in (True, False):
            sdk_accepts(api, with_sdk_required({**_body(api, [WEATHER, CLOCK], stream=stream),
                                                "tool_choice": module.tool_choice(mode, name)}))
    sdk_accepts(api, _body(api, [WEATHER, REPORT], strict=True))
    sdk_accepts(api, with_sdk_required(module.without_parallel(_body(api, [WEATHER]))))


def test_the_tool_choice_of_each_api_is_its_own() -> None:
    """Expected values written out from the references (not from the builders)."""
    assert apis.anthropic.tool_choice("required") == {"type": "any"}
    assert apis.anthropic.tool_choice("named", "x") == {"type": "tool", "name": "x"}
    assert apis.chat.tool_choice("named", "x") == {"type": "function", "function": {"name": "x"}}
    assert apis.responses.tool_choice("named", "x") == {"type": "function", "name": "x"}
    assert apis.responses.tool_choice("none") == apis.chat.tool_choice("none") == "none"
    assert apis.anthropic.without_parallel({"tool_choice": {"type": "any"}})["tool_choice"] == {
        "type": "any", "disable_parallel_tool_use": True}
    assert all(t["strict"] is False for t in apis.responses.tools(load_all()["calculator"]))  # as Codex sends


def _post(url: str, api: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(url + apis.get(api).PATH, json={**body, "model": MODEL}, headers=apis.get(api).headers(),
                      timeout=60)


@pytest.mark.parametrize("api", apis.NAMES)
def test_the_server_takes_every_mode_and_strict_as_the_references_do(reference_server: str, api: str) -> None:
    module = apis.get(api)
    for mode, name in MODES:
        body = {**_body(api, [WEATHER, CLOCK], stream=False), "tool_choice": module.tool_choice(mode, name)}
        answer = _post(reference_server, api, body)
        assert answer.status_code == 200, answer.text
        names = [c.name for c in module.tool_calls(answer.json())]
        assert names == {"auto": [], "none": [], "required": ["get_weather"], "named": ["get_time"]}[mode], mode
    assert _post(reference_server, api, _body(api, [WEATHER], strict=True, stream=False)).status_code == 200
    refused = _post(reference_server, api, _body(api, [LOOSE], strict=True, stream=False))
    if api == "anthropic":  # Anthropic states no such rule: accepted
        assert refused.status_code == 200, refused.text
        return
    assert refused.status_code == 400, refused.text
    error = refused.json()["error"]
    assert error["code"] == "invalid_function_parameters" and error["type"] == "invalid_request_error"
    assert error["message"] == ("Invalid schema for function 'lookup': In context=(), 'additionalProperties' is "
                                "required to be supplied and to be false.")
    nested = {**LOOSE, "parameters": {**LOOSE["parameters"], "additionalProperties": False}}
    refused = _post(reference_server, api, _body(api, [nested], strict=True, stream=False))
    assert refused.status_code == 400 and "Missing 'n'" in refused.json()["error"]["message"]
    assert _post(reference_server, api, _body(api, [nested], strict=False, stream=False)).status_code == 200


@pytest.mark.parametrize(("api", "choice", "status", "called"), [
    ("chat", {"type": "allowed_tools", "allowed_tools": {"mode": "required", "tools": [
        {"type": "function", "function": {"name": "get_weather"}}]}}, 200, ["get_weather"]),
    ("responses", {"type": "allowed_tools", "mode": "auto", "tools": [{"type": "function", "name": "get_time"}]},
     200, []),
    ("responses", {"type": "web_search_preview"}, 200, []),  # a built-in tool's choice (ToolChoiceTypesParam)
    ("chat", {"type": "web_search_preview"}, 400, []),  # not a Chat tool_choice
    ("chat", {"type": "custom", "custom": {"name": "get_time"}}, 200, ["get_time"]),
])
def test_the_other_tool_choice_forms(reference_server: str, api: str, choice: dict[str, Any], status: int,
                                     called: list[str]) -> None:
    """The forms of tool_choice the checks do not send, as openai-python 3.57 types them."""
    answer = _post(reference_server, api, {**_body(api, [WEATHER, CLOCK], stream=False), "tool_choice": choice})
    assert answer.status_code == status, answer.text
    if status == 200:
        assert [c.name for c in apis.get(api).tool_calls(answer.json())] == called


# -- <P>-TOOLS-005:markup: a call the server began, as text ------------------------------------------

@pytest.mark.parametrize("text", [
    'Sure. <tool_call>\n{"name": "file_rep', "<tool_call>\n", '<tool_call>\n[{"name"',  # hermes/Qwen: cut in or after it
    "<tool_call>\n<function=file_report>\n<parameter=title>\nexamp",  # qwen3-coder (fault forced-cut-raw-markup)
    "<|tool_call|>[{", "<|tool_calls_section_begin|><|tool_call_begin|>functions.file_",  # Granite, Kimi
    '<|python_tag|>{"na', "[TOOL_CALLS][{", "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function",
    '{"title": "Weekly st',  # the arguments, as guided decoding of a named call writes them
])
def test_markup_is_an_opened_call(text: str) -> None:
    from harnesscheck.conformance.test_tool_choice import MARKUP

    assert MARKUP.search(text), text


@pytest.mark.parametrize("text", [
    "</tool_call>\n</tools></tools>\n</tool>\n\n",  # llama-server (Gemma 3 270M, tool_choice object ignored)
    "</tool_call>", "ok<|tool_call_end|><|tool_calls_section_end|>", "ok<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
    "The <tool_call> tag opens a call in the hermes format.",
])
def test_stray_or_closing_tags_are_no_call(text: str) -> None:
    """A model that writes closing tags as prose opened no call the server could have cut: CH-TOOLS-005:markup
    blamed llama-server for '</tool_call>' a base model wrote as text (its hand verification)."""
    from harnesscheck.conformance.test_tool_choice import MARKUP

    assert MARKUP.search(text) is None, MARKUP.search(text)
