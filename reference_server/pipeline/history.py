"""History rebuild: turn the internal conversation into the chat template's messages.

Rules (article 1):
- an assistant turn keeps its parts in model order; reasoning bound to tool calls is kept;
- the family's policy decides plain-turn reasoning (DeepSeek-R1 drops it);
- a template that reads reasoning gets typed segments; otherwise `<think>` goes inline in content;
- enable_thinking / truncate_history_thinking: thinking on and history kept when a reasoning
  parser is configured and the client did not turn thinking off.
The test of correctness: turn N's prompt + turn N's output is a token prefix of turn N+1's prompt.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from reference_server.conversation import Conversation, InvalidConversation, Message
from reference_server.events import Part, ToolCall
from reference_server.faults import Faults
from reference_server.parsers import get_reasoning_parser, get_tool_parser
from reference_server.parsers.base import ReasoningParser, ToolParser
from reference_server.pipeline.families import ModelProfile


@dataclass(frozen=True, slots=True)
class TemplateInput:
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    kwargs: dict[str, Any]  # enable_thinking, truncate_history_thinking


def make_parsers(profile: ModelProfile, conv: Conversation, *, thinking: bool,
                 id_factory=lambda i: f"call_{i}") -> tuple[ReasoningParser | None, ToolParser | None]:
    reasoning = None
    if profile.reasoning_parser:
        cls = get_reasoning_parser(profile.reasoning_parser)
        reasoning = cls(start_in_reasoning=profile.family.start_in_reasoning and thinking)
    tools = None
    if profile.tool_parser:
        tools = get_tool_parser(profile.tool_parser)(tools=conv.tools, id_factory=id_factory)
    return reasoning, tools


def thinking_enabled(profile: ModelProfile, conv: Conversation, faults: Faults | None = None) -> bool:
    """Thinking is on when a reasoning parser is configured, unless the client turned it off."""
    if faults is not None and faults.on("thinking-off-by-default"):
        return bool(profile.reasoning_parser) and conv.thinking is True
    return bool(profile.reasoning_parser) and conv.thinking is not False


def render_part(part: Part, reasoning: ReasoningParser | None, tools: ToolParser | None) -> str:
    if part.kind == "reasoning":
        return reasoning.render(part.text) if reasoning else f"<think>\n{part.text}\n</think>\n\n"
    if part.kind == "tool_call":
        assert part.call is not None
        if tools is None:
            return f"<tool_call>\n{{\"name\": \"{part.call.name}\", \"arguments\": {part.call.arguments or '{}'}}}\n</tool_call>\n"
        try:
            return tools.render(part.call)
        except ValueError as error:
            raise InvalidConversation(f"tool call {part.call.name!r}: arguments must be a JSON object ({error})") \
                from error
    return tools.render_text(part.text) if tools else part.text + "\n\n"


def rebuild_parts(message: Message, profile: ModelProfile, faults: Faults) -> list[Part]:
    """The parts of one past assistant turn as they go back into the prompt."""
    parts = list(message.parts)
    agent_turn = any(p.kind == "tool_call" for p in parts)
    if faults.on("flatten-interleaved-reasoning"):
        joined = " ".join(p.text for p in parts if p.kind == "reasoning")
        rest = [p for p in parts if p.kind != "reasoning"]
        parts = ([Part(kind="reasoning", text=joined)] if joined else []) + rest
    if faults.on("rewrite-history-reasoning"):  # re-serialised: whitespace normalised, a leading space
        parts = [Part(kind="reasoning", text=" " + re.sub(r"\s+", " ", p.text).strip()) if p.kind == "reasoning"
                 else p for p in parts]
    if faults.on("truncate-agent-reasoning") and not profile.family.reads_reasoning:
        # Templates that read only content get the same bug as the over-eager plain-turn policy.
        parts = [p for p in parts if p.kind != "reasoning"]
    if profile.family.drops_plain_turn_reasoning and not agent_turn:
        parts = [p for p in parts if p.kind != "reasoning"]
    return parts


def build_template_input(conv: Conversation, profile: ModelProfile, faults: Faults, *,
                         system: list[str]) -> TemplateInput:
    thinking = thinking_enabled(profile, conv, faults)
    reasoning, tools = make_parsers(profile, conv, thinking=thinking)
    messages: list[dict[str, Any]] = []
    if system:
        messages.append({"role": "system", "content": "\n".join(system)})
    for message in conv.messages:
        if message.role == "assistant":
            parts = rebuild_parts(message, profile, faults)
            segments = [{"type": p.kind, "raw": render_part(p, reasoning, tools)} for p in parts]
            if profile.family.reads_reasoning:
                messages.append({"role": "assistant", "segments": segments})
            else:
                messages.append({"role": "assistant", "content": "".join(s["raw"] for s in segments)})
        elif message.role == "tool":
            for result in message.results:
                messages.append({"role": "tool", "content": result.content, "tool_call_id": result.call_id})
        else:
            messages.append({"role": message.role, "content": message.text})
    truncate = not thinking or faults.on("truncate-agent-reasoning")
    kwargs = {"enable_thinking": thinking, "truncate_history_thinking": truncate}
    tool_dicts = [{"type": "function", "function": {"name": t.name, "description": t.description,
                                                     "parameters": t.parameters}} for t in conv.tools]
    return TemplateInput(messages=messages, tools=tool_dicts, kwargs=kwargs)


def tool_call_part(name: str, arguments: str, *, index: int, call_id: str) -> Part:
    return Part(kind="tool_call", call=ToolCall(index=index, id=call_id, name=name, arguments=arguments))
