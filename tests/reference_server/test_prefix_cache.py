"""The scripted engine's prefix cache evicts as vLLM, SGLang and Dynamo do: leaf-first, LRU among the
evictable blocks. Every expected hit count below is worked out by hand in the comments.

Notation: a prompt is a list of blocks (S1 S2 A1 ...) plus one trailing token, so `match` (which
leaves at least one token to compute) can hit every full block. LRU orders are written oldest first.
"""

from __future__ import annotations

from harnesscheck.reference_server.prefix_cache import PrefixCache, block_keys

BLOCK = 2
_NAMES: dict[str, int] = {}  # block name -> a number of its own, so distinct names are distinct ids


def ids(*blocks: str, block_size: int = BLOCK) -> list[int]:
    """Token ids of the named blocks (each name stands for block_size fixed ids) and one trailing token."""
    out: list[int] = []
    for name in blocks:
        base = 100 * _NAMES.setdefault(name, len(_NAMES) + 1)
        out += [base + i for i in range(block_size)]
    return out + [7]


def cached_blocks(cache: PrefixCache, *blocks: str) -> int:
    """How many leading blocks of this chain the cache holds, looked up without touching the LRU."""
    n = 0
    for key in block_keys(ids(*blocks, block_size=cache.block_size)[:-1], cache.block_size):
        if key not in cache:
            break
        n += 1
    return n


def request(cache: PrefixCache, *blocks: str) -> int:
    """One request as the engine runs it without overlap: match at admission, then the prompt inserted."""
    hit, _ = cache.match(ids(*blocks, block_size=cache.block_size))
    cache.insert(ids(*blocks, block_size=cache.block_size))
    return hit


def test_one_eviction_costs_a_chain_its_last_block_not_its_head() -> None:
    # The case. Block size 4, capacity 4. P = P1 P2 P3 P4 (+1 token) is cached: 16 tokens hit.
    # One block Q1 inserted elsewhere makes 5 blocks: the evictable ones are the leaves P4 and Q1, and
    # P4 is the least recent, so P keeps P1..P3 and hits 12 tokens. (Evicting the chain head P1, as
    # before, left 3 blocks stored and 0 tokens hit.)
    cache = PrefixCache(block_size=4, capacity_blocks=4)
    prompt = ids("P1", "P2", "P3", "P4", block_size=4)
    cache.insert(prompt)
    assert cache.match(prompt)[0] == 16
    cache.insert(ids("Q1", block_size=4))
    assert len(cache) == 4 and cache.stats.evictions == 1
    assert cached_blocks(cache, "P1", "P2", "P3", "P4") == 3
    assert cached_blocks(cache, "Q1") == 1
    assert cache.match(prompt)[0] == 12  # 3 blocks' worth


def test_prompts_sharing_a_head_hit_counts_by_hand() -> None:
    # Block size 2, capacity 5. S1 S2 is a shared head (a system prompt); branches A, B, C follow it.
    #
    # R1 S1 S2 A1 A2: hit 0. Insert, touching A2, A1, S2, S1 (head most recent): [A2 A1 S2 S1].
    # R2 S1 S2 B1 B2: hit S1 S2 = 4 tokens. Insert B1 B2: [A2 A1 B2 B1 S2 S1], 6 > 5. Leaves: A2, B2;
    #    A2 is older: evicted. [A1 B2 B1 S2 S1].
    # R3 S1 S2 A1 A2: hit S1 S2 A1 = 6 tokens (evicting heads first, R2 had dropped A1 and left A2
    #    orphaned: 4 tokens).
    #    Touch A1 S2 S1: [B2 B1 A1 S2 S1]; insert A2: [B2 B1 A2 A1 S2 S1]. Leaves B2, A2: B2 evicted.
    #    [B1 A2 A1 S2 S1].
    # R4 S1 S2 C1: hit 4. Insert C1: [B1 A2 A1 C1 S2 S1]. B1 is now a leaf and the oldest: evicted.
    #    [A2 A1 C1 S2 S1].
    # R5 S1 S2 B1 B2: hit 4 (B1 is gone). Insert B1 B2: [A2 A1 C1 B2 B1 S2 S1], two over. A2 (leaf,
    #    oldest) goes, which makes A1 a leaf, and it is the oldest: it goes too. [C1 B2 B1 S2 S1].
    # R6 S1 S2 A1 A2: hit 4 (A1 is gone). Insert A1 A2: [C1 B2 B1 A2 A1 S2 S1], two over: C1 (leaf, oldest),
    #    then B2. [B1 A2 A1 S2 S1]. The shared head is never evicted: every request touched it last.
    # Hits per request: 0, 4, 6, 4, 4, 4 tokens, 22 in all; evictions 1 + 1 + 1 + 2 + 2 = 7.
    cache = PrefixCache(block_size=BLOCK, capacity_blocks=5)
    pattern = [("S1", "S2", "A1", "A2"), ("S1", "S2", "B1", "B2"), ("S1", "S2", "A1", "A2"),
               ("S1", "S2", "C1"), ("S1", "S2", "B1", "B2"), ("S1", "S2", "A1", "A2")]
    hits = []
    for n, blocks in enumerate(pattern):
        hits.append(request(cache, *blocks))
        if n == 2:  # after R3: [B1 A2 A1 S2 S1]
            assert cached_blocks(cache, "S1", "S2", "A1", "A2") == 4
            assert cached_blocks(cache, "S1", "S2", "B1", "B2") == 3
    assert hits == [0, 4, 6, 4, 4, 4]
    assert cache.stats.hit_tokens == 22 and cache.stats.evictions == 7
    # final state [B1 A2 A1 S2 S1]
    assert len(cache) == 5 and cache.stats.blocks == 5
    assert [cached_blocks(cache, *blocks) for blocks in pattern[:4]] == [4, 3, 4, 2]


def test_pinned_blocks_are_kept_then_evicted_leaf_first_once_released() -> None:
    # Block size 2, capacity 3. A1 A2 cached and pinned by a running request; C1 then D1 inserted:
    # [A2 A1 C1 D1] is one over. A2 is the oldest leaf but pinned, A1 is pinned and A2's parent, so C1
    # goes (younger, but the only evictable block). After the release, E1 makes [A2 A1 D1 E1]: now A2
    # goes first, and A keeps its head: a request for A hits A1 = 2 tokens.
    cache = PrefixCache(block_size=BLOCK, capacity_blocks=3)
    cache.insert(ids("A1", "A2"))
    hit, keys = cache.match(ids("A1", "A2"))
    assert hit == 4
    cache.pin(keys)
    cache.insert(ids("C1"))
    cache.insert(ids("D1"))
    assert cached_blocks(cache, "A1", "A2") == 2  # pinned: kept
    assert (cached_blocks(cache, "C1"), cached_blocks(cache, "D1")) == (0, 1)
    assert cache.stats.pinned_blocks == 2
    cache.unpin(keys)
    cache.insert(ids("E1"))
    assert cached_blocks(cache, "A1", "A2") == 1 and cache.stats.pinned_blocks == 0
    assert cache.match(ids("A1", "A2"))[0] == 2


def test_generated_tokens_join_the_chain() -> None:
    # A turn's prompt + output is inserted as one chain, so the next turn, whose prompt repeats the
    # output verbatim and adds a block, hits the prompt and the output: 3 blocks = 6 tokens.
    cache = PrefixCache(block_size=BLOCK, capacity_blocks=16)
    prompt = ids("U1", "U2")[:-1]
    output = ids("O1")[:-1]
    cache.insert(prompt)
    cache.insert(prompt + output)
    assert cache.match(prompt + output + ids("U3"))[0] == 6
