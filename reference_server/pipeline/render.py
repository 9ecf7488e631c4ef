"""Conversation -> prompt text -> token ids: preamble strip, history rebuild, chat template."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2

from reference_server.conversation import Conversation
from reference_server.faults import Faults
from reference_server.pipeline.families import ModelProfile
from reference_server.pipeline.history import build_template_input
from reference_server.pipeline.preamble import strip_billing_header, strip_simple

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"


@lru_cache(maxsize=None)
def _template(name: str) -> jinja2.Template:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), keep_trailing_newline=True,
                             autoescape=False, undefined=jinja2.Undefined)
    env.policies["json.dumps_kwargs"] = {"sort_keys": True, "ensure_ascii": False}
    return env.get_template(name)


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


def render_text(conv: Conversation, profile: ModelProfile, *, strip_preamble: bool, faults: Faults,
                add_generation_prompt: bool = True,
                extra_kwargs: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
    system = system_blocks(conv, strip_preamble=strip_preamble, faults=faults)
    data = build_template_input(conv, profile, faults, system=system)
    kwargs = {**data.kwargs, **(extra_kwargs or {})}
    text = _template(profile.family.template).render(
        messages=data.messages, tools=data.tools, add_generation_prompt=add_generation_prompt, **kwargs)
    return text, kwargs
