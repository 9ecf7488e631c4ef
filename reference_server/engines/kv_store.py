"""A bounded LRU store of real KV tensors, one entry per full block of tokens, keyed by hash chains.

Keys come from `prefix_cache.block_keys`: block i's key names the whole prefix up to block i, so a
lookup walks the chain and stops at the first block it lacks. Each entry holds that block's key and
value tensors for every layer, copied out of a request's cache (on the cache's own device: a model
on CUDA keeps its blocks in GPU memory) so the request's own tensors can be freed. When every
layer's tensors have one shape and dtype (`[batch=1, kv_heads, tokens, head_dim]`), a block is one
tensor `[2 * layers, 1, kv_heads, block_size, head_dim]` (keys and values of layer i at 2i, 2i+1):
one copy per block on insert and one concatenation per hit on `gather`, rather than one per layer
(a 52K-token prompt of a 28-layer model is 3,250 blocks of 16: 3,250 copies instead of 182,000
kernel launches on a GPU). Layers of different shapes are kept as per-layer pairs. `gather`
concatenates the blocks of a hit back into per-layer tensors that seed a new request's cache.

Eviction is least recently used, tails first: a hit or an insert touches its chain's blocks from
the last to the first, so a chain's first block is its most recent and is evicted last (a middle
block evicted first would orphan the blocks after it). Blocks pinned by a running request (from
admission, where its cached-token count is reported, to its end) are never evicted, so the count
reported is the count reused.

Thread safety: a lock guards every method; the engine calls it from the event loop (match, pin)
and from its compute thread (gather, insert).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from harnesscheck.reference_server.prefix_cache import CacheStats, PinCounts, block_keys, cached_chain

LayerKV = tuple[Any, Any]  # (keys, values) torch tensors, [1, kv_heads, tokens, head_dim]
# A stored block: one packed tensor [2 * layers, 1, kv_heads, block_size, head_dim], or per-layer pairs
# where the layers' shapes differ.
Block = Any


def _unpack(entry: Block) -> tuple[LayerKV, ...]:
    """A block's per-layer (keys, values), packed or not."""
    if isinstance(entry, tuple):
        return entry
    return tuple((entry[2 * i], entry[2 * i + 1]) for i in range(entry.shape[0] // 2))


@dataclass(slots=True)
class KVStats(CacheStats):
    """The prefix cache's counts, and the blocks inserted and the bytes held."""

    inserted_blocks: int = 0
    bytes: int = 0


class KVBlockStore:
    def __init__(self, *, block_size: int, capacity_blocks: int) -> None:
        if block_size < 1 or capacity_blocks < 0:
            raise ValueError("block_size must be >= 1 and capacity_blocks >= 0")
        self.block_size = block_size
        self.capacity = capacity_blocks
        self._blocks: OrderedDict[bytes, Block] = OrderedDict()
        self._pins = PinCounts()
        self._lock = threading.Lock()
        self.stats = KVStats()
        self._block_bytes = 0

    def __len__(self) -> int:
        return len(self._blocks)

    def __contains__(self, key: bytes) -> bool:
        return key in self._blocks

    def match(self, ids: Sequence[int]) -> tuple[int, list[bytes]]:
        """Tokens of this prompt whose KV is stored (full blocks; at least one token is left to compute,
        since the last prompt position's logits are needed), and the keys of those blocks."""
        with self._lock:
            hit = cached_chain(ids, self.block_size, self._blocks)
            self._touch(hit)
            self.stats.count_query(len(ids), len(hit) * self.block_size)
        return len(hit) * self.block_size, hit

    def pin(self, keys: Sequence[bytes]) -> None:
        with self._lock:
            self._pins.pin(keys)
            self.stats.pinned_blocks = len(self._pins)

    def unpin(self, keys: Sequence[bytes]) -> None:
        with self._lock:
            self._pins.unpin(keys)
            self.stats.pinned_blocks = len(self._pins)
            self._evict()

    def gather(self, keys: Sequence[bytes]) -> list[LayerKV]:
        """Per-layer (keys, values) for the blocks of a hit, concatenated along the token axis."""
        import torch

        with self._lock:
            missing = [k for k in keys if k not in self._blocks]
            if missing:  # only possible for unpinned keys: the engine pins before it gathers
                raise KeyError(f"{len(missing)} block(s) of the hit were evicted")
            entries = [self._blocks[k] for k in keys]
        if not entries:
            return []
        if all(not isinstance(e, tuple) for e in entries):  # packed blocks: one concatenation
            full = torch.cat(entries, dim=-2)
            return [(full[2 * i], full[2 * i + 1]) for i in range(full.shape[0] // 2)]
        per_layer = [_unpack(e) for e in entries]
        return [(torch.cat([e[i][0] for e in per_layer], dim=-2), torch.cat([e[i][1] for e in per_layer], dim=-2))
                for i in range(len(per_layer[0]))]

    def insert(self, ids: Sequence[int], layers: Sequence[LayerKV]) -> int:
        """Store the full blocks of `ids` whose KV `layers` holds (token i of ids at position i);
        returns how many blocks were new."""
        if not layers:
            return 0
        import torch

        length = min(len(ids), int(layers[0][0].shape[-2]))
        keys = block_keys(ids[:length], self.block_size)
        first = layers[0][0]
        packed = all(t.shape == first.shape and t.dtype == first.dtype and t.device == first.device
                     for kv in layers for t in kv)
        with self._lock:
            new = 0
            for n, key in enumerate(keys):
                if key in self._blocks:
                    continue
                a, b = n * self.block_size, (n + 1) * self.block_size
                entry: Block
                if packed:  # one new tensor per block (torch.stack copies the slices)
                    entry = torch.stack([t[..., a:b, :] for kv in layers for t in kv])
                else:
                    entry = tuple((k[..., a:b, :].clone(), v[..., a:b, :].clone()) for k, v in layers)
                if not self._block_bytes:
                    self._block_bytes = sum(t.numel() * t.element_size() for kv in _unpack(entry) for t in kv)
                self._blocks[key] = entry
                new += 1
            self._touch(keys)
            self.stats.inserted_blocks += new
            self._evict()
        return new

    def _touch(self, keys: Sequence[bytes]) -> None:
        for key in reversed(keys):  # the chain's first block ends up most recent
            if key in self._blocks:
                self._blocks.move_to_end(key)

    def _evict(self) -> None:
        over = len(self._blocks) - self.capacity
        if over > 0:
            for key in list(self._blocks):
                if over <= 0:
                    break
                if key in self._pins:
                    continue
                del self._blocks[key]
                over -= 1
                self.stats.evictions += 1
        self.stats.blocks = len(self._blocks)
        self.stats.bytes = len(self._blocks) * self._block_bytes

    def clear(self) -> None:
        with self._lock:
            self._blocks.clear()
            self.stats.blocks = 0
            self.stats.bytes = 0
