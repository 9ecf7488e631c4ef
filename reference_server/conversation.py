"""The internal conversation every frontend normalises to.

An assistant turn keeps its parts (reasoning, text, tool calls) in the order the model wrote them,
so the history rebuild can put `<think>r0</think> t0 <think>r1</think> t1` back exactly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from harnesscheck.reference_server.events import Part, ToolCall

Role = Literal["system", "user", "assistant", "tool"]


# How harnesses open the user messages that carry context rather than the user's words.
HARNESS_CONTEXT_PREFIXES = ("<environment_context>", "<user_instructions>", "# AGENTS.md instructions",
                            "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>")
# Claude Code puts reminders in the same message as the prompt, as blocks of their own.
_REMINDER = re.compile(r"<system-reminder>.*?</system-reminder>", re.S)


def is_harness_context(text: str) -> bool:
    """True for a user message that is only harness context (nothing the user typed)."""
    rest = _REMINDER.sub("", text).strip()
    return not rest or rest.startswith(HARNESS_CONTEXT_PREFIXES)


class InvalidConversation(ValueError):
    """The client's conversation cannot be rendered (e.g. tool arguments that are not a JSON
    object); frontends answer it with a 400 in their API's shape."""


@dataclass(slots=True)
class ToolSpec:
    name: str
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})
    strict: bool = False  # the client asked that the call's arguments follow the schema (`strict: true`)
    # "custom": a Responses custom tool (free-form text input, optionally a grammar): offered to the model as
    # a function of one string `input`, its call answered as a custom_tool_call item with that text
    kind: Literal["function", "custom"] = "function"
    namespace: str | None = None  # the Responses namespace tool it was declared in (MCP servers), if any


@dataclass(slots=True)
class ToolResult:
    call_id: str
    content: str
    is_error: bool = False


@dataclass(slots=True)
class Message:
    role: Role
    text: str = ""  # system / user text (blocks joined)
    parts: list[Part] = field(default_factory=list)  # assistant parts in model order
    results: list[ToolResult] = field(default_factory=list)  # tool results (role "tool")

    @property
    def tool_calls(self) -> list[ToolCall]:
        return [p.call for p in self.parts if p.call is not None]


@dataclass(slots=True)
class ToolChoice:
    mode: Literal["auto", "none", "required", "named"] = "auto"
    name: str | None = None


@dataclass(slots=True)
class Conversation:
    model: str
    system: list[str] = field(default_factory=list)  # system blocks, in order
    messages: list[Message] = field(default_factory=list)
    tools: list[ToolSpec] = field(default_factory=list)
    tool_choice: ToolChoice = field(default_factory=ToolChoice)
    max_tokens: int | None = None
    # None: the client said nothing; True/False: it turned thinking on or off explicitly.
    thinking: bool | None = None
    parallel_tool_calls: bool = True
    stop: list[str] = field(default_factory=list)

    @property
    def system_text(self) -> str:
        return "\n".join(self.system)

    def turn_user_text(self) -> str:
        """What the user asked in the current turn: the first user message after the newest assistant
        or tool message that is not harness context. Harnesses add context as user messages on both
        sides of the prompt (Codex's <environment_context> before it, OpenClaw's internal context
        after it), so neither the first nor the newest user message is always the question."""
        start = 0
        for i, message in enumerate(self.messages):
            if message.role in ("assistant", "tool"):
                start = i + 1
        for message in self.messages[start:]:
            if message.role == "user" and message.text.strip() and not is_harness_context(message.text):
                return message.text
        return self.last_user_text()

    def last_user_text(self) -> str:
        """The newest user text, skipping mid-conversation system entries and tool results."""
        for message in reversed(self.messages):
            if message.role == "user" and message.text.strip():
                return message.text
        return ""
