"""What replay knows of each API's request shape beyond ``conformance.apis``: one ``Form`` per API in
``FORMS``, keyed by API name, so that the trace, import, capture and replay code asks a table instead
of branching on the API's name.

The route, the token-limit field and its minimum stay in the API modules (``apis.get(api).PATH``,
``MAX_TOKENS_FIELD``, ``MIN_OUTPUT_TOKENS``); ``replay.fold.VIEWS`` reads a stream's snapshot.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harnesscheck.conformance import apis
from harnesscheck.conformance.apis.base import ANTHROPIC_VERSION

__all__ = ["FORMS", "Form", "api_for_path", "form"]


@dataclass(frozen=True, slots=True)
class Form:
    """One API's request shape as replay builds and reads it."""

    history_key: str  # the request field that holds the conversation
    system_field: str | None  # the top-level field of a system prompt; None: a leading system message
    system_field_text_only: bool  # the field takes a string only (a block list goes in as a system message)
    text_part: str  # the type of a text content part in a request
    key_header: tuple[str, str]  # the header a replay sends the API key in, and its value ({key}: the key)
    roles: tuple[str, ...] | None = None  # the message roles the history admits (None: any)
    stream_fields: dict[str, Any] = field(default_factory=dict)  # what a streamed request adds
    required_max_tokens: int | None = None  # the token limit put in when a trace gives none (a required field)
    model_items: frozenset[str] = frozenset()  # history item types that are the model's output (besides assistant)
    one_answer_entry: bool = True  # an answer is one history entry (an assistant message)
    chat_messages: bool = False  # the history is OpenAI chat messages
    version_headers: dict[str, str] = field(default_factory=dict)  # headers the API requires on every request
    call_id_prefix: str = "call"  # how the API's tool call ids start

    def model_entry(self, entry: Any) -> bool:
        """The history entry is the model's output (part of an answer)."""
        return isinstance(entry, dict) and (entry.get("role") == "assistant"
                                            or entry.get("type") in self.model_items)


FORMS: dict[str, Form] = {
    "anthropic": Form("messages", "system", False, "text", ("x-api-key", "{key}"), roles=("user", "assistant"),
                      required_max_tokens=1024, version_headers={"anthropic-version": ANTHROPIC_VERSION},
                      call_id_prefix="toolu"),
    "chat": Form("messages", None, False, "text", ("authorization", "Bearer {key}"),
                 stream_fields={"stream_options": {"include_usage": True}}, chat_messages=True),
    "responses": Form("input", "instructions", True, "input_text", ("authorization", "Bearer {key}"),
                      model_items=frozenset({"reasoning", "function_call", "custom_tool_call",
                                             "local_shell_call"}),
                      one_answer_entry=False),
}


def form(api: str) -> Form:
    """The form of ``api``; KeyError (naming the APIs) for any other."""
    apis.get(api)
    return FORMS[api]


def api_for_path(path: str) -> str | None:
    """The API whose route ``path`` ends with (any prefix before /v1's route), or None."""
    p = path.split("?", 1)[0].rstrip("/")
    for name, mod in apis.APIS.items():
        if p.endswith(mod.PATH.removeprefix("/v1")):
            return name
    return None
