"""The scripted model steered by the user's words (reference_server/director.py), as the client
measurements' turns use it (agents/clients/kinds.py): arguments spelled ``key=`value``` are used as
given, several tools named as "the NAME tool" are called one per turn in the order named, and a
Responses custom tool (Codex's freeform apply_patch) gets the spelled ``input`` as its call's text.

Over real HTTP against the reference server; expected calls written out from the prompts."""

from __future__ import annotations

from typing import Any

import httpx

MODEL = "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4"
AN_HEADERS = {"anthropic-version": "2023-06-01"}


def _tool(name: str, *props: str) -> dict[str, Any]:
    return {"name": name, "description": name, "input_schema": {
        "type": "object", "properties": {p: {"type": "string"} for p in props}, "required": list(props)}}


TOOLS = [_tool("Bash", "command"), _tool("Read", "file_path"), _tool("Edit", "file_path", "old_string", "new_string")]


def _calls_until_done(url: str, prompt: str, limit: int = 5) -> tuple[list[tuple[str, dict[str, Any]]], str]:
    """Post the prompt, answer every call with a result, until the model answers with text."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
    calls = []
    for _ in range(limit):
        answer = httpx.post(url + "/v1/messages", headers=AN_HEADERS, timeout=60, json={
            "model": MODEL, "max_tokens": 256, "tools": TOOLS, "messages": messages}).json()
        uses = [b for b in answer["content"] if b["type"] == "tool_use"]
        if not uses:
            return calls, "".join(b.get("text", "") for b in answer["content"] if b["type"] == "text")
        calls += [(u["name"], u["input"]) for u in uses]
        messages += [{"role": "assistant", "content": answer["content"]},
                     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": u["id"], "content": "done"}
                                                  for u in uses]}]
    raise AssertionError(f"no text answer after {limit} turns: {calls}")


def test_spelled_arguments_are_used_as_given(reference_server: str) -> None:
    calls, text = _calls_until_done(reference_server, "Use the Read tool with file_path=`/w/notes.txt` and say "
                                                      "what it holds.")
    assert calls == [("Read", {"file_path": "/w/notes.txt"})] and text


def test_tools_named_in_order_run_one_per_turn(reference_server: str) -> None:
    prompt = ("Use the Read tool with file_path=`/w/a.txt`, then use the Edit tool with file_path=`/w/a.txt` "
              "old_string=`alpha` new_string=`beta`.")
    calls, text = _calls_until_done(reference_server, prompt)
    assert calls == [("Read", {"file_path": "/w/a.txt"}),
                     ("Edit", {"file_path": "/w/a.txt", "old_string": "alpha", "new_string": "beta"})]
    assert text == "Done."


def test_one_named_tool_keeps_its_old_reading(reference_server: str) -> None:
    """A prompt naming one tool: its quoted command, as before (the shell turns)."""
    calls, _ = _calls_until_done(reference_server, "Use the Bash tool to run `echo hi` and print its output.")
    assert calls == [("Bash", {"command": "echo hi"})]


def test_a_custom_tool_gets_the_spelled_input(reference_server: str) -> None:
    patch = "*** Begin Patch\n*** Add File: x.txt\n+hi\n*** End Patch\n"
    body = {"model": MODEL, "input": f"Use the apply_patch tool with input=`{patch}` and say what changed.",
            "tools": [{"type": "custom", "name": "apply_patch", "description": "edit files"}]}
    answer = httpx.post(reference_server + "/v1/responses", json=body, timeout=60).json()
    items = [i for i in answer["output"] if i["type"] in ("custom_tool_call", "function_call")]
    assert [(i["type"], i["name"], i["input"]) for i in items] == [("custom_tool_call", "apply_patch", patch)]
