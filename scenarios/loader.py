"""Declarative multi-turn scenarios: what the client sends and what the (scripted) model answers.

A scenario file (scenarios/data/*.yaml) holds a system prompt, tools, the tool results the client
returns, and turns. Each turn has what starts it (`user` text, or nothing: the previous turn's tool
results) and the model's output as ordered parts (`reasoning`, `text`, `tool_call`). The reference
server's scripted engine plays the parts; the kit replays the client side and checks what comes back.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import yaml

DATA = Path(__file__).resolve().parent / "data"


@dataclass(frozen=True, slots=True)
class ModelPart:
    kind: Literal["reasoning", "text", "tool_call"]
    text: str = ""
    name: str = ""
    arguments: str = ""  # JSON object text (canonical: json.dumps, ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class Turn:
    user: str | None
    model: tuple[ModelPart, ...]

    @property
    def tool_calls(self) -> list[ModelPart]:
        return [p for p in self.model if p.kind == "tool_call"]


@dataclass(frozen=True, slots=True)
class Scenario:
    id: str
    title: str
    system: str
    tools: tuple[dict[str, Any], ...]
    turns: tuple[Turn, ...]
    results: dict[str, str] = field(default_factory=dict)
    tags: tuple[str, ...] = ()

    @property
    def trigger(self) -> str:
        return self.turns[0].user or ""

    def result_for(self, name: str, arguments: str) -> str:
        """The tool output the client sends back for a call (by tool name, else an echo)."""
        return self.results.get(name, f"{name} ran with {arguments}")


def _part(raw: dict[str, Any]) -> ModelPart:
    if "reasoning" in raw:
        return ModelPart("reasoning", text=str(raw["reasoning"]).strip())
    if "text" in raw:
        return ModelPart("text", text=str(raw["text"]).strip())
    call = raw["tool_call"]
    return ModelPart("tool_call", name=call["name"], arguments=json.dumps(call.get("arguments", {}), ensure_ascii=False))


def parse(data: dict[str, Any]) -> Scenario:
    results = {k: (v if isinstance(v, str) else json.dumps(v)) for k, v in (data.get("results") or {}).items()}
    for name, size in (data.get("result_sizes") or {}).items():  # large tool outputs, made to size
        results[name] = "\n".join(f"line {i}: " + "x" * 60 for i in range(int(size) // 70 + 1))
    return Scenario(
        id=data["id"],
        title=data.get("title", data["id"]),
        system=str(data.get("system", "")).strip(),
        tools=tuple(data.get("tools") or ()),
        turns=tuple(Turn(user=t.get("user"), model=tuple(_part(p) for p in t["model"])) for t in data["turns"]),
        results=results,
        tags=tuple(data.get("tags") or ()),
    )


@lru_cache(maxsize=1)
def load_all() -> dict[str, Scenario]:
    found = {}
    for path in sorted(DATA.glob("*.yaml")):
        scenario = parse(yaml.safe_load(path.read_text(encoding="utf-8")))
        found[scenario.id] = scenario
    return found


def get(scenario_id: str) -> Scenario:
    scenarios = load_all()
    if scenario_id not in scenarios:
        raise KeyError(f"unknown scenario {scenario_id!r}; known: {', '.join(sorted(scenarios))}")
    return scenarios[scenario_id]


def find_by_user_text(text: str) -> Scenario | None:
    """The scenario whose first user message is contained in `text` (longest trigger wins)."""
    best = None
    for scenario in load_all().values():
        if scenario.trigger and scenario.trigger in text:
            if best is None or len(scenario.trigger) > len(best.trigger):
                best = scenario
    return best
