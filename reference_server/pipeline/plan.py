"""A turn's plan: what one turn is rendered and parsed with, decided once, by the service.

The model profile (family and chat template), the thinking switch and the turn's reasoning and
tool parsers are decided here and nowhere else; the history rebuild (`pipeline/history.py`), the
scripted output and the stream parser all read the same plan. The thinking switch (article 1, fix
3): on when a reasoning parser is configured, unless the client turned it off (Anthropic
`thinking: {"type": "disabled"}`, the Chat/Responses equivalents); the fault
thinking-off-by-default makes it on only when the client asked.

The parsers render past turns (rendering keeps no state) and then parse this turn's output (that
keeps state): one plan, one pair of parsers, per turn.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from harnesscheck.reference_server.conversation import Conversation
from harnesscheck.reference_server.faults import Faults
from harnesscheck.reference_server.parsers import get_reasoning_parser, get_tool_parser
from harnesscheck.reference_server.parsers.base import ReasoningParser, ToolParser
from harnesscheck.reference_server.pipeline.families import ModelProfile


class CallIds:
    """The ids of one request's tool calls: `prefix` + the prompt's digest + the call's index (same
    request, same ids). The digest is known only once the prompt is rendered, with the plan that
    holds these ids, so it is set then (`seal`); ids are asked for only later, while parsing."""

    __slots__ = ("prefix", "digest")

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.digest: str | None = None

    def seal(self, digest: str) -> None:
        self.digest = digest

    def __call__(self, index: int) -> str:
        if self.digest is None:
            raise RuntimeError("CallIds: an id was asked for before the prompt's digest was set")
        return f"{self.prefix}{self.digest}{index:02d}"


@dataclass(frozen=True, slots=True)
class TurnPlan:
    profile: ModelProfile
    thinking: bool  # the thinking switch (see the module docstring)
    reasoning: ReasoningParser | None
    tools: ToolParser | None

    @property
    def reasoning_on(self) -> bool:
        """Whether this turn reasons: thinking is on and there is a reasoning parser to write it."""
        return self.thinking and self.reasoning is not None


def plan_turn(profile: ModelProfile, conv: Conversation, faults: Faults, *,
              id_factory: Callable[[int], str] = lambda i: f"call_{i}") -> TurnPlan:
    """The plan for one turn of `conv` on `profile`; `id_factory` names the calls it parses."""
    if faults.on("thinking-off-by-default"):
        thinking = bool(profile.reasoning_parser) and conv.thinking is True
    else:
        thinking = bool(profile.reasoning_parser) and conv.thinking is not False
    reasoning = None
    if profile.reasoning_parser:
        start = profile.chat_template.traits.opens_reasoning and thinking
        reasoning = get_reasoning_parser(profile.reasoning_parser)(start_in_reasoning=start)
    tools = get_tool_parser(profile.tool_parser)(tools=conv.tools, id_factory=id_factory) if profile.tool_parser \
        else None
    return TurnPlan(profile=profile, thinking=thinking, reasoning=reasoning, tools=tools)
