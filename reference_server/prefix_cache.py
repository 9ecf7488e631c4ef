"""A prefix cache over blocks of token ids keyed by hash chains (as vLLM, Dynamo and SGLang do).

Block i's key hashes block i's ids together with block i-1's key, so a key names the whole prefix
up to it. Only full blocks are cached. Blocks in use by a running request are pinned and never
evicted; the rest are evicted least recently used first. Generated tokens join the cache when a
request ends, so a next turn that repeats the output verbatim reuses them.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(slots=True)
class CacheStats:
    queries: int = 0
    query_tokens: int = 0
    hit_tokens: int = 0
    blocks: int = 0
    pinned_blocks: int = 0
    evictions: int = 0


def block_keys(ids: Sequence[int], block_size: int) -> list[bytes]:
    keys = []
    prev = b""
    for start in range(0, len(ids) - block_size + 1, block_size):
        block = ids[start : start + block_size]
        prev = hashlib.blake2b(prev + b"".join(i.to_bytes(4, "little") for i in block), digest_size=16).digest()
        keys.append(prev)
    return keys


class PrefixCache:
    def __init__(self, *, block_size: int = 16, capacity_blocks: int = 1 << 16) -> None:
        self.block_size = block_size
        self.capacity = capacity_blocks
        self._lru: OrderedDict[bytes, None] = OrderedDict()
        self._pins: dict[bytes, int] = {}
        self.stats = CacheStats()

    def match(self, ids: Sequence[int]) -> tuple[int, list[bytes]]:
        """Cached tokens for this prompt (full blocks, leaving at least one token to compute)."""
        keys = block_keys(ids[: max(len(ids) - 1, 0)], self.block_size)
        hit: list[bytes] = []
        for key in keys:
            if key not in self._lru:
                break
            hit.append(key)
            self._lru.move_to_end(key)
        self.stats.queries += 1
        self.stats.query_tokens += len(ids)
        self.stats.hit_tokens += len(hit) * self.block_size
        return len(hit) * self.block_size, hit

    def pin(self, keys: Sequence[bytes]) -> None:
        for key in keys:
            self._pins[key] = self._pins.get(key, 0) + 1
        self.stats.pinned_blocks = len(self._pins)

    def unpin(self, keys: Sequence[bytes]) -> None:
        for key in keys:
            left = self._pins.get(key, 0) - 1
            if left > 0:
                self._pins[key] = left
            else:
                self._pins.pop(key, None)
        self.stats.pinned_blocks = len(self._pins)

    def insert(self, ids: Sequence[int]) -> None:
        for key in block_keys(ids, self.block_size):
            self._lru[key] = None
            self._lru.move_to_end(key)
        self._evict()
        self.stats.blocks = len(self._lru)

    def _evict(self) -> None:
        over = len(self._lru) - self.capacity
        if over <= 0:
            return
        for key in list(self._lru):
            if over <= 0:
                break
            if key in self._pins:
                continue
            del self._lru[key]
            over -= 1
            self.stats.evictions += 1

    def clear(self) -> None:
        self._lru.clear()
        self.stats.blocks = 0
