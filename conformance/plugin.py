"""The pytest plugin (entry point `pytest11`): options, the `hc` fixture, the `check` marker and the
hooks; nothing else. What the hooks call lives beside it: sharing.py (xdist: one server, one lock
folder, one results document; the endpoint lock), recording.py (a test's outcome mapped to a check's
result, and pytest's report aligned with it), results.py (results.json), hookspec.py (the kit's own
hooks: `pytest_harnesscheck_result`), the catalog entry (which checks hold the endpoint alone).

    pytest --pyargs harnesscheck.conformance --hc-endpoint http://localhost:8000 --hc-model my/model [-n 4]

A run stopped by Ctrl-C or SIGTERM writes what was measured until then, marked `run.interrupted`, in
one process and under xdist alike.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from harnesscheck.conformance import catalog, hookspec, recording
from harnesscheck.conformance.endpoint import open_endpoint
from harnesscheck.conformance.options import PYTEST_PREFIX, add_options, split_apis
from harnesscheck.conformance.outcome import Outcome
from harnesscheck.conformance.results import write_run
from harnesscheck.conformance.session import Endpoint, Session
from harnesscheck.conformance.sharing import (COLLECTOR, RESULT_ATTR, SHARED, WORKERINPUT_KEY, EndpointLock, LiveResults,
                                              Shared, collects_suite, exclusive, from_controller, is_xdist_controller,
                                              payloads, restore_sigterm, result_payload, stop_on_sigterm,
                                              stops_deferred)
from harnesscheck.conformance.verdict import Inconclusive
from harnesscheck.protocol.wire.redact import redact_data
from harnesscheck.reports.clients import junit_properties

if TYPE_CHECKING:
    from pluggy import Result

ENDPOINT = pytest.StashKey[Endpoint]()
_START = pytest.StashKey[tuple[float, float]]()  # when the check began: monotonic, wall clock


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("harnesscheck", "harnesscheck conformance")
    add_options(group.addoption, prefix=PYTEST_PREFIX)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspec)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "check(id): the catalog check this test judges (conformance suites)")
    config.pluginmanager.register(_Scrub(), "harnesscheck-scrub")
    if is_xdist_controller(config):
        config.stash[SHARED] = Shared()
        config.pluginmanager.register(LiveResults(config.stash[SHARED]), "harnesscheck-live-results")
    if not hasattr(config, "workerinput") and collects_suite(config):
        stop_on_sigterm(config)


def pytest_unconfigure(config: pytest.Config) -> None:
    restore_sigterm(config)
    shared = config.stash.get(SHARED, None)
    if shared is not None:
        shared.close()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A check's test id carries its check id: a test marked with one check (and not already
    parametrized by ids that name it) gets the one-value parameter `hc_check`, so its node id, the
    JUnit name, the failure's headline and the live line read `test_custom_tool_call[<check id>]`."""
    marker = metafunc.definition.get_closest_marker("check")
    if marker is None or "hc_check" not in metafunc.fixturenames:
        return
    check_id = catalog.get(marker.args[0]).id
    metafunc.parametrize("hc_check", [check_id], ids=[check_id], indirect=True)


@pytest.fixture()
def hc_check(request: pytest.FixtureRequest) -> str:
    """The id of the check the test judges (its `check` marker; the parameter pytest_generate_tests sets)."""
    marker = request.node.get_closest_marker("check")
    return str(getattr(request, "param", marker.args[0] if marker is not None else ""))


def pytest_itemcollected(item: pytest.Item) -> None:
    marker = item.get_closest_marker("check")
    if marker is not None:  # `-k ID` selects the check's test (keywords are set before -k runs)
        item.extra_keyword_matches.add(catalog.get(marker.args[0]).id)  # KeyError: an unknown id, a kit bug


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    apis = set(split_apis(config.getoption("hc_apis")))
    keep: list[pytest.Item] = []
    drop: list[pytest.Item] = []
    for item in items:
        marker = item.get_closest_marker("check")
        (keep if marker is None or catalog.get(marker.args[0]).runs_with(apis) else drop).append(item)
    if hasattr(config, "workerinput"):  # xdist: the checks that hold the endpoint alone go last, so the
        # workers drain once, at the end, rather than each time one of them comes up (same order on every worker)
        witness = config.getoption("hc_witness")
        keep.sort(key=lambda item: exclusive(item, witness))
    if drop:
        config.hook.pytest_deselected(items=drop)
    items[:] = keep


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    shared = node.config.stash.get(SHARED, None)
    if shared is not None:
        node.workerinput[WORKERINPUT_KEY] = shared.workerinput(node.config)


class _Scrub:
    """What pytest writes of a test (terminal, JUnit: failure text, traceback, skip or xfail reason,
    captured output, properties) holds no secret of the run (Endpoint.secrets): scrubbed here, outermost,
    after every other hook has made the report."""

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_makereport(self, item: pytest.Item) -> Generator[None, Result[pytest.TestReport], None]:
        outcome = yield
        collector = item.config.stash.get(COLLECTOR, None)
        if collector is None or not collector.secrets:
            return
        report = outcome.get_result()
        for name in ("longrepr", "sections", "wasxfail"):
            if getattr(report, name, None) is not None:
                setattr(report, name, redact_data(getattr(report, name), collector.secrets))
        item.user_properties[:] = redact_data(list(item.user_properties), collector.secrets)
        report.user_properties = redact_data(list(report.user_properties), collector.secrets)


@pytest.fixture(scope="session")
def hc_endpoint(request: pytest.FixtureRequest) -> Iterator[Endpoint]:
    endpoint, collector, server = open_endpoint(request.config)
    request.config.stash[ENDPOINT] = endpoint
    request.config.stash[COLLECTOR] = collector
    try:
        yield endpoint
    finally:
        if server is not None:
            server.stop()


@pytest.fixture(scope="session")
def hc_session(hc_endpoint: Endpoint) -> Session:
    return Session(endpoint=hc_endpoint)


@pytest.fixture()
def hc(hc_session: Session, hc_check: str, request: pytest.FixtureRequest) -> Iterator[Session]:
    hc_session.attached.clear()
    hc_session.check_id = hc_check  # some checks take fewer levers
    if hc_session.stalled:  # judged already: every later check would wait out its deadline for nothing
        raise Inconclusive(f"endpoint stalled earlier in the run: {hc_session.stalled}", cause="stalled")
    folder = from_controller(request.config).get("lock_folder")
    if folder is None:  # one process: the checks run one at a time anyway
        yield hc_session
        return
    with EndpointLock(Path(folder)).hold(exclusive=exclusive(request.node, hc_session.endpoint.witness)):
        yield hc_session


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any],
                              ) -> Generator[None, Result[pytest.TestReport], None]:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    marker = item.get_closest_marker("check")
    if marker is None or COLLECTOR not in item.config.stash:
        return
    check = catalog.get(marker.args[0])
    if report.when == "setup":  # JUnit writes the item's properties (from the teardown report)
        item.user_properties += [("check_id", check.id), ("check_level", str(check.level))]
    if report.when == "setup" and report.passed:
        item.stash[_START] = (time.monotonic(), time.time())
        return
    if report.when == "call" or (report.when == "setup" and not report.passed):
        start, started = item.stash.get(_START, (time.monotonic(), time.time()))
        hc: Session | None = item.funcargs.get("hc") if hasattr(item, "funcargs") else None
        error = call.excinfo.value if call.excinfo else None
        result = recording.judge(check, passed=report.passed, skipped=report.skipped, error=error, hc=hc,
                                 attached=list(hc.attached) if hc else [], duration=time.monotonic() - start,
                                 started=started)
        collector = item.config.stash[COLLECTOR]
        collector.add(result)
        if hc is not None and hc.stall and "stall" not in collector.run:  # the run header says where it stalled
            collector.run["stall"] = {"check": check.id, **hc.stall}
        item.config.hook.pytest_harnesscheck_result(result=result, item=item)
        if hasattr(item.config, "workerinput"):  # xdist: to the controller now, with this report
            setattr(report, RESULT_ATTR, result_payload(item.config, result))
        item.user_properties += [("outcome", str(result.outcome)), ("level", str(result.weight))]
        recording.align_report(report, result)
        if result.outcome is Outcome.FAIL:  # the kit's message in place of a traceback
            report.longrepr = recording.said_once(item.location, collector.secrets, result, error)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> Generator[None, None, None]:
    """The results are written first, before xdist's sessionfinish (which waits for its workers to
    end) and the fixtures' teardown; SIGINT and SIGTERM that come while the session finishes wait
    until it is done, then take effect (issue 43: a stop after [100%] raised inside xdist's teardown
    and the results were never written). An xdist worker freezes its heap once its session is done:
    pytest's last gc pass over it took 3-4 s a worker on a loaded machine, which the controller
    waited for (up to xdist's 10 s, then killed it)."""
    suite = collects_suite(session.config)  # else another project's session: only the results (if any)
    if hasattr(session.config, "workerinput"):
        try:
            return (yield)
        finally:
            if suite:
                gc.freeze()  # what is left goes with the process; a last gc.collect scans no old object
    if not suite or threading.current_thread() is not threading.main_thread():
        _write_results(session)
        return (yield)
    with stops_deferred():  # a stop now takes effect once the session is done (the CLI's handler raises Interrupted)
        _write_results(session)
        return (yield)


def _write_results(session: pytest.Session) -> None:
    """results.json (results.write_run): this process's results, or the xdist controller's merge of its
    workers'; the run's one statement per client (reports.clients) as JUnit's run properties."""
    config = session.config
    measured, merged = payloads(config)
    doc = write_run(measured, results=config.getoption("hc_results"), transcripts=config.getoption("hc_transcripts"),
                    interrupted=session.exitstatus == pytest.ExitCode.INTERRUPTED, merged=merged)
    from _pytest.junitxml import xml_key

    junit = config.stash.get(xml_key, None)
    if doc is not None and junit is not None:
        for name, line in junit_properties(doc):
            junit.add_global_property(name, line)
