"""Conversation -> prompt text -> token ids: preamble strip, history rebuild, chat template."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harnesscheck.reference_server.conversation import Conversation
from harnesscheck.reference_server.faults import Faults
from harnesscheck.reference_server.pipeline.history import build_template_input
from harnesscheck.reference_server.pipeline.plan import TurnPlan
from harnesscheck.reference_server.pipeline.preamble import strip_billing_header, strip_simple

@dataclass(frozen=True, slots=True)
class Prompt:
    text: str
    ids: list[int]
    template_kwargs: dict[str, Any]

    def __len__(self) -> int:
        return len(self.ids)


def system_blocks(conv: Conversation, *, strip_preamble: bool, faults: Faults) -> list[str]:
    if faults.on("preamble-not-stripped") or not strip_preamble:
        return conv.system
    if faults.on("preamble-simple-strip"):
        return strip_simple(conv.system)
    return strip_billing_header(conv.system)


def render_text(conv: Conversation, plan: TurnPlan, *, strip_preamble: bool, faults: Faults,
                add_generation_prompt: bool = True,
                extra_kwargs: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
    system = system_blocks(conv, strip_preamble=strip_preamble, faults=faults)
    data = build_template_input(conv, plan, faults, system=system)
    kwargs = {**data.kwargs, **(extra_kwargs or {})}
    text = plan.profile.chat_template.render(data.messages, tools=data.tools, add_generation_prompt=add_generation_prompt,
                                        **kwargs)
    return text, kwargs
