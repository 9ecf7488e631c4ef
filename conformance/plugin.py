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
from conformance.options import (EMBEDDED_SERVER_ARGS, add_options, embedded_features, split_apis,
                                 validate_options)
from conformance.preflight import preflight
from conformance.outcome import Outcome
from conformance.wire.server_info import server_info
from conformance.results import CheckResult, Collector
from conformance.verdict import CheckFailed, Inconclusive, timed_out

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
        item.extra_keyword_matches.add(check.id)  # `-k AN-DISPATCH-001` selects the check's test
        (keep if check.api == "any" or check.api in apis else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def _start_embedded(config: pytest.Config) -> tuple[str, Any]:
    from reference_server.launch import ServerProcess

    # Fast, but with time in it: decode and prefill costs that timing witnesses can see.
    args = [*EMBEDDED_SERVER_ARGS, *config.getoption("hc_server_arg")]
    server = ServerProcess(args).start()
    return server.url, server


@pytest.fixture(scope="session")
def hc_endpoint(request: pytest.FixtureRequest) -> Iterator[Endpoint]:
    config = request.config
    url = config.getoption("hc_endpoint")
    server = None
    api_key = api_key_from_env(config.getoption("hc_api_key"))
    timeout = float(config.getoption("hc_timeout"))
    problem = validate_options(endpoint=url, apis=config.getoption("hc_apis"),
                               expect=config.getoption("hc_expect"), tries=int(config.getoption("hc_tries")),
                               timeout=timeout)
    if problem:
        pytest.exit(f"harnesscheck: {problem}", returncode=2)
    if not url:
        url, server = _start_embedded(config)
    elif not config.getoption("hc_no_preflight"):  # an unusable endpoint: one line, not a verdict per check
        checked = preflight(url, api_key=api_key, model=config.getoption("hc_model"),
                            apis=split_apis(config.getoption("hc_apis")), timeout=timeout)
        if not checked.ok:
            pytest.exit(f"harnesscheck: {checked.problem}", returncode=2)
    model = config.getoption("hc_model") or discover_model(url, api_key, timeout)
    expect = set(config.getoption("hc_expect"))
    if server is not None:  # the embedded server offers every optional feature
        expect |= embedded_features(config.getoption("hc_server_arg"))
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
    if hc_session.stalled:  # judged already: every later check would wait out its deadline for nothing
        raise Inconclusive(f"endpoint stalled earlier in the run: {hc_session.stalled}", cause="stalled")
    yield hc_session


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Iterator[None]:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    marker = item.get_closest_marker("check")
    if marker is None or COLLECTOR not in item.config.stash:
        return
    check = catalog.get(marker.args[0])
    if report.when == "setup":  # JUnit writes the item's properties (from the teardown report)
        item.user_properties += [("check_id", check.id), ("check_level", str(check.level))]
    if report.when == "setup" and report.passed:
        item.stash[_START] = time.monotonic()
        return
    if report.when == "call" or (report.when == "setup" and not report.passed):
        result = _record(item, call, report, check)
        item.user_properties += [("outcome", str(result.outcome)), ("level", str(result.weight))]
        _align_report(report, result)


_START = pytest.StashKey[float]()


def _align_report(report: pytest.TestReport, result: CheckResult) -> None:
    """pytest's report (terminal, JUnit) says what the result says: an inconclusive check is a skip
    with its reason, a SHOULD failure an xfail (reported, never a failure of the run)."""
    if result.outcome is Outcome.INCONCLUSIVE and report.outcome != "skipped":
        report.outcome = "skipped"
        report.longrepr = (str(getattr(report, "fspath", "")), None, f"INCONCLUSIVE: {result.message}")
    elif result.outcome is Outcome.FAIL and result.level is catalog.SHOULD:
        report.outcome = "skipped"
        report.wasxfail = f"SHOULD failed: {result.message}"


def _attached(item: pytest.Item) -> tuple[Harness | None, list[tuple[str, Any]]]:
    hc: Harness | None = item.funcargs.get("hc") if hasattr(item, "funcargs") else None  # type: ignore[attr-defined]
    return hc, (list(hc.attached) if hc else [])


def _record(item: pytest.Item, call: pytest.CallInfo[Any], report: pytest.TestReport,
            check: catalog.Check) -> CheckResult:
    duration = time.monotonic() - item.stash.get(_START, time.monotonic())
    hc, attached = _attached(item)
    transcript = attached[-1][1] if attached else None
    error = call.excinfo.value if call.excinfo else None
    finding = excerpt = None
    rules: list[str] = []
    cause = ""
    if report.passed:
        outcome, message = Outcome.PASS, "ok"
    elif isinstance(error, Inconclusive):
        outcome, message, cause = Outcome.INCONCLUSIVE, error.reason, error.cause
        if cause == "timeout" and "--timeout" not in message:
            message += f"; the endpoint may be slow: try --timeout {_longer(hc)}"
    elif report.skipped:
        outcome, message = Outcome.SKIP, str(getattr(error, "msg", error) if error else "skipped")
    elif isinstance(error, AssertionError) and (late := _timed_out_exchange(attached)) is not None:
        # A deadline is evidence of slowness, not of the contract the request carried.
        label, t = late
        outcome, cause = Outcome.INCONCLUSIVE, "timeout"
        message = f"timed out: {label}: {t.error}; the endpoint may be slow: try --timeout {_longer(hc)}"
        transcript = t
    elif isinstance(error, CheckFailed):
        outcome, message = Outcome.FAIL, error.summary
        finding, rules = error.finding, error.rules or [check.id]
        transcript = error.transcript or transcript
        excerpt = transcript.excerpt(finding.frame_index if finding else None) if transcript else None
    elif isinstance(error, AssertionError):
        outcome, message = Outcome.FAIL, str(error).splitlines()[0] if str(error) else "assertion failed"
        rules = [check.id]
        excerpt = transcript.excerpt(None) if transcript else None
    else:
        outcome = Outcome.ERROR
        message = f"kit error (not a verdict on the endpoint): {type(error).__name__}: {error}"
    level = check.weight_of(rules) if outcome is Outcome.FAIL else check.level
    result = CheckResult(check=check, outcome=outcome, message=message, duration_s=duration, finding=finding,
                         transcript=transcript, excerpt=excerpt, rules=rules, level=level, cause=cause,
                         notes=_notes(attached))
    item.config.stash[COLLECTOR].add(result)
    return result


def _longer(hc: Harness | None) -> str:
    return f"{max(4 * (hc.endpoint.timeout if hc else 30.0), 60.0):g}"


def _timed_out_exchange(attached: list[tuple[str, Any]]) -> tuple[str, Any] | None:
    return next(((label, t) for label, t in attached if timed_out(t)), None)


def _notes(attached: list[tuple[str, Any]]) -> list[str]:
    """What the references allow and the run saw anyway (unknown events, error events): shown, not failed."""
    from conformance.grammar import validate_for

    notes: list[str] = []
    for label, t in attached:
        if not t.frames or t.api not in catalog.APIS:
            continue
        for f in validate_for(t.api, t):
            if getattr(f, "informational", False):
                notes.append(f"{label}: {f}")
    return list(dict.fromkeys(notes))[:20]


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
