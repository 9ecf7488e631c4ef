"""Built-in traces: an agent coding session shaped like a harness's.

``agent_coding(sessions=4, turns=5, prompt_tokens=8000, api="anthropic", ...) -> Trace``

Each session: a long, stable system prompt (harness-style rules, padded to about
``prompt_tokens`` for the first request together with the tools), 20 tools with realistic JSON
schemas, and a growing history: the built-in ``agent_session`` scenario (a failing build: bash
calls with a 6 kB log, an edit, a text answer, a follow-up user turn) so the reference server's
scripted model plays along, then, past the scenario's five turns, plain follow-up user turns. The
recorded answers are the scenario's (text and tool calls; no thinking blocks, whose signatures
only the server that made them can vouch for), so fixed and live replays agree on the reference
server. Sessions differ only after the system prompt and tools (a session tag in the first user
message), like many users of one harness.
"""

from __future__ import annotations

import json
from typing import Any

from harnesscheck.conformance.requests import MIN_OUTPUT_TOKENS
from harnesscheck.scenarios.loader import get as get_scenario

from .trace import ANSWER, DEFAULT_PATHS, Timing, Trace, TraceTurn

__all__ = ["HARNESS_TOOLS", "agent_coding", "WORKLOADS", "build"]


def _tool(name: str, description: str, props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"name": name, "description": description,
            "parameters": {"type": "object", "properties": props, "required": required, "additionalProperties": False}}


_S = {"type": "string"}
_I = {"type": "integer"}
_B = {"type": "boolean"}

HARNESS_TOOLS: list[dict[str, Any]] = [
    _tool("bash", "Run a shell command in the repository and return its output (stdout and stderr, truncated).",
          {"command": {**_S, "description": "The command to run"}, "timeout": {**_I, "description": "Seconds, max 600"},
           "run_in_background": _B}, ["command"]),
    _tool("edit", "Replace exact text in a file. The old text must occur exactly once.",
          {"path": {**_S, "description": "Absolute or repo-relative path"}, "old": _S, "new": _S,
           "replace_all": _B}, ["path", "old", "new"]),
    _tool("read_file", "Read a file, optionally a range of lines.",
          {"path": _S, "offset": {**_I, "minimum": 0}, "limit": {**_I, "minimum": 1}}, ["path"]),
    _tool("write_file", "Create or overwrite a file with the given content.", {"path": _S, "content": _S},
          ["path", "content"]),
    _tool("glob", "Find files by glob pattern, newest first.", {"pattern": _S, "path": _S}, ["pattern"]),
    _tool("grep", "Search file contents with a regular expression (ripgrep syntax).",
          {"pattern": _S, "path": _S, "glob": _S, "case_insensitive": _B,
           "output_mode": {"type": "string", "enum": ["content", "files_with_matches", "count"]},
           "context": {**_I, "minimum": 0}}, ["pattern"]),
    _tool("ls", "List a directory.", {"path": _S, "ignore": {"type": "array", "items": _S}}, ["path"]),
    _tool("apply_patch", "Apply a unified diff to the working tree.", {"patch": _S}, ["patch"]),
    _tool("run_tests", "Run the test suite or a subset and report failures.",
          {"selector": _S, "fail_fast": _B, "timeout": _I}, []),
    _tool("git_status", "Show the working tree status.", {"porcelain": _B}, []),
    _tool("git_diff", "Show changes, staged or not.", {"staged": _B, "path": _S}, []),
    _tool("git_commit", "Commit staged changes.", {"message": _S, "all": _B}, ["message"]),
    _tool("web_fetch", "Fetch a URL and return it as markdown.", {"url": {**_S, "format": "uri"}, "prompt": _S},
          ["url"]),
    _tool("web_search", "Search the web.", {"query": _S, "allowed_domains": {"type": "array", "items": _S}},
          ["query"]),
    _tool("todo_write", "Replace the session's task list.",
          {"todos": {"type": "array", "items": {"type": "object", "properties": {
              "content": _S, "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]}},
              "required": ["content", "status"]}}}, ["todos"]),
    _tool("notebook_edit", "Edit a Jupyter notebook cell.",
          {"path": _S, "cell": _I, "source": _S, "mode": {"type": "string", "enum": ["replace", "insert", "delete"]}},
          ["path", "cell"]),
    _tool("task", "Start a sub-agent on a self-contained task and return its report.",
          {"description": _S, "prompt": _S, "agent": _S}, ["description", "prompt"]),
    _tool("view_image", "Attach an image file from the workspace to the conversation.", {"path": _S}, ["path"]),
    _tool("ask_user", "Ask the user a question and wait for the answer.",
          {"question": _S, "options": {"type": "array", "items": _S}}, ["question"]),
    _tool("kill_shell", "Stop a background shell started with bash run_in_background.", {"shell_id": _S},
          ["shell_id"]),
]

_RULES = [
    "You are an interactive coding agent. You help users with software engineering tasks in their repository.",
    "Read before you write: inspect the relevant files and the build output before changing anything.",
    "Keep changes minimal and focused; match the project's style, naming and structure.",
    "Never commit secrets. Never run destructive commands (rm -rf, force pushes) without asking.",
    "Prefer the dedicated tools (read_file, grep, glob, edit) over shell equivalents.",
    "When you run commands, explain briefly why; report failures with the relevant lines of output.",
    "Use todo_write to plan multi-step work and keep exactly one task in progress.",
    "After editing, run the narrowest test that proves the change, then the wider suite.",
    "Answer concisely. Use markdown for code. Refer to code as path:line.",
    "If the request is ambiguous, ask one precise question with ask_user instead of guessing.",
]


def _system_prompt(scenario_system: str, target_chars: int) -> str:
    parts = [scenario_system, "", "# Rules"]
    n = 0
    while sum(len(p) + 1 for p in parts) < target_chars:
        rule = _RULES[n % len(_RULES)]
        parts.append(f"{n + 1}. {rule}" if n < len(_RULES) else
                     f"{n + 1}. (section {n // len(_RULES)}) {rule}")
        n += 1
    return "\n".join(parts)


def _api_tools(api: str, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    if api == "anthropic":
        return [{"name": t["name"], "description": t["description"], "input_schema": t["parameters"]} for t in tools]
    if api == "chat":
        return [{"type": "function", "function": t} for t in tools]
    return [{"type": "function", **t} for t in tools]


def _user(api: str, text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def _answer(api: str, parts: list[Any], ids: list[str]) -> list[dict[str, Any]]:
    texts = [p.text for p in parts if p.kind == "text"]
    calls = [p for p in parts if p.kind == "tool_call"]
    if api == "anthropic":
        content: list[dict[str, Any]] = [{"type": "text", "text": t} for t in texts]
        content += [{"type": "tool_use", "id": i, "name": c.name, "input": json.loads(c.arguments)}
                    for c, i in zip(calls, ids, strict=True)]
        return [{"role": "assistant", "content": content}]
    if api == "chat":
        msg: dict[str, Any] = {"role": "assistant", "content": "\n".join(texts) or None}
        if calls:
            msg["tool_calls"] = [{"id": i, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                                 for c, i in zip(calls, ids, strict=True)]
        return [msg]
    items: list[dict[str, Any]] = [{"type": "message", "role": "assistant",
                                    "content": [{"type": "output_text", "text": t}]} for t in texts]
    items += [{"type": "function_call", "call_id": i, "name": c.name, "arguments": c.arguments}
              for c, i in zip(calls, ids, strict=True)]
    return items


def _results(api: str, scenario: Any, calls: list[Any], ids: list[str]) -> list[dict[str, Any]]:
    if api == "anthropic":
        return [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": i,
                                              "content": scenario.result_for(c.name, c.arguments)}
                                             for c, i in zip(calls, ids, strict=True)]}]
    if api == "chat":
        return [{"role": "tool", "tool_call_id": i, "content": scenario.result_for(c.name, c.arguments)}
                for c, i in zip(calls, ids, strict=True)]
    return [{"type": "function_call_output", "call_id": i, "output": scenario.result_for(c.name, c.arguments)}
            for c, i in zip(calls, ids, strict=True)]


def agent_coding(*, sessions: int = 4, turns: int = 5, prompt_tokens: int = 8000, api: str = "anthropic",
                 model: str = "", think_ms: float = 2000.0, tool_ms: float = 300.0, max_tokens: int = 4096) -> Trace:
    """An agent coding session per ``sessions``, ``turns`` requests each, first prompt ~``prompt_tokens``."""
    if api not in DEFAULT_PATHS:
        raise ValueError(f"api must be one of {sorted(DEFAULT_PATHS)}")
    if sessions < 1 or turns < 1:
        raise ValueError("sessions and turns must be >= 1")
    if max_tokens < MIN_OUTPUT_TOKENS[api]:  # the request would be invalid (Responses: at least 16)
        raise ValueError(f"max_tokens must be >= {MIN_OUTPUT_TOKENS[api]} for the {api} API")
    scenario = get_scenario("agent_session")
    tools = _api_tools(api, HARNESS_TOOLS)
    tools_chars = len(json.dumps(tools))
    system = _system_prompt(scenario.system, max(0, prompt_tokens * 4 - tools_chars))
    out: list[TraceTurn] = []
    for s in range(sessions):
        sid = f"agent-{s}"
        prev_calls: list[Any] = []
        prev_ids: list[str] = []
        for k in range(turns):
            sc_turn = scenario.turns[k] if k < len(scenario.turns) else None
            if k == 0:
                new: list[dict[str, Any]] = [_user(api, f"{scenario.trigger} (session {s})")]
                timing = Timing(think_ms=0)
            elif prev_calls:
                new = _results(api, scenario, prev_calls, prev_ids)
                timing = Timing(tool_ms=tool_ms)
            else:
                text = sc_turn.user if sc_turn is not None and sc_turn.user else \
                    f"Summarise the state of the repository in one line (check {k})."
                new = [_user(api, text)]
                timing = Timing(think_ms=think_ms)
            parts = list(sc_turn.model) if sc_turn is not None else []
            parts = [p for p in parts if p.kind != "reasoning"]
            if not parts:
                from harnesscheck.scenarios.loader import ModelPart

                parts = [ModelPart("text", text="The task is complete.")]
            calls = [p for p in parts if p.kind == "tool_call"]
            prefix = {"anthropic": "toolu_wl", "chat": "call_wl", "responses": "call_wl"}[api]
            ids = [f"{prefix}_{s}_{k}_{i}" for i in range(len(calls))]
            turn = TraceTurn(session=sid, turn=k, api=api, timing=timing,
                             expect={"tool_calls": [c.name for c in calls]})
            if k == 0:
                if api == "anthropic":
                    turn.request = {"model": model, "max_tokens": max_tokens,
                                    "system": [{"type": "text", "text": system}], "tools": tools,
                                    "messages": new, "stream": True}
                elif api == "chat":
                    turn.request = {"model": model, "messages": [{"role": "system", "content": system}, *new],
                                    "tools": tools, "max_tokens": max_tokens, "stream": True,
                                    "stream_options": {"include_usage": True}}
                else:
                    turn.request = {"model": model, "instructions": system, "input": new, "tools": tools,
                                    "max_output_tokens": max_tokens, "stream": True}
            else:
                turn.delta = {"base": "previous", "append": [dict(ANSWER), *new]}
            turn.response = _answer(api, parts, ids)
            out.append(turn)
            prev_calls, prev_ids = calls, ids
    return Trace.build(out, source="workload:agent-coding",
                       meta={"sessions": sessions, "turns": turns, "prompt_tokens": prompt_tokens, "api": api})


WORKLOADS = {"agent-coding": agent_coding}


def build(name: str, **kwargs: Any) -> Trace:
    if name not in WORKLOADS:
        raise KeyError(f"unknown workload {name!r}; known: {', '.join(sorted(WORKLOADS))}")
    return WORKLOADS[name](**kwargs)
