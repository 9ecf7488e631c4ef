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

from harnesscheck.protocol import apis
from harnesscheck.scenarios.loader import get as get_scenario

from .forms import form
from .trace import ANSWER, Timing, Trace, TraceTurn

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


class _Tools:
    """The harness tools as the API modules' ``tools(scenario)`` reads them."""

    tools = HARNESS_TOOLS


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def agent_coding(*, sessions: int = 4, turns: int = 5, prompt_tokens: int = 8000, api: str = "anthropic",
                 model: str = "", think_ms: float = 2000.0, tool_ms: float = 300.0, max_tokens: int = 4096) -> Trace:
    """An agent coding session per ``sessions``, ``turns`` requests each, first prompt ~``prompt_tokens``."""
    if api not in apis.APIS:
        raise ValueError(f"api must be one of {sorted(apis.NAMES)}")
    if sessions < 1 or turns < 1:
        raise ValueError("sessions and turns must be >= 1")
    mod = apis.get(api)
    if max_tokens < mod.MIN_OUTPUT_TOKENS:  # the request would be invalid (Responses: at least 16)
        raise ValueError(f"max_tokens must be >= {mod.MIN_OUTPUT_TOKENS} for the {api} API")
    # the API module's own shapes: its agent request, an answer and tool results in history form
    first, answer, results = mod.agent_request, mod.history_answer, mod.history_results
    prefix = f"{form(api).call_id_prefix}_wl"
    scenario = get_scenario("agent_session")
    tools = mod.tools(_Tools)
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
                new: list[dict[str, Any]] = [_user(f"{scenario.trigger} (session {s})")]
                timing = Timing(think_ms=0)
            elif prev_calls:
                new = results([(i, scenario.result_for(c.name, c.arguments))
                               for c, i in zip(prev_calls, prev_ids, strict=True)])
                timing = Timing(tool_ms=tool_ms)
            else:
                text = sc_turn.user if sc_turn is not None and sc_turn.user else \
                    f"Summarise the state of the repository in one line (check {k})."
                new = [_user(text)]
                timing = Timing(think_ms=think_ms)
            parts = list(sc_turn.model) if sc_turn is not None else []
            parts = [p for p in parts if p.kind != "reasoning"]
            if not parts:
                from harnesscheck.scenarios.loader import ModelPart

                parts = [ModelPart("text", text="The task is complete.")]
            calls = [p for p in parts if p.kind == "tool_call"]
            ids = [f"{prefix}_{s}_{k}_{i}" for i in range(len(calls))]
            turn = TraceTurn(session=sid, turn=k, api=api, timing=timing,
                             expect={"tool_calls": [c.name for c in calls]})
            if k == 0:
                turn.request = first(model, system, tools, new, max_tokens)
            else:
                turn.delta = {"base": "previous", "append": [dict(ANSWER), *new]}
            texts = [p.text for p in parts if p.kind == "text"]
            turn.response = answer(texts, list(zip(ids, calls, strict=True)))
            out.append(turn)
            prev_calls, prev_ids = calls, ids
    return Trace.build(out, source="workload:agent-coding",
                       meta={"sessions": sessions, "turns": turns, "prompt_tokens": prompt_tokens, "api": api})


WORKLOADS = {"agent-coding": agent_coding}


def build(name: str, **kwargs: Any) -> Trace:
    if name not in WORKLOADS:
        raise KeyError(f"unknown workload {name!r}; known: {', '.join(sorted(WORKLOADS))}")
    return WORKLOADS[name](**kwargs)
