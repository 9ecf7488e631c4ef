"""Model families: which chat template, which parsers, and the family's reasoning policy."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Family:
    name: str
    template: str  # file in reference_server/templates/
    reads_reasoning: bool  # template takes typed segments (reasoning_content); else inline <think>
    drops_plain_turn_reasoning: bool  # DeepSeek-R1 policy: plain answer turns lose their reasoning
    start_in_reasoning: bool  # generation prompt opens <think>, output starts inside reasoning
    eos: str
    reasoning_parser: str
    tool_parser: str


FAMILIES: dict[str, Family] = {
    f.name: f
    for f in [
        Family("nemotron", "chatml.jinja", True, False, False, "<|im_end|>", "nemotron_deci", "qwen3_coder"),
        Family("qwen3", "chatml.jinja", True, False, False, "<|im_end|>", "qwen3", "hermes"),
        Family("deepseek_r1", "deepseek_r1.jinja", False, True, True, "<|end_of_sentence|>", "deepseek_r1", "hermes"),
    ]
}


@dataclass(frozen=True, slots=True)
class ModelProfile:
    """One served model id: its family, and the parsers configured for it (None = off)."""

    id: str
    family: Family
    reasoning_parser: str | None
    tool_parser: str | None

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
