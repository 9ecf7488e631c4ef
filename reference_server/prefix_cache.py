"""A prefix cache over blocks of token ids keyed by hash chains (as vLLM, Dynamo and SGLang do).

Block i's key hashes block i's ids together with block i-1's key, so a key names the whole prefix
up to it, and the cached blocks form a tree (a block's parent is the block before it). Only full
blocks are cached. Generated tokens join the cache when a request ends (the prompt and the output
as one chain), so a next turn that repeats the output verbatim reuses them.

Eviction is as the real engines' KV managers do it: a block is evictable only when it is not pinned
by a running request and no cached block depends on it (it is a leaf of the tree), and among the
evictable blocks the least recently used goes first. A chain therefore loses its tail first and
keeps its head: a prefix that lost its last block still hits on the blocks before it. (vLLM frees a
request's blocks tail first into its LRU free queue; SGLang's radix cache evicts LRU leaves.)
A hit or an insert touches its chain from the last block to the first, so a block is always more
recent than the blocks after it.
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
    """Hash-chained blocks with pins and leaf-first LRU eviction (see the module docstring).

    `match` and `pin` at admission, `insert` when a prompt (then prompt + output) is computed,
    `unpin` when the request ends; the engines call them through `engines.base.Slots`."""

    def __init__(self, *, block_size: int = 16, capacity_blocks: int = 1 << 16) -> None:
        self.block_size = block_size
        self.capacity = capacity_blocks
        self._lru: OrderedDict[bytes, bytes | None] = OrderedDict()  # key -> parent key; oldest first
        self._children: dict[bytes, int] = {}  # key -> cached blocks whose parent it is (absent: 0)
        self._pins: dict[bytes, int] = {}
        self.stats = CacheStats()

    def __contains__(self, key: bytes) -> bool:
        return key in self._lru

    def __len__(self) -> int:
        return len(self._lru)

    def match(self, ids: Sequence[int]) -> tuple[int, list[bytes]]:
        """Cached tokens for this prompt (full blocks, leaving at least one token to compute)."""
        keys = block_keys(ids[: max(len(ids) - 1, 0)], self.block_size)
        hit: list[bytes] = []
        for key in keys:
            if key not in self._lru:
                break
            hit.append(key)
        self._touch(hit)
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
        keys = block_keys(ids, self.block_size)
        parent: bytes | None = None
        for key in keys:
            if key not in self._lru:
                self._lru[key] = parent
                if parent is not None:
                    self._children[parent] = self._children.get(parent, 0) + 1
            parent = key
        self._touch(keys)
        self._evict()

    def _touch(self, keys: Sequence[bytes]) -> None:
        for key in reversed(keys):  # the chain's first block ends up the most recent
            self._lru.move_to_end(key)

    def _evictable(self) -> bytes | None:
        """The least recently used block that is neither pinned nor a parent of a cached block."""
        for key in self._lru:
            if key not in self._pins and key not in self._children:
                return key
        return None

    def _evict(self) -> None:
        while len(self._lru) > self.capacity:
            key = self._evictable()
            if key is None:  # everything left is pinned (or holds a pinned block up)
                break
            parent = self._lru.pop(key)
            if parent is not None:
                left = self._children[parent] - 1
                if left:
                    self._children[parent] = left
                else:
                    del self._children[parent]
            self.stats.evictions += 1
        self.stats.blocks = len(self._lru)

    def clear(self) -> None:
        self._lru.clear()
        self._children.clear()
        self.stats.blocks = 0
