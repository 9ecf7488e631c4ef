"""The kit against broken servers (tests/reliability/hostile.py): every case gives a clear failing
check within the deadline, the run goes on to the next check, no kit error, bounded time and memory.

Two levels: the wire client alone (each case ends in a Transcript whose ``error`` says what went
wrong, or whose frames the grammar rejects, within the deadline; sync and async clients), and the
real suite run as `harnesscheck check` does (a pytest subprocess), four runs with a case per API.
"""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from harnesscheck.conformance.grammar import validate_for
from harnesscheck.conformance.runner import SuiteOptions, run_suite
from harnesscheck.protocol.wire import client
from harnesscheck.protocol.wire.transcript import Transcript
from tests.reliability.hostile import CASES, HostileServer

DEADLINE = 2.0
SLACK = 0.75  # scheduling on a loaded 2-core machine
PATHS = {"anthropic": "/v1/messages", "chat": "/v1/chat/completions", "responses": "/v1/responses"}
BODIES = {"anthropic": {"model": "m", "max_tokens": 16, "stream": True, "messages": [{"role": "user", "content": "hi"}]},
          "chat": {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]},
          "responses": {"model": "m", "stream": True, "input": "hi"}}

# What each case must come to in a transcript: a transport error of this kind, or (None) grammar
# findings with one of these rule suffixes (the transport was fine, the content is not).
EXPECTED: dict[str, tuple[str | None, tuple[str, ...]]] = {
    "truncated": ("protocol", ()),
    "never_ends": ("deadline", ()),
    "trickle": ("deadline", ()),
    "huge_frame": ("too_large", ()),
    "invalid_utf8": (None, ("GRAMMAR-JSON",)),
    "wrong_content_type": ("content_type", ()),
    "http500_mid_stream": ("protocol", ()),
    "reset": ("reset", ()),
    "reset_mid_stream": ("reset", ()),
    "non_json": (None, ("GRAMMAR-JSON",)),
    "no_done": (None, ("GRAMMAR-DONE", "GRAMMAR-STOP-MISSING", "GRAMMAR-COMPLETED")),
    "slow_headers": ("deadline", ()),
}
assert set(EXPECTED) == set(CASES)


def judge(case: str, api: str, t: Transcript, elapsed: float) -> None:
    kind, rules = EXPECTED[case]
    assert elapsed < DEADLINE + SLACK, (case, api, elapsed)
    if kind is not None:
        assert t.error_kind == kind, (case, api, t.error_kind, t.error)
        assert isinstance(t.error, str) and 10 < len(t.error) < 500 and "Traceback" not in t.error, t.error
    else:
        assert t.error is None, (case, api, t.error)
        findings = validate_for(api, t, t.request_body)
        assert any(f.rule.endswith(rules) for f in findings), (case, api, [f.rule for f in findings])
    t.excerpt(None)  # renders (a failing check shows it)


@pytest.fixture(scope="module")
def servers() -> Any:
    started = {name: HostileServer(name, max_seconds=20).start() for name in CASES}
    yield started
    for server in started.values():
        server.stop()


def test_sync_client_against_every_case(servers: dict[str, HostileServer]) -> None:
    jobs = [(case, api) for case in CASES for api in PATHS]

    def one(job: tuple[str, str]) -> tuple[str, str, Transcript, float]:
        case, api = job
        t0 = time.monotonic()
        t = client.stream_request(servers[case].url + PATHS[api], json_body=BODIES[api], timeout=DEADLINE, api=api)
        return case, api, t, time.monotonic() - t0

    # The huge frame first, alone: 8 MiB through a GIL shared with a dozen busy threads can take
    # longer than the deadline, and this case is about the frame limit.
    results = [one(job) for job in jobs if job[0] == "huge_frame"]
    with ThreadPoolExecutor(12) as pool:
        results += list(pool.map(one, [job for job in jobs if job[0] != "huge_frame"]))
    for case, api, t, elapsed in results:
        judge(case, api, t, elapsed)
    print(f"\nhostile: {len(results)} sync exchanges over {len(CASES)} cases, slowest "
          f"{max(r[3] for r in results):.2f} s (deadline {DEADLINE} s)")
    # The huge frame was cut off at the decoder's limit, not read to its end.
    assert servers["huge_frame"].most_bytes_on_one_connection < servers["huge_frame"].huge_cap // 2


def test_async_client_against_every_case(servers: dict[str, HostileServer]) -> None:
    import httpx

    async def one(shared: httpx.AsyncClient, case: str, api: str) -> tuple[str, str, Transcript, float]:
        t0 = time.monotonic()
        t = await client.astream_request(servers[case].url + PATHS[api], json_body=BODIES[api], timeout=DEADLINE,
                                         api=api, client=shared)
        return case, api, t, time.monotonic() - t0

    async def main() -> list[tuple[str, str, Transcript, float]]:
        # One client: creating an httpx client costs ~50 ms of loop time (its SSL context).
        async with httpx.AsyncClient() as shared:
            first = [await one(shared, "huge_frame", "anthropic")]
            return first + list(await asyncio.gather(*(one(shared, case, api) for case in CASES
                                                       for api in ("anthropic", "chat")
                                                       if case != "huge_frame" or api != "anthropic")))

    for case, api, t, elapsed in asyncio.run(main()):
        judge(case, api, t, elapsed)


def test_deadline_holds_on_a_caller_supplied_client(servers: dict[str, HostileServer]) -> None:
    import httpx

    with httpx.Client() as shared:
        for case in ("slow_headers", "trickle"):
            t0 = time.monotonic()
            t = client.stream_request(servers[case].url + PATHS["chat"], json_body=BODIES["chat"], timeout=DEADLINE,
                                      api="chat", client=shared)
            judge(case, "chat", t, time.monotonic() - t0)


# -- the real suite ----------------------------------------------------------------------------

# Every case once: a case per API in each run, and one for the other routes (GET /v1/models), so
# three runs cover the twelve cases and can go side by side. Two Anthropic checks share one stream
# (cached by the harness): the second must fail at once on what the first one waited for, and
# AN-STREAM-008 shows the transport error itself (e.g. the frame-size limit for the huge frame).
GROUPS = [
    {"anthropic": "never_ends", "chat": "no_done", "responses": "non_json", "other": "reset"},
    {"anthropic": "trickle", "chat": "reset_mid_stream", "responses": "invalid_utf8", "other": "wrong_content_type"},
    {"anthropic": "huge_frame", "chat": "truncated", "responses": "http500_mid_stream", "other": "slow_headers"},
]
assert sorted(c for g in GROUPS for c in g.values()) == sorted(CASES)
SELECT = "AN-STREAM-001 or AN-STREAM-008 or CH-STREAM-005 or RS-STREAM-004 or test_models_list_anthropic_shape"
PREFIX = {"anthropic": "AN-STREAM", "chat": "CH-STREAM", "responses": "RS-STREAM", "other": "AN-ROUTE"}
SUITE_TIMEOUT = 3.0
RSS_BOUND_MB = 600


def test_suite_against_every_case(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Only the conformance plugin in the four pytest children (they inherit this environment):
    # the auto-loaded plugins (hypothesis, xdist, ...) cost ~2 s of start-up each and judge nothing.
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.setenv("PYTEST_PLUGINS", "harnesscheck.conformance.plugin")
    rss: dict[int, float] = {}

    def run(n: int) -> tuple[dict[str, str], dict[str, Any], float, HostileServer]:
        group = GROUPS[n]
        with HostileServer(group, max_seconds=20) as server:
            t0 = time.monotonic()
            usage: dict[str, float] = {}
            doc = run_suite(SuiteOptions(endpoint=server.url, model="m", timeout=SUITE_TIMEOUT, tries=1,
                                         select=SELECT), tmp_path / f"run{n}", subprocess_run=True, quiet=True,
                            usage=usage)
            rss[n] = usage["max_rss_mb"]
            return group, doc, time.monotonic() - t0, server

    with ThreadPoolExecutor(len(GROUPS)) as pool:
        runs = list(pool.map(run, range(len(GROUPS))))
    rss_mb = max(rss.values())  # each suite run's own peak (os.wait4), not this worker's other children
    lines = []
    for group, doc, elapsed, server in runs:
        checks = doc["checks"]
        outcomes = {c["id"]: c["outcome"] for c in checks}
        assert len(checks) == 5, outcomes  # the run went on past the first broken check, to every API
        assert "error" not in outcomes.values(), [c for c in checks if c["outcome"] == "error"]
        # Bounded: pytest start-up plus at most one deadline per distinct stream.
        assert elapsed < 90, elapsed
        for api, case in group.items():
            prefix = PREFIX[api]
            mine = [c for c in checks if c["id"].startswith(prefix)]
            assert mine, (api, case, outcomes)
            for c in mine:
                # a deadline is slowness, not a contract verdict: inconclusive (timeout or stalled), never pass
                assert c["outcome"] in ("fail", "skip", "inconclusive"), (case, c["id"], c["outcome"], c.get("message"))
                if c["outcome"] == "inconclusive":
                    assert c.get("cause") in ("timeout", "stalled", "endpoint-error"), (case, c["id"], c.get("cause"))
                message = c.get("message") or ""
                assert 10 < len(message) and "Traceback" not in message, (case, c["id"], message)
                # within the timeout: one check never waits for more than its deadline per stream
                assert c.get("duration_s", 0) < SUITE_TIMEOUT + 5, (case, c["id"], c.get("duration_s"))
            lines.append(f"  {case:20s} ({api:9s}) " + "; ".join(f"{c['id']} {c['outcome']}: "
                                                                 f"{(c.get('message') or '')[:80]}" for c in mine))
        if group["anthropic"] == "huge_frame":
            huge = [c for c in checks if c["id"].startswith("AN-STREAM")]
            assert any("exceeds" in (c.get("message") or "") for c in huge), huge
            assert server.most_bytes_on_one_connection < server.huge_cap // 2, server.most_bytes_on_one_connection
    assert rss_mb < RSS_BOUND_MB, rss_mb
    print(f"\nhostile suite: {len(runs)} runs, {sum(len(r[1]['checks']) for r in runs)} checks, slowest run "
          f"{max(r[2] for r in runs):.1f} s, largest child RSS {rss_mb:.0f} MB\n" + "\n".join(lines))
