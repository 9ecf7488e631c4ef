"""The pytest plugin (entry point `pytest11`): options, the `hc` fixture, the `check` marker, and
the mapping from a test's result to a check outcome. Hooks and fixtures only; the logic lives in
harness.py, results.py and the suites.

    pytest --pyargs conformance --endpoint http://localhost:8000 --model my/model
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conformance import catalog
from conformance.harness import Endpoint, Harness, api_key_from_env, discover_model
from conformance.options import add_options
from conformance.outcome import Outcome
from conformance.wire.server_info import server_info
from conformance.results import CheckResult, Collector
from conformance.verdict import INCONCLUSIVE_PREFIX, CheckFailed

COLLECTOR = pytest.StashKey[Collector]()
ENDPOINT = pytest.StashKey[Endpoint]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("harnesscheck", "harnesscheck conformance")

    # pytest-timeout owns --timeout (plugin load order is not ours to choose), so in pytest the
    # request deadline is --hc-timeout; every option also answers to its --hc- name.
    add_options(group.addoption, taken=lambda flag: flag == "--timeout")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "check(id): the catalog check this test judges (conformance suites)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    apis = {a.strip() for a in (config.getoption("hc_apis") or "").split(",") if a.strip()}
    keep, drop = [], []
    for item in items:
        marker = item.get_closest_marker("check")
        if marker is None:
            keep.append(item)
            continue
        check = catalog.get(marker.args[0])  # KeyError names an unknown id: a kit bug, fail loudly
        (keep if check.api == "any" or check.api in apis else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def _start_embedded(config: pytest.Config) -> tuple[str, Any]:
    from reference_server.launch import ServerProcess

    # Fast, but with time in it: decode and prefill costs that timing witnesses can see.
    args = ["--decode-ms", "0.2", "--ttft-base-ms", "1", "--prefill-us-per-token", "50",
            *config.getoption("hc_server_arg")]
    server = ServerProcess(args).start()
    return server.url, server


@pytest.fixture(scope="session")
def hc_endpoint(request: pytest.FixtureRequest) -> Iterator[Endpoint]:
    config = request.config
    url = config.getoption("hc_endpoint")
    server = None
    api_key = api_key_from_env(config.getoption("hc_api_key"))
    timeout = float(config.getoption("hc_timeout"))
    if not url:
        url, server = _start_embedded(config)
    model = config.getoption("hc_model") or discover_model(url, api_key, timeout)
    expect = set(config.getoption("hc_expect"))
    if server is not None:  # the embedded server offers every optional feature
        expect |= {"tool-dispatch", "tokenize", "prefix-cache", "preamble-strip", "count-tokens"}
        if "--no-enable-streaming-tool-dispatch" in config.getoption("hc_server_arg"):
            expect.discard("tool-dispatch")
    endpoint = Endpoint(url=url, model=model, api_key=api_key,
                        apis=tuple(a.strip() for a in config.getoption("hc_apis").split(",") if a.strip()),
                        tries=int(config.getoption("hc_tries")), timeout=timeout, expect=frozenset(expect),
                        embedded=server is not None, server_args=tuple(config.getoption("hc_server_arg")),
                        witness=config.getoption("hc_witness"))
    config.stash[ENDPOINT] = endpoint
    collector = Collector.start(
        endpoint="embedded reference server" if server else url, model=model, apis=list(endpoint.apis),
        server=server_info(url, model, kind="embedded" if server else "external", api_key=api_key, timeout=timeout,
                           faults=[a.split("=", 1)[1] for a in endpoint.server_args if a.startswith("--fault=")]),
        settings={"tries": endpoint.tries, "timeout": timeout, "expect": sorted(expect), "witness": endpoint.witness,
                  "server_args": list(endpoint.server_args)},
        secrets=[api_key] if api_key else [])
    config.stash[COLLECTOR] = collector
    try:
        yield endpoint
    finally:
        if server is not None:
            server.stop()


@pytest.fixture(scope="session")
def hc_session(hc_endpoint: Endpoint) -> Harness:
    return Harness(endpoint=hc_endpoint)


@pytest.fixture()
def hc(hc_session: Harness) -> Iterator[Harness]:
    hc_session.attached.clear()
    yield hc_session


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Iterator[None]:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    marker = item.get_closest_marker("check")
    if marker is None or COLLECTOR not in item.config.stash:
        return
    if report.when == "setup" and report.passed:
        item.stash[_START] = time.monotonic()
        return
    if report.when == "call" or (report.when == "setup" and not report.passed):
        _record(item, call, report, catalog.get(marker.args[0]))


_START = pytest.StashKey[float]()


def _record(item: pytest.Item, call: pytest.CallInfo[Any], report: pytest.TestReport, check: catalog.Check) -> None:
    duration = time.monotonic() - item.stash.get(_START, time.monotonic())
    hc: Harness | None = item.funcargs.get("hc") if hasattr(item, "funcargs") else None  # type: ignore[attr-defined]
    attached = list(hc.attached) if hc else []
    transcript = attached[-1][1] if attached else None
    finding = excerpt = None
    if report.passed:
        outcome, message = Outcome.PASS, "ok"
    elif report.skipped:
        reason = str(call.excinfo.value) if call.excinfo else "skipped"
        reason = getattr(call.excinfo.value, "msg", reason) if call.excinfo else reason
        if reason.startswith(INCONCLUSIVE_PREFIX):
            outcome, message = Outcome.INCONCLUSIVE, reason[len(INCONCLUSIVE_PREFIX):]
        else:
            outcome, message = Outcome.SKIP, reason
    else:
        error = call.excinfo.value if call.excinfo else None
        if isinstance(error, CheckFailed):
            outcome, message = Outcome.FAIL, error.summary
            finding = error.finding
            transcript = error.transcript or transcript
            excerpt = transcript.excerpt(finding.frame_index if finding else None) if transcript else None
        elif isinstance(error, AssertionError):
            outcome, message = Outcome.FAIL, str(error).splitlines()[0] if str(error) else "assertion failed"
            excerpt = transcript.excerpt(None) if transcript else None
        else:
            outcome = Outcome.ERROR
            message = f"kit error (not a verdict on the endpoint): {type(error).__name__}: {error}"
    item.config.stash[COLLECTOR].add(CheckResult(check=check, outcome=outcome, message=message, duration_s=duration,
                                                 finding=finding, transcript=transcript, excerpt=excerpt))


def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    if COLLECTOR not in config.stash:
        return
    results = config.getoption("hc_results")
    transcripts = config.getoption("hc_transcripts")
    results_path = Path(results) if results else None
    transcripts_dir = Path(transcripts) if transcripts else (results_path.parent / "transcripts" if results_path
                                                              else None)
    if results_path or transcripts_dir:
        config.stash[COLLECTOR].write(results_path, transcripts_dir)
