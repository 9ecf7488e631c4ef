"""Model families: the built-in chat template, the parsers, and the family's reasoning policy.

What a template does with reasoning is not a family attribute: it is detected from the template
itself (`pipeline/template.py`), the checkpoint's own or, without a checkpoint, the family's
built-in one. The family's policy (`drops_plain_turn_reasoning`) applies only to content-only
templates.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harnesscheck.reference_server.pipeline.template import ChatTemplate


@dataclass(frozen=True, slots=True)
class Family:
    name: str
    template: str  # the built-in template, a file in reference_server/templates/
    drops_plain_turn_reasoning: bool  # DeepSeek-R1 policy (content-only templates): plain turns lose reasoning
    eos: str  # the built-in template's turn end, in the server's tokenizer
    reasoning_parser: str
    tool_parser: str


FAMILIES: dict[str, Family] = {
    f.name: f
    for f in [
        Family("nemotron", "chatml.jinja", False, "<|im_end|>", "nemotron_deci", "qwen3_coder"),
        Family("qwen3", "chatml.jinja", False, "<|im_end|>", "qwen3", "hermes"),
        Family("deepseek_r1", "deepseek_r1.jinja", True, "<|end_of_sentence|>", "deepseek_r1", "hermes"),
    ]
}


@dataclass(frozen=True, slots=True)
class ModelProfile:
    """One served model id: its family, the parsers configured for it (None = off) and its chat
    template (None: the family's built-in one)."""

    id: str
    family: Family
    reasoning_parser: str | None
    tool_parser: str | None
    template: ChatTemplate | None = None

    @property
    def chat_template(self) -> ChatTemplate:
        return self.template or builtin_chat_template(self.family.template)

    @classmethod
    def parse(cls, spec: str, *, reasoning_parser: str | None = "", tool_parser: str | None = "") -> ModelProfile:
        """`ID` or `ID=FAMILY`; parser names default to the family's ("" = family default)."""
        model_id, _, family_name = spec.partition("=")
        family = FAMILIES[family_name or guess_family(model_id)]
        return cls(
            id=model_id,
            family=family,
            reasoning_parser=family.reasoning_parser if reasoning_parser == "" else reasoning_parser,
            tool_parser=family.tool_parser if tool_parser == "" else tool_parser,
        )


def guess_family(model_id: str) -> str:
    lowered = model_id.lower()
    if "deepseek" in lowered:
        return "deepseek_r1"
    if "qwen" in lowered:
        return "qwen3"
    return "nemotron"


@lru_cache(maxsize=None)
def builtin_chat_template(name: str) -> ChatTemplate:
    """A built-in template with the server tokenizer's special tokens, compiled and probed once."""
    from harnesscheck.reference_server.checkpoint import builtin_template
    from harnesscheck.reference_server.pipeline.template import ChatTemplate
    from harnesscheck.reference_server.tokenizer import SPECIAL_TOKENS

    return ChatTemplate(builtin_template(name), special_tokens=tuple(SPECIAL_TOKENS))
