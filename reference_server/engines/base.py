"""The interface every engine offers: admit a request (cache lookup at once), then stream tokens.

`Engine.start` returns a `Generation` whose prompt and cached-token counts are known before the
first token (so message_start can carry real usage); iterating it yields lists of token ids; its
`close()` frees the engine slot and the cache pins, also when the client went away mid-stream.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from harnesscheck.reference_server.tokenizer import Tokenizer


@dataclass(slots=True)
class GenerateRequest:
    request_id: str
    prompt_ids: list[int]
    max_tokens: int
    eos_id: int  # the id a scripted output ends with
    end_ids: tuple[int, ...] = ()  # every id that ends the turn (eos_id is one); empty: eos_id only
    # What the scripted output modes play: the turn's parts already rendered to raw model text.
    script_text: str | None = None


class Generation(ABC):
    prompt_tokens: int
    cached_tokens: int
    finish_reason: Literal["stop", "length"] | None = None
    output_ids: list[int]
    _closed: bool = False

    def __init__(self, request: GenerateRequest, cached_tokens: int) -> None:
        self.request = request
        self.prompt_tokens = len(request.prompt_ids)
        self.cached_tokens = cached_tokens
        self.output_ids = []

    @abstractmethod
    def __aiter__(self) -> AsyncIterator[list[int]]: ...

    async def close(self) -> None:
        """End the generation: free what it holds, once (the stream's end and a hang-up may both call it)."""
        if self._closed:
            return
        self._closed = True
        self._release()

    @abstractmethod
    def _release(self) -> None:
        """Free the engine slot and the cache pins (and keep what the cache should keep)."""


class EngineStopped(RuntimeError):
    """The engine ended a request for its own reason: not a finish the API may call "stop".

    `reason` is the engine's word for it: "timeout" (the request ran past the engine's limit) or
    "cancelled" (or any other the engine gives). Each API ends the turn with its own error form
    (`frontends/common.py`, ENGINE_STOP_STATUS): an error status before the stream started, else
    the stream's error frame.
    """

    def __init__(self, reason: str, message: str = "") -> None:
        super().__init__(message or f"the engine ended the generation: {reason}")
        self.reason = reason


class StoppedGeneration(Generation):
    """A generation the engine stops before its first token (fault overflow-stream-error: a prompt over the
    window that the engine, not the frontend, fails): iterating it raises `EngineStopped`; it holds no slot."""

    def __init__(self, request: GenerateRequest, stop: EngineStopped) -> None:
        super().__init__(request, 0)
        self.stop = stop

    async def __aiter__(self) -> AsyncIterator[list[int]]:
        raise self.stop
        yield []  # an async generator: the stop is raised on the first step

    def _release(self) -> None:
        pass


def stops(request: GenerateRequest) -> frozenset[int]:
    """The ids that end `request`'s output."""
    return frozenset(request.end_ids) | {request.eos_id}


class Engine(ABC):
    name: str = ""
    device: str = "cpu"
    timing: Literal["scripted-model", "real-compute"] = "scripted-model"
    tokenizer: Tokenizer

    @abstractmethod
    async def start(self, request: GenerateRequest) -> Generation: ...

    @abstractmethod
    def describe(self) -> dict[str, Any]:
        """Engine, device and settings, shown in /v1/models metadata and benchmark results."""

    def active_requests(self) -> int:
        return 0

    def cache_stats(self) -> dict[str, Any]:
        return {}


class SlottedEngine(Engine):
    """An engine whose requests take one of its `Slots` and pin their cached prefix blocks in `cache`
    (a `PrefixCache` or a `KVBlockStore`: match, pin, unpin, stats, block_size)."""

    slots: Slots
    cache: Any

    async def start(self, request: GenerateRequest) -> Generation:
        cached, keys = await self.slots.admit(self.cache, request.prompt_ids)
        return self._generation(request, cached, keys)

    @abstractmethod
    def _generation(self, request: GenerateRequest, cached: int, keys: list[bytes]) -> Generation:
        """The admitted request's generation: `cached` prompt tokens reused, from the blocks `keys`."""

    def active_requests(self) -> int:
        return self.slots.active

    def cache_stats(self) -> dict[str, Any]:
        return asdict(self.cache.stats) | {"block_size": self.cache.block_size}


class Slots:
    """Engine slots and prefix-cache pins, shared by the engines: admission takes a slot and pins
    the cached blocks it will reuse (so the count reported is the count reused); release frees both."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._free = asyncio.Semaphore(limit)
        self.active = 0

    async def admit(self, cache: Any, prompt_ids: Sequence[int]) -> tuple[int, list[bytes]]:
        await self._free.acquire()
        self.active += 1
        cached, keys = cache.match(prompt_ids)
        cache.pin(keys)
        return cached, keys

    def release(self, cache: Any, keys: Sequence[bytes]) -> None:
        cache.unpin(keys)
        self.active -= 1
        self._free.release()


def clip(ids: Sequence[int], max_tokens: int) -> tuple[list[int], bool]:
    """The ids the engine may emit within max_tokens, and whether the limit cut them."""
    return list(ids[:max_tokens]), len(ids) > max_tokens
