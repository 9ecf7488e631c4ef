"""Memory kept for clients is bounded in bytes: the Responses store (previous_response_id).

The store keeps each response once (its own new messages and its parent's id), bounded by an
approximate byte size with least-recently-used eviction; its bound shows in `serve --help` and
GET /health. The soak drives 1,000 turns of one growing chain through a real server process and
reads the server's RSS from /proc/PID/status: it stays flat (whole copies per response grew it by
about 0.5 GB over such a chain).
"""

from __future__ import annotations

import subprocess
import sys
import httpx
import pytest

from harnesscheck.reference_server.conversation import Message
from harnesscheck.reference_server.events import Part
from harnesscheck.reference_server.frontends.responses import ResponseStore
from harnesscheck.reference_server.launch import ServerProcess
from harnesscheck.replay.benchmarks.mixed import large_text

MODEL = "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4"
FAST = ["--decode-ms", "0", "--ttft-base-ms", "0", "--prefill-us-per-token", "0"]
# By hand from the store's accounting: 256 per entry, 192 per message, 64 per part, plus the text.
ENTRY, MESSAGE, PART = 256, 192, 64


def _turn(n: int) -> list[Message]:
    return [Message(role="user", text=f"u{n:04d}"),  # 5 characters
            Message(role="assistant", parts=[Part(kind="text", text=f"answer {n:04d}")])]  # 11 characters


TURN_BYTES = ENTRY + MESSAGE + 5 + MESSAGE + PART + 11


def _chain(store: ResponseStore, turns: int, prefix: str = "r") -> str | None:
    """Drive the store as the server does: history = get(previous) + new input, then put the
    history plus the answer with the previous id as parent. The last id (None once the chain broke)."""
    previous: str | None = None
    for n in range(turns):
        prior = store.get(previous) if previous is not None else []
        if prior is None:
            return None
        user, answer = _turn(n)
        rid = f"{prefix}{n}"
        store.put(rid, prior + [user, answer], parent=previous)
        previous = rid
    return previous


def test_a_chain_is_stored_once_per_turn_not_quadratically() -> None:
    store = ResponseStore(10_000, 1 << 30)
    last = _chain(store, 1000)
    assert last == "r999" and len(store) == 1000
    assert store.bytes == 1000 * TURN_BYTES  # linear; whole copies per response: ~500 times this
    history = store.get(last)
    assert history is not None and len(history) == 2000
    assert [m.text for m in history[0:4:2]] == ["u0000", "u0001"] and history[-1].parts[0].text == "answer 0999"
    again = store.get(last)
    assert all(a is b for a, b in zip(history, again))  # shared, not copied


def test_the_byte_bound_evicts_least_recently_used_conversations_whole() -> None:
    store = ResponseStore(10_000, 10 * 3 * TURN_BYTES)  # room for ten 3-turn conversations
    for c in range(10):
        _chain(store, 3, prefix=f"c{c}-")
    assert len(store) == 30 and store.bytes == 30 * TURN_BYTES
    assert store.get("c0-2") is not None  # c0 is now the most recently used conversation
    _chain(store, 3, prefix="c10-")
    assert store.bytes <= store.max_bytes
    assert store.get("c1-0") is None and store.get("c1-2") is None  # c1 went, whole
    assert store.get("c0-2") is not None and store.get("c10-2") is not None and len(store) == 30


def test_evicting_a_response_drops_its_continuations() -> None:
    store = ResponseStore(10_000, 1 << 30)
    _chain(store, 5)
    store.put("branch", store.get("r2") + _turn(99), parent="r2")
    assert store.get("r4") is not None  # least recently used now: the branch, then the chain's start
    store.capacity = 5  # the count bound: the next put evicts the branch, then r0 and all that continues it
    store.put("other", _turn(7))
    assert [rid for rid in ("r0", "r1", "r2", "r3", "r4", "branch", "other") if store.get(rid)] == ["other"]
    assert store.bytes == TURN_BYTES


def test_a_chain_larger_than_the_bound_is_not_kept() -> None:
    store = ResponseStore(10_000, 5 * TURN_BYTES)
    assert _chain(store, 20) is None  # the 6th turn pushed the chain's start out, and the chain with it
    assert store.bytes <= store.max_bytes


def test_a_history_that_does_not_continue_its_parent_is_stored_whole() -> None:
    store = ResponseStore(10_000, 1 << 30)
    _chain(store, 2)
    store.put("x", _turn(5), parent="r1")  # its messages are not the parent's: kept whole, no parent
    assert [m.text for m in store.get("x")][:1] == ["u0005"] and len(store.get("x")) == 2
    assert store.stats() == {"responses": 3, "bytes": 3 * TURN_BYTES, "max_bytes": 1 << 30, "max_responses": 10_000}


def test_serve_help_and_health_show_the_bound(server_factory) -> None:
    out = subprocess.run([sys.executable, "-m", "harnesscheck", "serve", "--help"], capture_output=True, text=True,
                         timeout=60).stdout
    assert "--responses-store-bytes" in out
    url = server_factory("--responses-store-bytes", "123456")
    stats = httpx.get(url + "/health", timeout=10).json()["responses_store"]
    assert stats == {"responses": 0, "bytes": 0, "max_bytes": 123456, "max_responses": 10000}


def _respond(client: httpx.Client, url: str, text: str, previous: str | None = None) -> httpx.Response:
    body = {"model": MODEL, "input": text, **({"previous_response_id": previous} if previous else {})}
    return client.post(url + "/v1/responses", json=body)


def test_a_small_store_over_http_forgets_old_conversations(server_factory) -> None:
    url = server_factory("--responses-store-bytes", "20000")
    with httpx.Client(timeout=30) as client:
        first = _respond(client, url, "Hello there.").json()["id"]
        second = _respond(client, url, "And then?", first)
        assert second.status_code == 200
        for n in range(40):  # other conversations, until the first one is pushed out
            assert _respond(client, url, f"Conversation {n}.").status_code == 200
        gone = _respond(client, url, "Still there?", second.json()["id"])
        assert gone.status_code == 400 and "not found" in gone.json()["error"]["message"]
        stats = client.get(url + "/health").json()["responses_store"]
    assert 0 < stats["bytes"] <= 20000 and stats["responses"] < 42


def _rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


@pytest.mark.slow
def test_soak_rss_flat_over_a_1000_turn_chain() -> None:
    """Warm-up: the chain's first 100 turns, then one count_tokens of a prompt larger than the chain
    will ever be, so the allocator holds the working set of tokenizing the chain's longest prompt
    (RSS follows the largest prompt tokenized, whatever is stored). The server runs with one malloc
    arena: with glibc's default of one per thread, each worker thread keeps its own high-water mark
    and RSS grows with the chain's prompt by about 16 kB a turn, stored state or not. Then 900 more
    turns: RSS within 10% of the warm figure (measured here: +2%)."""
    with ServerProcess(FAST, env={"MALLOC_ARENA_MAX": "1"}) as server, httpx.Client(timeout=60) as client:
        previous = None
        samples: list[int] = []
        for n in range(1000):
            answer = _respond(client, server.url, "Continue.", previous)
            assert answer.status_code == 200, answer.text
            previous = answer.json()["id"]
            if n == 99:
                big = {"model": MODEL, "messages": [{"role": "user", "content": large_text(400_000)}]}
                counted = client.post(server.url + "/v1/messages/count_tokens", json=big,
                                      headers={"anthropic-version": "2023-06-01"})
                assert counted.status_code == 200
                warm = _rss_kb(server.proc.pid)
            if n >= 100 and n % 50 == 49:
                samples.append(_rss_kb(server.proc.pid))
        stats = client.get(server.url + "/health").json()["responses_store"]
        prompt = answer.json()["usage"]["input_tokens"]
    assert stats["responses"] == 1000 and prompt > 20_000  # one chain, all of it in the last prompt
    # Flat: the last five samples (turns 800-1000) within 10% of the first five after the warm-up
    # (turns 150-350), averaged, so one allocator step does not decide; a leak of a few kB a turn
    # still fails. Measured: +2% quiet; +8% once on a machine loaded by two other test workers.
    start, end = sum(samples[:5]) / 5, sum(samples[-5:]) / 5
    assert end <= 1.10 * max(start, warm), f"RSS grew from {start:.0f} kB to {end:.0f} kB ({warm=}, {samples})"
