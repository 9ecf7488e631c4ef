"""The scripted engine (CPU default): plays the scenario's output with a modelled timing.

Content is deterministic: the tokens are the scenario's raw model text (reasoning, text, tool calls
in the family's format). Timing follows a model like Dynamo's CPU mocker: time to first token =
base + cost per *uncached* prompt token, then one token per decode interval. The prefix cache is
real (hash-chained blocks), so cache hits in usage and in TTFT come from actual reuse. Reports say
that figures from this engine are modelled ("scripted-model").

A test switch (`--engine-option stop=timeout|cancelled`, with `stop_after=N`, default 0): every
generation ends after N output tokens as the engine's own stop (`EngineStopped`), the way
TensorRT-LLM reports a "timeout" or "cancelled" finish, so each API's error ending is tested over
real HTTP (tests/reference_server/test_engine_stop.py).
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import asdict, dataclass
from typing import Any

from harnesscheck.reference_server.engines.base import (
    EngineStopped, GenerateRequest, Generation, SlottedEngine, Slots, clip,
)
from harnesscheck.reference_server.prefix_cache import DEFAULT_MAX_BYTES, PrefixCache
from harnesscheck.reference_server.tokenizer import Tokenizer

SCRIPTS_KEPT = 64  # scripts whose token ids the engine keeps (ScriptedEngine.script_ids)


@dataclass(frozen=True, slots=True)
class TimingModel:
    base_ms: float = 10.0  # fixed cost before the first token
    prefill_us_per_token: float = 40.0  # per uncached prompt token (52K tokens ~ 2 s)
    decode_ms: float = 2.0  # between output tokens
    tokens_per_chunk: int = 1  # tokens emitted together (coalescing)

    def ttft_s(self, uncached: int) -> float:
        return (self.base_ms + self.prefill_us_per_token * uncached / 1000.0) / 1000.0


class _ScriptedGeneration(Generation):
    def __init__(self, engine: ScriptedEngine, request: GenerateRequest, cached: int, keys: list[bytes]) -> None:
        super().__init__(request, cached)
        self.engine = engine
        self._keys = keys
        script = [*engine.script_ids(request.script_text or ""), request.eos_id]
        self._script, cut = clip(script, request.max_tokens)
        self.finish_reason = "length" if cut else "stop"
        self._yielded = self._chunks = 0  # chunks given out so far, of how many (known once the first is due)
        self._first_due = self._decode_s = 0.0

    def ready(self) -> bool:
        """Whether the next chunk is due already, so taking it does not wait (`Turn.steps` takes the
        chunks that are ready at once as one step). False before the first token and at the end."""
        n = self._yielded
        if not 0 < n < self._chunks:
            return False
        return not self._decode_s or self._first_due + n * self._decode_s <= time.monotonic()

    async def __aiter__(self) -> AsyncIterator[list[int]]:
        timing = self.engine.timing_model
        try:
            t0 = time.monotonic()
            ttft = timing.ttft_s(self.prompt_tokens - self.cached_tokens)
            await asyncio.sleep(ttft)
            self.engine.cache.insert(self.request.prompt_ids)
            step = max(1, timing.tokens_per_chunk)
            self._first_due, self._decode_s = t0 + ttft, timing.decode_ms / 1000
            self._chunks = -(-len(self._script) // step)
            stop = self.engine.stop
            for n, start in enumerate(range(0, len(self._script), step)):
                if stop is not None and len(self.output_ids) >= stop[1]:
                    raise EngineStopped(stop[0], f"the scripted engine's test switch: stop={stop[0]} after "
                                                 f"{stop[1]} tokens")
                if n and self._decode_s:  # a chunk due already is taken at once (the consumer lets the loop run)
                    delay = self._first_due + n * self._decode_s - time.monotonic()
                    if delay > 0:
                        await asyncio.sleep(delay)
                chunk = self._script[start : start + step]
                self.output_ids.extend(chunk)
                self._yielded = n + 1
                yield chunk
        finally:
            await self.close()

    def _release(self) -> None:
        # Generated tokens join the cache, so a next turn that repeats them verbatim reuses them.
        self.engine.cache.insert(self.request.prompt_ids + self.output_ids)
        self.engine.slots.release(self.engine.cache, self._keys)


class ScriptedEngine(SlottedEngine):
    name = "scripted"
    device = "cpu"
    timing = "scripted-model"

    def __init__(self, *, tokenizer: Tokenizer, timing: TimingModel | None = None, block_size: int = 16,
                 cache_blocks: int = 1 << 16, cache_bytes: int = DEFAULT_MAX_BYTES,
                 max_concurrency: int = 1024, stop: tuple[str, int] | None = None) -> None:
        self.tokenizer = tokenizer
        self.stop = stop  # the test switch (module docstring): (reason, after this many tokens)
        self.timing_model = timing or TimingModel()
        self.cache = PrefixCache(block_size=block_size, capacity_blocks=cache_blocks, max_bytes=cache_bytes)
        self.max_concurrency = max_concurrency
        self.slots = Slots(max_concurrency)
        # A script's token ids, by its text: the same turn replayed again is not tokenized again (a
        # real engine never tokenizes its output, nor does Dynamo's mocker, which reads ids from a trace).
        self.script_ids: Callable[[str], tuple[int, ...]] = functools.lru_cache(maxsize=SCRIPTS_KEPT)(
            lambda text: tuple(tokenizer.encode(text)))

    def _generation(self, request: GenerateRequest, cached: int, keys: list[bytes]) -> Generation:
        return _ScriptedGeneration(self, request, cached, keys)

    def describe(self) -> dict[str, Any]:
        return {"engine": self.name, "device": self.device, "timing": self.timing,
                "timing_model": asdict(self.timing_model), "block_size": self.cache.block_size,
                "max_concurrency": self.max_concurrency} | ({"stop": list(self.stop)} if self.stop else {})


def stop_switch(options: dict[str, str]) -> tuple[str, int] | None:
    """The test switch from `--engine-option stop=REASON [stop_after=N]`, or None."""
    reason = options.get("stop")
    if not reason:
        return None
    if reason not in ("timeout", "cancelled"):
        raise ValueError(f"--engine-option stop={reason!r}: expected timeout or cancelled")
    after = options.get("stop_after", "0")
    if not after.isdigit():
        raise ValueError(f"--engine-option stop_after={after!r}: expected a number of tokens")
    return reason, int(after)
