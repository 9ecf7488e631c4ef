"""A chat template and what it does with reasoning, detected by rendering it (article 1, fix 2).

At start-up `ChatTemplate` renders small probe conversations once and records `TemplateTraits`:
whether the template reads `reasoning_content` (Nemotron, Qwen3) or the built-in templates' typed
`segments`, whether it renders `tool_calls` itself, which of the kwargs `enable_thinking`,
`truncate_history_thinking` and `thinking` change its output, whether its generation prompt opens
`<think>`, and the special token that closes an assistant turn. The history rebuild follows the
traits: a template that reads reasoning gets it and decides how much to keep; only a content-only
template gets `<think>` inlined or dropped by the family's policy. The same rule for every engine.

Checkpoint templates are rendered as Hugging Face renders them (a sandboxed Jinja environment with
`trim_blocks` and `lstrip_blocks`, `tojson`, `raise_exception`, `strftime_now`, `bos_token` and
`eos_token`); the server's own templates in `reference_server/templates/` keep the environment
they were written for.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from typing import Any

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

from harnesscheck.reference_server.checkpoint import TemplateSource

THINKING_KWARGS = ("enable_thinking", "truncate_history_thinking", "thinking")

# Probe markers: strings no template writes on its own.
R_MARK, C_MARK, U_MARK, T_MARK = "hcprobe-reasoning-q7", "hcprobe-content-q7", "hcprobe-user-q7", "hcprobe_tool_q7"


class TemplateError(ValueError):
    """The chat template cannot be compiled or fails on a request's messages."""


@dataclass(frozen=True, slots=True)
class TemplateTraits:
    """What rendering the probes showed (in /v1/models metadata and the start-up log)."""

    reads_reasoning_content: bool  # message.reasoning_content reaches the prompt
    reads_segments: bool  # the built-in templates' typed segments (reasoning, text, tool calls in model order)
    renders_tool_calls: bool  # message.tool_calls reaches the prompt
    honoured_kwargs: tuple[str, ...]  # of THINKING_KWARGS: those that change the output
    opens_reasoning: bool  # the generation prompt (thinking on) ends inside <think>
    turn_end: str | None  # the special token right after an assistant turn's content

    @property
    def reads_reasoning(self) -> bool:
        return self.reads_reasoning_content or self.reads_segments

    @property
    def reasoning_history(self) -> str:
        """Who decides what past reasoning the prompt keeps: the template, or the server's policy."""
        if self.reads_reasoning:
            return "template-native (the template reads reasoning; the server passes it unchanged)"
        return "content-only template (the server inlines <think> in content or drops it by the family's policy)"

    def describe(self) -> dict[str, Any]:
        return asdict(self) | {"reasoning_history": self.reasoning_history}


def _tojson(value: Any, indent: int | None = None, ensure_ascii: bool = False, sort_keys: bool = False,
            separators: Any = None) -> str:
    return json.dumps(value, indent=indent, ensure_ascii=ensure_ascii, sort_keys=sort_keys, separators=separators)


def _raise(message: str) -> None:
    raise TemplateError(f"the chat template refused the messages: {message}")


def _hf_environment() -> jinja2.Environment:
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False,
                                        extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise
    env.globals["strftime_now"] = lambda fmt: time.strftime(fmt)
    return env


def _builtin_environment() -> jinja2.Environment:
    env = jinja2.Environment(keep_trailing_newline=True, autoescape=False, undefined=jinja2.Undefined,
                             extensions=["jinja2.ext.loopcontrols"])
    env.policies["json.dumps_kwargs"] = {"sort_keys": True, "ensure_ascii": False}
    return env


class ChatTemplate:
    """A compiled chat template, its special-token variables and its detected traits."""

    def __init__(self, source: TemplateSource, *, bos_token: str | None = None, eos_token: str | None = None,
                 special_tokens: tuple[str, ...] = ()) -> None:
        self.source = source
        self.bos_token = bos_token
        self.eos_token = eos_token
        self.special_tokens = special_tokens
        env = _builtin_environment() if source.builtin else _hf_environment()
        try:
            self._template = env.from_string(source.text)
        except jinja2.TemplateError as error:
            raise TemplateError(f"chat template ({source.origin}) does not compile: {error}") from error
        self.traits = detect(self)

    def render(self, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None = None,
               add_generation_prompt: bool = True, **kwargs: Any) -> str:
        variables: dict[str, Any] = {"messages": messages, "add_generation_prompt": add_generation_prompt,
                                     "bos_token": self.bos_token or "", "eos_token": self.eos_token or ""}
        if tools:
            variables["tools"] = tools
        elif self.source.builtin:
            variables["tools"] = []
        variables.update(kwargs)
        try:
            return self._template.render(**variables)
        except TemplateError:
            raise
        except jinja2.TemplateError as error:
            raise TemplateError(f"chat template ({self.source.origin}) failed: {error}") from error

    def describe(self) -> dict[str, Any]:
        return {"origin": self.source.origin, **self.traits.describe()}


# --- detection --------------------------------------------------------------------------------------


def _call() -> dict[str, Any]:
    return {"type": "function", "id": "call_hcprobe", "function": {"name": T_MARK, "arguments": {"x": "1"}}}


def _probes(field_: str) -> list[tuple[list[dict[str, Any]], bool]]:
    """Conversations that hold an assistant turn with reasoning (in `field_`), each with its
    add_generation_prompt: some templates keep reasoning only after the last user message, some
    refuse tool roles or a conversation ending with the assistant."""
    def assistant(content: str, **extra: Any) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if field_ == "reasoning_content":
            message["reasoning_content"] = R_MARK
        else:
            message["segments"] = [{"type": "reasoning", "raw": f"<think>\n{R_MARK}\n</think>\n\n"},
                                   {"type": "text", "raw": content}]
        return message | extra

    user = {"role": "user", "content": U_MARK}
    return [
        ([user, assistant(C_MARK, tool_calls=[_call()]),
          {"role": "tool", "content": "hcprobe-result", "tool_call_id": "call_hcprobe"}], True),
        ([user, assistant(C_MARK)], False),
        ([user, assistant(C_MARK), {"role": "user", "content": U_MARK}], True),
    ]


def _try(template: ChatTemplate, messages: list[dict[str, Any]], add: bool, **kwargs: Any) -> str | None:
    try:
        return template.render(messages, add_generation_prompt=add, **kwargs)
    except Exception:  # a probe the template refuses tells nothing; the others decide
        return None


def _renders(template: ChatTemplate, field_: str, **kwargs: Any) -> list[str]:
    return [out for messages, add in _probes(field_) if (out := _try(template, messages, add, **kwargs)) is not None]


def detect(template: ChatTemplate) -> TemplateTraits:
    """Render the probes once and read off the traits (see the module docstring)."""
    keep = {"enable_thinking": True, "truncate_history_thinking": False, "thinking": True}
    rc = _renders(template, "reasoning_content") + _renders(template, "reasoning_content", **keep)
    seg = _renders(template, "segments") + _renders(template, "segments", **keep)
    reads_rc = any(R_MARK in out for out in rc)
    reads_seg = any(R_MARK in out for out in seg)  # the built-in templates read both: segments first
    renders_calls = any(T_MARK in out for out in rc)
    field_ = "segments" if reads_seg else "reasoning_content"
    honoured = []
    for name in THINKING_KWARGS:
        on = _renders(template, field_, **(keep | {name: True}))
        off = _renders(template, field_, **(keep | {name: False}))
        if on != off:
            honoured.append(name)
    prompt = _try(template, [{"role": "user", "content": U_MARK}], True, **keep) or ""
    opens = prompt.rstrip().endswith("<think>")
    return TemplateTraits(reads_reasoning_content=reads_rc, reads_segments=reads_seg,
                          renders_tool_calls=renders_calls, honoured_kwargs=tuple(honoured),
                          opens_reasoning=opens, turn_end=_turn_end(template))


def _turn_end(template: ChatTemplate) -> str | None:
    """The special token that follows an assistant turn's content (`<|im_end|>`, `<end_of_turn>`, ...)."""
    out = _try(template, [{"role": "user", "content": U_MARK}, {"role": "assistant", "content": C_MARK}], False)
    if out is None or C_MARK not in out:
        return None
    tail = out.split(C_MARK, 1)[1].lstrip()
    found = [t for t in template.special_tokens if t and tail.startswith(t)]
    return max(found, key=len) if found else None
