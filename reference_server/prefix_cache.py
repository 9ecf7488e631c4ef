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

The cache is bounded in blocks and in bytes: it holds at most ``min(capacity_blocks, max_bytes //
BLOCK_BYTES)`` blocks, ``BLOCK_BYTES`` being what one block costs the process here (its key, its LRU
entry, its parent's child count, and the allocator's share): measured as the growth of a process's
resident set, 190-240 bytes a block while the cache fills and 350-370 once it evicts (a server under
churn: ~370-450), rounded up to 512; 256 (tracemalloc's count of the objects alone) let a 16 MiB bound
grow the process by 22 MiB. ``stats`` shows ``bytes`` and ``max_bytes`` (GET /health, ``serve
--prefix-cache-bytes``); the default byte bound (32 MiB) binds at the default 65,536 blocks.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Container, Sequence
from dataclasses import dataclass

BLOCK_BYTES = 512  # the process's memory for one cached block (a 16-byte key, its LRU entry, its parent's
# child count, the allocator's share), measured (module docstring; tests/reliability/test_bounds.py)
DEFAULT_MAX_BYTES = 32 * 1024 * 1024  # the byte bound of a prefix cache (serve --prefix-cache-bytes)


@dataclass(slots=True)
class CacheStats:
    queries: int = 0
    query_tokens: int = 0
    hit_tokens: int = 0
    blocks: int = 0
    pinned_blocks: int = 0
    evictions: int = 0

    def count_query(self, prompt_tokens: int, hit_tokens: int) -> None:
        """Count one lookup: the prompt's length and how many of its tokens were found cached."""
        self.queries += 1
        self.query_tokens += prompt_tokens
        self.hit_tokens += hit_tokens


@dataclass(slots=True)
class PrefixCacheStats(CacheStats):
    """The counts, and the bytes the blocks take (``BLOCK_BYTES`` each) against the bound."""

    bytes: int = 0
    max_bytes: int = 0


def block_keys(ids: Sequence[int], block_size: int) -> list[bytes]:
    keys = []
    prev = b""
    for start in range(0, len(ids) - block_size + 1, block_size):
        block = ids[start : start + block_size]
        prev = hashlib.blake2b(prev + b"".join(i.to_bytes(4, "little") for i in block), digest_size=16).digest()
        keys.append(prev)
    return keys


def cached_chain(ids: Sequence[int], block_size: int, cached: Container[bytes]) -> list[bytes]:
    """The keys of a prompt's leading blocks that ``cached`` holds: full blocks only, and at least one
    token is left to compute (the last prompt position's logits are needed)."""
    hit: list[bytes] = []
    for key in block_keys(ids[: max(len(ids) - 1, 0)], block_size):
        if key not in cached:
            break
        hit.append(key)
    return hit


class PinCounts:
    """How many running requests pin each block; a block no request pins is absent."""

    def __init__(self) -> None:
        self._counts: dict[bytes, int] = {}

    def __contains__(self, key: object) -> bool:
        return key in self._counts

    def __len__(self) -> int:
        return len(self._counts)

    def pin(self, keys: Sequence[bytes]) -> None:
        for key in keys:
            self._counts[key] = self._counts.get(key, 0) + 1

    def unpin(self, keys: Sequence[bytes]) -> None:
        for key in keys:
            left = self._counts.get(key, 0) - 1
            if left > 0:
                self._counts[key] = left
            else:
                self._counts.pop(key, None)


class PrefixCache:
    """Hash-chained blocks with pins and leaf-first LRU eviction (see the module docstring).

    `match` and `pin` at admission, `insert` when a prompt (then prompt + output) is computed,
    `unpin` when the request ends; the engines call them through `engines.base.Slots`."""

    def __init__(self, *, block_size: int = 16, capacity_blocks: int = 1 << 16,
                 max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.block_size = block_size
        self.max_bytes = max_bytes
        self.capacity = min(capacity_blocks, max_bytes // BLOCK_BYTES)
        self._lru: OrderedDict[bytes, bytes | None] = OrderedDict()  # key -> parent key; oldest first
        self._children: dict[bytes, int] = {}  # key -> cached blocks whose parent it is (absent: 0)
        self._pins = PinCounts()
        self.stats = PrefixCacheStats(max_bytes=max_bytes)

    def __contains__(self, key: bytes) -> bool:
        return key in self._lru

    def __len__(self) -> int:
        return len(self._lru)

    def match(self, ids: Sequence[int]) -> tuple[int, list[bytes]]:
        """Cached tokens for this prompt (full blocks, leaving at least one token to compute)."""
        hit = cached_chain(ids, self.block_size, self._lru)
        self._touch(hit)
        self.stats.count_query(len(ids), len(hit) * self.block_size)
        return len(hit) * self.block_size, hit

    def pin(self, keys: Sequence[bytes]) -> None:
        self._pins.pin(keys)
        self.stats.pinned_blocks = len(self._pins)

    def unpin(self, keys: Sequence[bytes]) -> None:
        self._pins.unpin(keys)
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
        self.stats.bytes = len(self._lru) * BLOCK_BYTES

    def clear(self) -> None:
        self._lru.clear()
        self._children.clear()
        self.stats.blocks = self.stats.bytes = 0
