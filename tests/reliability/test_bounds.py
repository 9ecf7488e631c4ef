"""The reference server's byte bounds on data from outside: the Responses store counts text in its
encoded bytes (a 1 MB history of non-ASCII text is 1 MB, not the quarter its character count says),
the prefix cache holds at most its byte bound, and every limit is stated in `serve --help` and in
GET /health. (The kit's own bounds: tests/replay/test_http1.py, tests/replay/test_capture_bounds.py.)
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections.abc import Callable

import httpx

from harnesscheck.reference_server.conversation import Message
from harnesscheck.reference_server.frontends.responses import ResponseStore, approx_bytes
from harnesscheck.reference_server.prefix_cache import BLOCK_BYTES, PrefixCache

MIB = 1024 * 1024
NEMOTRON = "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4"


def test_a_non_ascii_history_is_counted_at_its_encoded_size() -> None:
    """1 MiB of text in each of 1-, 2-, 3- and 4-byte UTF-8 characters: counted at least at its UTF-8
    size (before: its character count, a quarter of it for emoji); a store bounded at 1 MiB cannot
    keep the 4-byte one."""
    for char in ("a", "é", "語", "😀"):
        text = char * (MIB // len(char.encode()))
        size = len(text.encode())
        assert MIB - 3 <= size <= MIB
        assert size <= approx_bytes([Message(role="user", text=text)]) < size + 4096, char
    store = ResponseStore(capacity=100, max_bytes=MIB)
    store.put("resp_emoji", [Message(role="user", text="😀" * (MIB // 4))])
    assert len(store) == 0 and store.bytes == 0  # over the bound: not kept
    store.put("resp_small", [Message(role="user", text="😀" * 1000)])
    assert len(store) == 1 and store.bytes >= 4000


def test_a_non_ascii_history_over_http_is_counted_at_its_encoded_size(
        server_factory: Callable[..., str]) -> None:
    """A 1 MB (UTF-8) history of emoji sent to /v1/responses: /health's store grows by at least 1 MB."""
    url = server_factory("--context-window", "0")  # 262144 emoji are more tokens than the default window

    def stored() -> int:
        return httpx.get(url + "/health", timeout=30).json()["responses_store"]["bytes"]

    before = stored()
    text = "😀" * (MIB // 4)
    body = json.dumps({"model": NEMOTRON, "input": text, "max_output_tokens": 16},
                      ensure_ascii=False).encode()
    r = httpx.post(url + "/v1/responses", content=body, timeout=120,
                   headers={"content-type": "application/json"})
    assert r.status_code == 200, r.text[:300]
    grown = stored() - before
    print(f"\nresponses store: a {len(text.encode()) // 1024} KiB emoji history ({len(text)} characters) "
          f"counted as {grown // 1024} KiB")
    assert grown >= MIB


def test_the_prefix_cache_holds_at_most_its_byte_bound() -> None:
    rng = random.Random(7)
    cache = PrefixCache(block_size=16, capacity_blocks=1 << 20, max_bytes=100 * BLOCK_BYTES)
    for _ in range(50):
        cache.insert([rng.randrange(50_000) for _ in range(16 * 40)])
        assert len(cache) <= 100 and cache.stats.bytes <= cache.stats.max_bytes == 100 * BLOCK_BYTES
    assert len(cache) == 100 and cache.stats.evictions == 50 * 40 - 100


# Run in a fresh process, which measures its own resident set: a prefix cache bounded at 16 MiB filled
# three times over (every insert evicting), as a long run fills the server's.
_FILL_AND_MEASURE = """
import gc, os, random
from harnesscheck.reference_server.prefix_cache import PrefixCache
def rss():
    return int(open(f"/proc/{os.getpid()}/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
rng = random.Random(0)
cache = PrefixCache(block_size=16, capacity_blocks=1 << 30, max_bytes=16 << 20)
gc.collect()
start = peak = rss()
for n in range(3 * cache.capacity // 8):
    cache.insert([rng.randrange(50_000) for _ in range(16 * 8)])
    if n % 256 == 0:
        peak = max(peak, rss())
print(max(peak, rss()) - start, len(cache))
"""


def test_the_prefix_cache_byte_bound_holds_for_the_memory_it_takes() -> None:
    """Issue 43: a block was counted as 256 bytes where the process grew ~350-450 bytes a block once
    the cache evicts (its key, LRU and child-count entries, and the allocator's share), so a 16 MiB
    bound let the cache grow the process by 22 MiB (and the 64 MiB default never bound: 65,536 blocks
    came first). The growth of a real process now stays within the bound."""
    done = subprocess.run([sys.executable, "-c", _FILL_AND_MEASURE], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    grown, blocks = map(int, done.stdout.split())
    print(f"\nprefix cache bounded at 16 MiB: {blocks} blocks, the process grew {grown / MIB:.1f} MiB "
          f"({grown / blocks:.0f} B a block; counted as {BLOCK_BYTES})")
    assert grown <= 16 * MIB
    assert grown / blocks <= BLOCK_BYTES


def test_every_limit_is_in_help_and_health(server_factory: Callable[..., str]) -> None:
    help_text = subprocess.run([sys.executable, "-m", "harnesscheck", "serve", "--help"], capture_output=True,
                               text=True, timeout=60).stdout
    for flag in ("--max-body-bytes", "--max-concurrency", "--max-output-tokens", "--prefix-cache-bytes",
                 "--responses-store-bytes"):
        assert flag in help_text, flag
    url = server_factory("--prefix-cache-bytes", str(2 * MIB), "--responses-store-bytes", str(3 * MIB),
                         "--max-body-bytes", str(4 * MIB))
    health = httpx.get(url + "/health", timeout=30).json()
    assert health["limits"] == {**health["limits"], "prefix_cache_bytes": 2 * MIB,
                                "responses_store_bytes": 3 * MIB, "max_body_bytes": 4 * MIB}
    assert health["cache"]["max_bytes"] == 2 * MIB and health["responses_store"]["max_bytes"] == 3 * MIB
