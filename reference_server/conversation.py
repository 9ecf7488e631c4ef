"""The internal conversation every frontend normalises to.

An assistant turn keeps its parts (reasoning, text, tool calls) in the order the model wrote them,
so the history rebuild can put `<think>r0</think> t0 <think>r1</think> t1` back exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from reference_server.events import Part, ToolCall

Role = Literal["system", "user", "assistant", "tool"]


class InvalidConversation(ValueError):
    """The client's conversation cannot be rendered (e.g. tool arguments that are not a JSON
    object); frontends answer it with a 400 in their API's shape."""


@dataclass(slots=True)
class ToolSpec:
    name: str
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})


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
        """The user text that opened the current turn: the first user message after the newest
        assistant or tool message. Harnesses append context after it (OpenClaw adds an internal
        user message), so the newest user message is not always what the user asked."""
        start = 0
        for i, message in enumerate(self.messages):
            if message.role in ("assistant", "tool"):
                start = i + 1
        for message in self.messages[start:]:
            if message.role == "user" and message.text.strip():
                return message.text
        return self.last_user_text()

    def last_user_text(self) -> str:
        """The newest user text, skipping mid-conversation system entries and tool results."""
        for message in reversed(self.messages):
            if message.role == "user" and message.text.strip():
                return message.text
        return ""
