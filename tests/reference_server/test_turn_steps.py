"""`Turn.steps` groups the chunks the engine has ready at once (one write each), and nothing else changes.

Against the real service and scripted engine (the bench's scenarios, reasoning and tool calls):

- With every chunk due at once (decode 0), the events are the same, in the same order, as when each
  chunk is its own step (an engine that cannot tell it is ready): nothing merged or dropped; the
  steps are fewer, none holds more than STEP_CHUNKS chunks' events, the first token goes out alone
  and a tool call's end ends its step.
- Two such turns interleave: a step that ends while the next chunk is due lets the other run.
- The scripted engine is ready only once its next chunk is due.
- The service's remembered one-id decodes stream the same text (multi-byte characters included).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import Any

import pytest

from harnesscheck.protocol.apis import chat as chat_api
from harnesscheck.reference_server.config import DEFAULT_MODEL_IDS, ServerConfig
from harnesscheck.reference_server.engines.scripted import TimingModel
from harnesscheck.reference_server.events import ToolCallEnd
from harnesscheck.reference_server.frontends import chat
from harnesscheck.reference_server.service import STEP_CHUNKS, Service, Turn, _OneIdDecodes, build_service
from harnesscheck.reference_server.tokenizer import IncrementalDecoder, load
from harnesscheck.scenarios.loader import get

SCENARIOS = ["long_reasoning", "long_agent_turn"]


def _service(decode_ms: float = 0.0) -> Service:
    timing = TimingModel(base_ms=0, prefill_us_per_token=0, decode_ms=decode_ms)
    return build_service(dataclasses.replace(ServerConfig(), timing=timing))


async def _turn(service: Service, scenario: str, **body: Any) -> Turn:
    body = {**chat_api.first(get(scenario), DEFAULT_MODEL_IDS[0]), **body}
    conv = chat.to_conversation(body, service.faults)
    return await service.start_turn(conv)


class _Unready:
    """A generation that cannot tell whether its next chunk is ready (no `ready`): one chunk per step."""

    def __init__(self, generation: Any) -> None:
        self._generation = generation

    def __aiter__(self) -> Any:
        return self._generation.__aiter__()

    def __getattr__(self, name: str) -> Any:
        if name == "ready":
            raise AttributeError(name)
        return getattr(self._generation, name)


async def _steps(turn: Turn) -> list[list[Any]]:
    return [step async for step in turn.steps()]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_chunks_due_together_share_a_step_and_keep_their_own_events(scenario: str) -> None:
    async def both() -> tuple[list[list[Any]], list[list[Any]]]:
        grouped = await _steps(await _turn(_service(), scenario))
        plain_turn = await _turn(_service(), scenario)  # a service of its own: the same (empty) cache
        plain_turn.generation = _Unready(plain_turn.generation)  # type: ignore[assignment]
        return grouped, await _steps(plain_turn)

    grouped, plain = asyncio.run(both())
    flat = [e for step in grouped for e in step]
    assert flat == [e for step in plain for e in step]  # same events, same order: nothing merged or dropped
    assert len(flat) > 500 and len(grouped) < len(plain) / 4  # the steps are fewer...
    assert max(len(step) for step in grouped[:-1]) <= STEP_CHUNKS  # ...at most 16 chunks' events each
    assert grouped[0] == plain[0] and len(grouped[0]) == 1  # the first token goes out alone
    for step in grouped:
        ends = [i for i, e in enumerate(step) if isinstance(e, ToolCallEnd)]
        assert all(i == len(step) - 1 for i in ends)  # a tool call's end ends its step (sent at once)
    if scenario == "long_agent_turn":
        assert any(isinstance(e, ToolCallEnd) for e in flat)


def test_turns_due_at_once_take_turns_on_the_loop() -> None:
    service = _service()
    order: list[str] = []

    async def run(name: str) -> None:
        async for _ in (await _turn(service, "long_reasoning")).steps():
            order.append(name)

    async def main() -> None:
        await asyncio.gather(run("a"), run("b"))

    asyncio.run(main())
    assert order.index("b") < len(order) - 1 - order[::-1].index("a")  # b started before a ended
    assert order.index("a") < len(order) - 1 - order[::-1].index("b")


def test_the_scripted_engine_is_ready_only_once_its_next_chunk_is_due() -> None:
    service = _service(decode_ms=200)

    async def main() -> list[bool]:
        turn = await _turn(service, "long_reasoning", max_tokens=3)
        generation = turn.generation
        seen = [generation.ready()]  # type: ignore[attr-defined]
        chunks = generation.__aiter__()
        await chunks.__anext__()
        seen.append(generation.ready())  # type: ignore[attr-defined]
        await asyncio.sleep(0.25)
        seen.append(generation.ready())  # type: ignore[attr-defined]
        started = time.monotonic()
        await chunks.__anext__()  # due already: no wait
        seen.append(time.monotonic() - started < 0.1)
        await chunks.aclose()
        await generation.close()
        return seen

    assert asyncio.run(main()) == [False, False, True, True]


def test_remembered_one_id_decodes_stream_the_same_text() -> None:
    tokenizer = load()
    text = "plain words, 中文字符 and 🙂🙃 emoji, <think> tags </think>, \u00e9t\u00e9 " * 3
    ids = tokenizer.encode(text)
    remembered = _OneIdDecodes(tokenizer)
    for _ in range(2):  # the second pass decodes from the table
        decoder = IncrementalDecoder(remembered)
        assert "".join(decoder.push([i]) for i in ids) == text
    assert len(remembered._one) < len(ids)  # one entry per distinct id
