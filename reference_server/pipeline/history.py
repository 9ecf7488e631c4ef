"""History rebuild: turn the internal conversation into the chat template's messages.

Rules (article 1), following what the template was detected to do (`pipeline/template.py`):
- an assistant turn keeps its parts in model order; reasoning bound to tool calls is kept;
- a template that reads reasoning gets it, unchanged, and decides how much to keep: the built-in
  templates as typed `segments` (model order), a checkpoint's as `reasoning_content`;
- only for a content-only template does the server decide: `<think>` inline in content, and the
  family's policy for plain-turn reasoning (DeepSeek-R1 drops it);
- tool calls go to a template that renders `tool_calls` as such (arguments as an object), else
  into content as the tool parser writes them;
- the thinking switch (fix 3, decided in the turn's plan, `pipeline/plan.py`): when it is on,
  enable_thinking=true and truncate_history_thinking=false (and thinking=true); passed to the
  templates that honour them (detected), the others never see them.
The test of correctness: turn N's prompt + turn N's output is a token prefix of turn N+1's prompt.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from harnesscheck.reference_server.conversation import Conversation, InvalidConversation, Message
from harnesscheck.reference_server.events import Part
from harnesscheck.reference_server.faults import Faults
from harnesscheck.reference_server.parsers.stream import render_part
from harnesscheck.reference_server.pipeline.families import ModelProfile
from harnesscheck.reference_server.pipeline.plan import TurnPlan


@dataclass(frozen=True, slots=True)
class TemplateInput:
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    kwargs: dict[str, Any]  # enable_thinking, truncate_history_thinking


def render(part: Part, plan: TurnPlan) -> str:
    """One part in the model's raw form, with the plan's parsers (`parsers.stream.render_part`); a
    tool call whose arguments the tool parser's format cannot write is the client's error."""
    try:
        return render_part(part, plan.reasoning, plan.tools)
    except ValueError as error:
        name = part.call.name if part.call else None
        raise InvalidConversation(f"tool call {name!r}: arguments must be a JSON object ({error})") from error


def rebuild_parts(message: Message, profile: ModelProfile, faults: Faults) -> list[Part]:
    """The parts of one past assistant turn as they go back into the prompt."""
    parts = list(message.parts)
    reads_reasoning = profile.chat_template.traits.reads_reasoning
    agent_turn = any(p.kind == "tool_call" for p in parts)
    if faults.on("flatten-interleaved-reasoning"):
        joined = " ".join(p.text for p in parts if p.kind == "reasoning")
        rest = [p for p in parts if p.kind != "reasoning"]
        parts = ([Part(kind="reasoning", text=joined)] if joined else []) + rest
    if faults.on("rewrite-history-reasoning"):  # re-serialised: whitespace normalised, a leading space
        parts = [Part(kind="reasoning", text=" " + re.sub(r"\s+", " ", p.text).strip()) if p.kind == "reasoning"
                 else p for p in parts]
    if faults.on("truncate-agent-reasoning") and not reads_reasoning:
        # Templates that read only content get the same bug as the over-eager plain-turn policy.
        parts = [p for p in parts if p.kind != "reasoning"]
    if profile.family.drops_plain_turn_reasoning and not agent_turn and not reads_reasoning:
        parts = [p for p in parts if p.kind != "reasoning"]
    return parts


def _tool_call_dict(part: Part) -> dict[str, Any]:
    assert part.call is not None
    try:
        arguments = json.loads(part.call.arguments or "{}")
    except ValueError as error:
        raise InvalidConversation(f"tool call {part.call.name!r}: arguments must be a JSON object ({error})") \
            from error
    if not isinstance(arguments, dict):
        raise InvalidConversation(f"tool call {part.call.name!r}: arguments must be a JSON object")
    return {"type": "function", "id": part.call.id, "function": {"name": part.call.name, "arguments": arguments}}


def assistant_message(parts: list[Part], plan: TurnPlan) -> dict[str, Any]:
    """One past assistant turn in the shape its template reads (see the module docstring)."""
    traits = plan.profile.chat_template.traits
    if traits.reads_segments:
        return {"role": "assistant",
                "segments": [{"type": p.kind, "raw": render(p, plan)} for p in parts]}
    native_calls = traits.renders_tool_calls
    message: dict[str, Any] = {"role": "assistant"}
    if not traits.reads_reasoning_content and not native_calls:  # all of it as the model wrote it
        message["content"] = "".join(render(p, plan) for p in parts)
        return message
    thoughts = [p.text for p in parts if p.kind == "reasoning"]
    if traits.reads_reasoning_content and thoughts:
        message["reasoning_content"] = "\n\n".join(thoughts)
    pieces = []
    for p in parts:
        if (p.kind == "reasoning" and traits.reads_reasoning_content) or (p.kind == "tool_call" and native_calls):
            continue
        pieces.append(p.text if p.kind == "text" else render(p, plan))
    message["content"] = "".join(pieces)
    if native_calls and any(p.kind == "tool_call" for p in parts):
        message["tool_calls"] = [_tool_call_dict(p) for p in parts if p.kind == "tool_call"]
    return message


def build_template_input(conv: Conversation, plan: TurnPlan, faults: Faults, *,
                         system: list[str]) -> TemplateInput:
    profile, thinking = plan.profile, plan.thinking
    messages: list[dict[str, Any]] = []
    if system:
        messages.append({"role": "system", "content": "\n".join(system)})
    # the last user query (tool results are no query): Qwen3's template trims reasoning before it
    last_query = max((i for i, m in enumerate(conv.messages) if m.role == "user" and m.text), default=-1)
    for at, message in enumerate(conv.messages):
        if message.role == "assistant":
            parts = rebuild_parts(message, profile, faults)
            if faults.on("trim-reasoning-before-last-query") and at < last_query:
                parts = [p for p in parts if p.kind != "reasoning"]
            messages.append(assistant_message(parts, plan))
        elif message.role == "tool":
            for result in message.results:
                messages.append({"role": "tool", "content": result.content, "tool_call_id": result.call_id})
        else:
            messages.append({"role": message.role, "content": message.text})
    truncate = not thinking or faults.on("truncate-agent-reasoning")
    switch = {"enable_thinking": thinking, "truncate_history_thinking": truncate, "thinking": thinking}
    kwargs = {k: v for k, v in switch.items() if k in profile.chat_template.traits.honoured_kwargs}
    tool_dicts = [{"type": "function", "function": {"name": t.name, "description": t.description,
                                                     "parameters": t.parameters}} for t in conv.tools]
    return TemplateInput(messages=messages, tools=tool_dicts, kwargs=kwargs)

