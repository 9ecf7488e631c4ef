"""What the scripted model says next, decided from the whole conversation.

A conversation with a user message that starts a built-in scenario (the first such message) gets
that scenario's turn k, where k counts the assistant turns after it; turns are decided by the whole history, never by
"the last message is a user message" (OpenClaw appends user context after tool results, and
Claude Code can end `messages` with a system entry). Anything else gets a default answer: short
reasoning and "ok", or a tool call when the user names a tool. The user's words steer the call:
arguments spelled ``key=`value``` are used as given, and several tools named as "the NAME tool" in one
message ("use the Read tool ..., then use the Edit tool ...") are called one per turn, in the order
named, each with the arguments spelled after its name (the client measurements' turns,
agents/clients/kinds.py).

`tool_choice` holds for every turn: `none` drops the calls; a forced choice (required / any, or a
named tool) makes the turn its calls alone, a call of the named tool or of the first tool when the
turn has none, with no text or reasoning before it (Anthropic's tool-use docs: with `any` or `tool`
the assistant message is prefilled, so no natural language comes before the tool_use blocks). A
strict tool's arguments follow its schema (the scripted arguments always do).
"""

from __future__ import annotations

import json
import re
from typing import Any

from harnesscheck.reference_server.conversation import Conversation, ToolChoice, ToolSpec, is_harness_context
from harnesscheck.reference_server.events import Part, ToolCall
from harnesscheck.reference_server.faults import Faults
from harnesscheck.scenarios.loader import ModelPart, Scenario, find_by_user_text


def _scenario_start(conv: Conversation) -> tuple[int, Scenario | None]:
    """The first user message that starts a scenario, and the scenario.

    Not just the first user message: harnesses put context first (Claude Code's system reminders,
    Codex's environment context as its own user item), so the trigger can come later.
    """
    for i, message in enumerate(conv.messages):
        if message.role == "user" and message.text.strip():
            scenario = find_by_user_text(message.text)
            if scenario is not None:
                return i, scenario
    return -1, None


def _to_parts(model: tuple[ModelPart, ...]) -> list[Part]:
    parts = []
    for n, p in enumerate(model):
        if p.kind == "tool_call":
            parts.append(Part(kind="tool_call", call=ToolCall(index=n, id="", name=p.name, arguments=p.arguments)))
        else:
            parts.append(Part(kind=p.kind, text=p.text))
    return parts


def next_turn(conv: Conversation, *, thinking: bool, faults: Faults = Faults()) -> list[Part]:
    choice = ToolChoice() if faults.on("ignore-tool-choice") else conv.tool_choice
    start, scenario = _scenario_start(conv)
    if scenario is not None:
        k = sum(1 for m in conv.messages[start:] if m.role == "assistant")
        if k < len(scenario.turns):
            parts = _to_parts(scenario.turns[k].model)
        else:
            parts = [Part(kind="text", text="The task is complete.")]
    else:
        parts = _default_turn(conv)
    if not thinking:
        parts = [p for p in parts if p.kind != "reasoning"]
    if choice.mode == "none":
        parts = [p for p in parts if p.kind != "tool_call"] or [Part(kind="text", text="ok")]
    elif choice.mode in ("required", "named"):
        parts = _forced(conv, choice, parts)
    if not conv.parallel_tool_calls and not faults.on("parallel-calls-not-disabled"):  # the first call only
        calls = [p for p in parts if p.kind == "tool_call"]
        parts = [p for p in parts if p.kind != "tool_call" or p is calls[0]]
    if faults.on("strict-ignored"):
        parts = [_off_schema(p) if _strict(conv, p) else p for p in parts]
    return parts


def _strict(conv: Conversation, part: Part) -> bool:
    return part.call is not None and any(t.strict and t.name == part.call.name for t in conv.tools)


def _off_schema(part: Part) -> Part:
    """A strict tool's call as an unconstrained model may write it (fault strict-ignored): its last
    argument dropped, one the schema does not define added."""
    assert part.call is not None
    args = json.loads(part.call.arguments or "{}")
    args = dict(list(args.items())[:-1]) | {"comment": "not in the schema"}
    call = ToolCall(index=part.call.index, id=part.call.id, name=part.call.name, arguments=json.dumps(args))
    return Part(kind="tool_call", call=call)


def _forced(conv: Conversation, choice: ToolChoice, parts: list[Part]) -> list[Part]:
    """A forced turn: the turn's calls that the choice allows, alone; else one call of the named tool
    (of the first tool for `required`). A choice naming no tool of the request forces nothing."""
    tools = {t.name: t for t in conv.tools}
    tool = tools.get(choice.name or "") if choice.mode == "named" else (conv.tools[0] if conv.tools else None)
    if tool is None:
        return parts
    calls = [p for p in parts if p.kind == "tool_call" and p.call is not None
             and (choice.mode == "required" or p.call.name == tool.name)]
    return calls or [_call(tool, conv)]


def _call(tool: ToolSpec, conv: Conversation, text: str | None = None) -> Part:
    """A call of `tool` with example arguments for its schema (a command quoted in `text`, by default
    the turn's user text)."""
    text = conv.turn_user_text() if text is None else text
    arguments = json.dumps(example_arguments(tool.parameters, text), ensure_ascii=False)
    return Part(kind="tool_call", call=ToolCall(index=0, id="", name=tool.name, arguments=arguments))


def _answered(conv: Conversation) -> bool:
    """True when the newest assistant turn's tool calls have results after it."""
    for message in reversed(conv.messages):
        if message.role == "tool":
            return True
        if message.role == "assistant":
            return False
    return False


_REPEAT = re.compile(r"\b(\d{1,3}) times\b")


def _repeat_ask(conv: Conversation) -> str | None:
    """The user's text when it asked for a tool to run N times ("run `seq 1 4000` 30 times"; the long
    sessions of the client measurements, agents/clients/overflow.py) and fewer than N results came
    back since; else None."""
    for i in range(len(conv.messages) - 1, -1, -1):
        message = conv.messages[i]
        if message.role == "user" and message.text.strip() and not is_harness_context(message.text):
            match = _REPEAT.search(message.text)
            done = sum(len(m.results) for m in conv.messages[i + 1:] if m.role == "tool")
            return message.text if match is not None and done < int(match.group(1)) else None
    return None


def _steps(text: str, tools: list[ToolSpec]) -> list[tuple[ToolSpec, str]]:
    """The tools a message names as "the NAME tool", in the order named, each with the words from its
    name to the next one's (where its arguments are spelled)."""
    by_name = {t.name: t for t in tools}
    found = []
    for match in re.finditer(r"\bthe (\S+) tool\b", text):
        tool = by_name.get(match.group(1))
        if tool is not None:
            found.append((match.start(), tool))
    return [(tool, text[start:(found[n + 1][0] if n + 1 < len(found) else len(text))])
            for n, (start, tool) in enumerate(found)]


def _user_ask(conv: Conversation) -> tuple[int, str] | None:
    """The newest message of the user's own words (not harness context): its index and text."""
    for i in range(len(conv.messages) - 1, -1, -1):
        message = conv.messages[i]
        if message.role == "user" and message.text.strip() and not is_harness_context(message.text):
            return i, message.text
    return None


def _step_call(conv: Conversation) -> tuple[bool, tuple[ToolSpec, str] | None]:
    """Whether the user's message names several tools, and the next one to call (one per result that
    came back since; None once all ran)."""
    ask = _user_ask(conv)
    if ask is None:
        return False, None
    start, text = ask
    steps = _steps(text, conv.tools)
    if len(steps) < 2:
        return False, None
    done = sum(len(m.results) for m in conv.messages[start + 1:] if m.role == "tool")
    return True, (steps[done] if done < len(steps) else None)


def _named_tool(conv: Conversation) -> tuple[ToolSpec, str] | None:
    """The tool the user's words name in this turn ("use the Bash tool", "call weather"), if any, with
    those words; once it ran, again while the user asked for more runs ("... 30 times"), or the next
    of several tools the message names."""
    if not conv.tools:
        return None
    several, step = _step_call(conv)
    if several:
        return step
    text = _repeat_ask(conv) if _answered(conv) else conv.turn_user_text()
    if text is None:
        return None
    for tool in conv.tools:
        if re.search(rf"\b{re.escape(tool.name)}\b", text):
            return tool, text
    return None


def _default_turn(conv: Conversation) -> list[Part]:
    named = _named_tool(conv)
    if named is not None:
        tool, text = named
        return [Part(kind="reasoning", text=f"The user wants me to use {tool.name}."), _call(tool, conv, text)]
    if _answered(conv):
        return [Part(kind="reasoning", text="The tool finished; I can answer."), Part(kind="text", text="Done.")]
    return [Part(kind="reasoning", text="A short answer is enough here."), Part(kind="text", text="ok")]


def example_arguments(schema: dict[str, Any], user_text: str = "") -> dict[str, Any]:
    """A small valid object for a tool's JSON schema (required properties only), string properties the
    user spelled as ``key=`value``` set to that value."""
    props = schema.get("properties") or {}
    required = schema.get("required") or list(props)[:1]
    quoted = re.search(r"`([^`]+)`", user_text)
    out: dict[str, Any] = {}
    for key, prop in props.items():
        given = re.search(rf"\b{re.escape(key)}=`([^`]*)`", user_text)
        if given is not None and isinstance(prop, dict) and prop.get("type", "string") == "string":
            out[key] = given.group(1)
    for key in (k for k in required if k not in out):
        prop = props.get(key) or {}
        kind = prop.get("type", "string")
        if "enum" in prop and prop["enum"]:
            out[key] = prop["enum"][0]
        elif kind == "string":
            if key in ("command", "cmd"):
                out[key] = quoted.group(1) if quoted else "echo ok"
            elif "path" in key or key == "file":
                out[key] = "README.md"
            else:
                out[key] = quoted.group(1) if quoted else "example"
        elif kind in ("integer", "number"):
            out[key] = 1
        elif kind == "boolean":
            out[key] = False
        elif kind == "array":
            out[key] = []
        elif kind == "object":
            out[key] = example_arguments(prop, user_text)
        else:
            out[key] = None
    return out
