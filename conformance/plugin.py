"""The pytest plugin (entry point `pytest11`): options, the `hc` fixture, the `check` marker, and
the mapping from a test's result to a check outcome. Hooks and fixtures only; the logic lives in
session.py, results.py and the suites.

    pytest --pyargs harnesscheck.conformance --hc-endpoint http://localhost:8000 --hc-model my/model [-n 4]

Under pytest-xdist (`-n N`) the controller starts the one embedded reference server and a lock
folder and hands both to the workers (workerinput); each worker sends each check's result to the
controller with the check's own report (as it is measured, so a run stopped part way keeps it), and
the controller writes the one results.json. A run stopped by Ctrl-C or SIGTERM writes what was
measured until then, marked `run.interrupted`, in one process and under xdist alike.
Checks run concurrently against the endpoint, except the timing-sensitive ones (TIMING_SENSITIVE),
which hold it to themselves (EndpointLock).
"""

from __future__ import annotations

import fcntl
import gc
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from harnesscheck.protocol import apis
from harnesscheck.conformance import catalog
from harnesscheck.conformance.options import (
    PYTEST_PREFIX,
    QUICK_LEAVES_OUT,
    add_options,
    embedded_features,
    embedded_server_args,
    split_apis,
    validate_options,
)
from harnesscheck.conformance.levers import tried_words
from harnesscheck.conformance.outcome import Outcome
from harnesscheck.conformance.preflight import preflight
from harnesscheck.conformance.results import CheckResult, Collector, write_results
from harnesscheck.conformance.session import Endpoint, Session, api_key_from_env, discover_model
from harnesscheck.conformance.verdict import CheckFailed, Inconclusive, explain, refused_for_config, timed_out
from harnesscheck.protocol.wire.redact import redact_text
from harnesscheck.protocol.wire.server_info import server_info
from harnesscheck.protocol.wire.redact import redact_args, redact_data, redact_url
from harnesscheck.reports.clients import junit_properties

if TYPE_CHECKING:
    from pluggy import Result

PACKAGE = Path(__file__).resolve().parent
WORKERINPUT_KEY = "harnesscheck"  # in workerinput: the shared server and lock folder
RESULT_ATTR = "harnesscheck_result"  # on an xdist worker's report: the check's result, for the controller

# Checks whose verdict rests on time measured at the endpoint: with other checks' requests in flight
# (queueing, prefill of other prompts) their timings would move, so they hold the endpoint alone.
# Every other check judges content or order, which concurrent requests do not change (the dispatch
# checks judge frame order, not the clock: test_dispatch.py).
TIMING_SENSITIVE = {
    # conformance/witnesses.py timing_witness: turn 2's time to the last token, as returned vs cached
    # vs rewritten, median of 8 sessions (taken when --witness timing, or auto without tokenize/cache).
    "AN-HIST-001": "timing witness", "RS-HIST-001": "timing witness", "AN-HIST-002": "timing witness",
    "CH-HIST-002": "timing witness", "RS-HIST-002": "timing witness",
    # test_preamble.py: without cache reads reported, TTFT of new-header sessions vs repeats.
    "AN-PREAMBLE-001": "prefix-cache timing", "AN-PREAMBLE-002": "prefix-cache timing",
}
_WITNESS_CHECKS = {"AN-HIST-001", "RS-HIST-001", "AN-HIST-002", "CH-HIST-002", "RS-HIST-002"}


def timing_sensitive(check_id: str, witness: str) -> bool:
    """Whether the check must hold the endpoint alone: a history check not if its witness is forced to
    one that measures no time (tokenize, cache)."""
    if check_id in _WITNESS_CHECKS and witness in ("tokenize", "cache"):
        return False
    return check_id in TIMING_SENSITIVE


COLLECTOR = pytest.StashKey[Collector]()
ENDPOINT = pytest.StashKey[Endpoint]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("harnesscheck", "harnesscheck conformance")
    add_options(group.addoption, prefix=PYTEST_PREFIX)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "check(id): the catalog check this test judges (conformance suites)")
    config.pluginmanager.register(_Scrub(), "harnesscheck-scrub")
    if _is_xdist_controller(config):
        config.stash[SHARED] = Shared()
        config.pluginmanager.register(_LiveResults(config.stash[SHARED]), "harnesscheck-live-results")
    if not hasattr(config, "workerinput") and _collects_suite(config):
        _stop_on_sigterm(config)


_PREVIOUS_SIGTERM = pytest.StashKey[Any]()


def _stop_on_sigterm(config: pytest.Config) -> None:
    """A SIGTERM stops the suite as Ctrl-C does (pytest's own default is to die at once, writing
    nothing): the session ends, and what was measured is written, marked interrupted. Only where
    nobody has a handler of their own (the CLI has), in the main thread; put back at unconfigure."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, None):
        return

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt("stopped by SIGTERM")

    config.stash[_PREVIOUS_SIGTERM] = signal.signal(signal.SIGTERM, stop)


def pytest_unconfigure(config: pytest.Config) -> None:
    previous = config.stash.get(_PREVIOUS_SIGTERM, None)
    if previous is not None:
        signal.signal(signal.SIGTERM, previous)
    shared = config.stash.get(SHARED, None)
    if shared is not None:
        shared.close()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A check's test id carries its check id: a test marked with one check (and not already
    parametrized by ids that name it) gets the one-value parameter `hc_check`, so its node id, the
    JUnit name, the failure's headline and the live line read `test_custom_tool_call[RS-TOOLKIND-002]`
    (a test whose parameters carry their own check marks names them in its ids already)."""
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
    if marker is not None:  # `-k AN-DISPATCH-001` selects the check's test (keywords are set before -k runs)
        item.extra_keyword_matches.add(catalog.get(marker.args[0]).id)  # KeyError: an unknown id, a kit bug


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    apis = set(split_apis(config.getoption("hc_apis")))
    keep: list[pytest.Item] = []
    drop: list[pytest.Item] = []
    for item in items:
        marker = item.get_closest_marker("check")
        if marker is None:
            keep.append(item)
            continue
        (keep if catalog.get(marker.args[0]).runs_with(apis) else drop).append(item)
    if hasattr(config, "workerinput"):  # xdist: the checks that hold the endpoint alone go last, so the
        # workers drain once, at the end, rather than each time one of them comes up (same order on every worker)
        witness = config.getoption("hc_witness")
        keep.sort(key=lambda item: _exclusive(item, witness))
    if drop:
        config.hook.pytest_deselected(items=drop)
    items[:] = keep


def _exclusive(item: pytest.Item, witness: str) -> bool:
    marker = item.get_closest_marker("check")
    return marker is not None and timing_sensitive(marker.args[0], witness)


# -- xdist: one server, one lock folder, one results document -------------------------------------

@dataclass
class Shared:
    """The xdist controller's part: the lock folder and the embedded server it hands to its workers,
    and the results they send back."""

    folder: Path | None = None
    server: Any = None
    payloads: list[dict[str, Any]] = field(default_factory=list)  # one per check, as its report came in

    def workerinput(self, config: pytest.Config) -> dict[str, Any]:
        if self.folder is None:
            self.folder = Path(tempfile.mkdtemp(prefix="harnesscheck-"))
            if not config.getoption("hc_endpoint") and _collects_suite(config):
                self.server = _start_embedded(config)
        return {"lock_folder": str(self.folder), "embedded_url": self.server.url if self.server else None}

    def close(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None


SHARED = pytest.StashKey[Shared]()


def _is_xdist_controller(config: pytest.Config) -> bool:
    return (config.pluginmanager.hasplugin("xdist") and not hasattr(config, "workerinput")
            and bool(getattr(config.option, "numprocesses", None)) and not getattr(config.option, "collectonly", False))


def _collects_suite(config: pytest.Config) -> bool:
    """Whether the session's arguments name this package (so it needs an endpoint): the plugin is
    loaded in every pytest session of the environment, and must not start a server for others."""
    for arg in config.args:
        name = arg.split("::")[0]
        if config.option.pyargs and (name == "harnesscheck.conformance" or name.startswith("harnesscheck.conformance.")):
            return True
        path = (config.invocation_params.dir / name).resolve()
        if path == PACKAGE or PACKAGE in path.parents or path in PACKAGE.parents:
            return True
    return False


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    shared = node.config.stash.get(SHARED, None)
    if shared is not None:
        node.workerinput[WORKERINPUT_KEY] = shared.workerinput(node.config)


class _LiveResults:
    """The xdist controller's listener: each check's result arrives with its report (RESULT_ATTR, set
    by the worker), so what was measured is here even when a worker never finishes (a run stopped by
    SIGTERM or Ctrl-C, a worker lost)."""

    def __init__(self, shared: Shared) -> None:
        self.shared = shared

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        payload = report.__dict__.pop(RESULT_ATTR, None)
        if payload is not None:
            self.shared.payloads.append(payload)


def _result_payload(config: pytest.Config, result: CheckResult) -> dict[str, Any]:
    """One check's result as a worker sends it (Collector.payload of that result alone)."""
    collector = config.stash[COLLECTOR]
    payload = Collector(run=collector.run, secrets=collector.secrets, results=[result]).payload()
    payload["worker"] = config.workerinput.get("workerid", "")  # type: ignore[attr-defined]
    return payload


def _from_controller(config: pytest.Config) -> dict[str, Any]:
    return (getattr(config, "workerinput", None) or {}).get(WORKERINPUT_KEY) or {}


class EndpointLock:
    """A readers-writer lock over the endpoint, across processes (fcntl.flock on files in the
    controller's lock folder): ordinary checks share it, timing-sensitive ones hold it alone. A
    turnstile (the gate, held only while acquiring) keeps a waiting exclusive holder from being
    overtaken by a stream of shared ones."""

    def __init__(self, folder: Path):
        self.gate, self.endpoint = folder / "gate.lock", folder / "endpoint.lock"

    @contextmanager
    def hold(self, *, exclusive: bool) -> Iterator[None]:
        with open(self.gate, "a") as gate, open(self.endpoint, "a") as endpoint:
            fcntl.flock(gate, fcntl.LOCK_EX)
            try:
                fcntl.flock(endpoint, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            finally:
                fcntl.flock(gate, fcntl.LOCK_UN)
            try:
                yield
            finally:
                fcntl.flock(endpoint, fcntl.LOCK_UN)


class _Scrub:
    """What pytest writes of a test (the terminal, JUnit: its failure text and traceback, the skip or
    xfail reason, captured output, the properties) holds no secret of the run (Endpoint.secrets): an
    endpoint that echoes the key in an error (an SDK's exception quotes its body) is scrubbed here,
    outermost, after every other hook has made the report."""

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


def _start_embedded(config: pytest.Config) -> Any:
    from harnesscheck.reference_server.launch import ServerProcess

    # No modelled time, unless the timing witness is forced (options.embedded_server_args).
    return ServerProcess([*embedded_server_args(config.getoption("hc_witness")),
                          *config.getoption("hc_server_arg")]).start()


@pytest.fixture(scope="session")
def hc_endpoint(request: pytest.FixtureRequest) -> Iterator[Endpoint]:
    config = request.config
    url = config.getoption("hc_endpoint")
    server = None
    api_key = api_key_from_env(config.getoption("hc_api_key"))
    timeout = float(config.getoption("hc_timeout"))
    problem = validate_options(endpoint=url, apis=config.getoption("hc_apis"),
                               expect=config.getoption("hc_expect"), tries=int(config.getoption("hc_tries")),
                               timeout=timeout, prefix=PYTEST_PREFIX)
    if problem:
        pytest.exit(f"harnesscheck: {problem}", returncode=2)
    shared_url = _from_controller(config).get("embedded_url")
    embedded = not url
    if not url:
        url = shared_url
        if not url:
            server = _start_embedded(config)
            url = server.url
    elif not config.getoption("hc_no_preflight"):  # an unusable endpoint: one line, not a verdict per check
        checked = preflight(url, api_key=api_key, model=config.getoption("hc_model"),
                            apis=split_apis(config.getoption("hc_apis")), timeout=timeout, generate=True)
        if not checked.ok:
            pytest.exit(f"harnesscheck: {checked.problem}", returncode=2)
    model = config.getoption("hc_model") or discover_model(url, api_key, timeout)
    expect = set(config.getoption("hc_expect"))
    if embedded:  # the embedded server offers every optional feature
        expect |= embedded_features(config.getoption("hc_server_arg"))
    quick = bool(config.getoption("hc_quick"))
    endpoint = Endpoint(url=url, model=model, api_key=api_key, apis=tuple(split_apis(config.getoption("hc_apis"))),
                        tries=1 if quick else int(config.getoption("hc_tries")), timeout=timeout,
                        expect=frozenset(expect), embedded=embedded,
                        server_args=tuple(config.getoption("hc_server_arg")), witness=config.getoption("hc_witness"),
                        quick=quick, peer=config.getoption("hc_peer") or "",
                        context_window=config.getoption("hc_context_window"))
    config.stash[ENDPOINT] = endpoint
    collector = Collector.start(
        endpoint="embedded reference server" if embedded else redact_url(url), model=model, apis=list(endpoint.apis),
        server=server_info(url, model, kind="embedded" if embedded else "external", api_key=api_key, timeout=timeout,
                           faults=[a.split("=", 1)[1] for a in endpoint.server_args if a.startswith("--fault=")]),
        settings={"tries": endpoint.tries, "timeout": timeout, "expect": sorted(expect), "witness": endpoint.witness,
                  "server_args": redact_args(endpoint.server_args),
                  **({"quick": list(QUICK_LEAVES_OUT)} if quick else {}),
                  **({"peer": endpoint.peer} if endpoint.peer else {})},
        secrets=endpoint.secrets)
    config.stash[COLLECTOR] = collector
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
    folder = _from_controller(request.config).get("lock_folder")
    if folder is None:  # one process: the checks run one at a time anyway
        yield hc_session
        return
    with EndpointLock(Path(folder)).hold(exclusive=_exclusive(request.node, hc_session.endpoint.witness)):
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
        result = _record(item, call, report, check)
        if hasattr(item.config, "workerinput"):  # xdist: to the controller now, with this report
            setattr(report, RESULT_ATTR, _result_payload(item.config, result))
        item.user_properties += [("outcome", str(result.outcome)), ("level", str(result.weight))]
        _align_report(report, result)
        if result.outcome is Outcome.FAIL:  # the kit's message in place of a traceback
            report.longrepr = _said_once(item, result, call.excinfo.value if call.excinfo else None)


_START = pytest.StashKey[tuple[float, float]]()  # when the check began: monotonic, wall clock


def _align_report(report: pytest.TestReport, result: CheckResult) -> None:
    """pytest's report (terminal, JUnit) says what the result says: an inconclusive check is a skip
    with its reason, a SHOULD failure an xfail (reported, never a failure of the run)."""
    if result.outcome is Outcome.INCONCLUSIVE and report.outcome != "skipped":
        report.outcome = "skipped"
        # a skip's (path, line, reason); no line, as pytest's own skip of a whole item (typed int there)
        report.longrepr = (str(getattr(report, "fspath", "")), None,  # type: ignore[assignment]
                           f"INCONCLUSIVE: {result.message}")
    elif result.outcome is Outcome.FAIL and result.level is catalog.SHOULD:
        report.outcome = "skipped"
        report.wasxfail = f"SHOULD failed: {result.message}"


def _said_once(item: pytest.Item, result: CheckResult, error: BaseException | None) -> Any:
    """A failed check's report as pytest shows it (the FAILURES section, a CI log, JUnit's failure
    text): verdict.explain's lines, with the key scrubbed, in place of the traceback through the check
    and verdict.py; the one-line message as the crash line (`FAILED ... - message`, JUnit's message).
    pytest's own representation types, so that xdist carries it to the controller as it is."""
    from _pytest._code.code import ReprEntryNative, ReprExceptionInfo, ReprFileLocation, ReprTraceback

    secrets = item.config.stash[COLLECTOR].secrets
    findings = list(getattr(error, "findings", None) or ([result.finding] if result.finding else []))
    contract = getattr(error, "rule", None)
    text = explain(result.check.id, str(result.weight), result.message, findings=findings, rule=contract,
                   title=result.check.title, remedy=result.check.remedy, excerpt=result.excerpt)
    text = redact_text(text, secrets)
    path, line, _ = item.location
    crash = ReprFileLocation(path=path, lineno=(line or 0) + 1,
                             message=redact_text(f"{result.check.id} {result.weight}: {result.message}", secrets))
    return ReprExceptionInfo(reprtraceback=ReprTraceback([ReprEntryNative([text + "\n"])], None, "native"),
                             reprcrash=crash)


def _attached(item: pytest.Item) -> tuple[Session | None, list[tuple[str, Any]]]:
    hc: Session | None = item.funcargs.get("hc") if hasattr(item, "funcargs") else None
    return hc, (list(hc.attached) if hc else [])


def _record(item: pytest.Item, call: pytest.CallInfo[Any], report: pytest.TestReport,
            check: catalog.Check) -> CheckResult:
    start, started = item.stash.get(_START, (time.monotonic(), time.time()))
    duration = time.monotonic() - start
    hc, attached = _attached(item)
    transcript = attached[-1][1] if attached else None
    error = call.excinfo.value if call.excinfo else None
    finding = excerpt = None
    rules: list[str] = []
    findings: list[Any] = []
    cause = ""
    if report.passed:
        outcome, message = Outcome.PASS, "ok"
    elif isinstance(error, Inconclusive):
        outcome, message, cause = Outcome.INCONCLUSIVE, error.reason, error.cause
        if cause == "timeout" and "--timeout" not in message:
            message += f"; the endpoint may be slow: try --timeout {_longer(hc)}"
        if cause == "not-exercised" and hc is not None and any(t.levers for t in hc.attached.tried):
            message += f"; {tried_words(hc.attached.tried)}"  # which levers, and what came back
    elif report.skipped:
        outcome, message = Outcome.SKIP, str(getattr(error, "msg", error) if error else "skipped")
    elif isinstance(error, AssertionError) and (late := _timed_out_exchange(attached)) is not None:
        # A deadline is evidence of slowness, not of the contract the request carried.
        label, t = late
        outcome, cause = Outcome.INCONCLUSIVE, "timeout"
        message = f"timed out: {label}: {t.error}; the endpoint may be slow: try --timeout {_longer(hc)}"
        transcript = t
    elif isinstance(error, AssertionError) and (carried := _carried_broken_call(
            getattr(error, "transcript", None) or transcript, error, check.id)):
        # A history holding the endpoint's own broken call, refused: the call is its own rules' finding
        # (the tool-JSON rules), the refusal <P>-TURN-001's; this check's rules were never reached.
        outcome, cause = Outcome.INCONCLUSIVE, "not-exercised"
        message = f"not exercised: the endpoint refused a history carrying its own broken call ({carried})"
    elif isinstance(error, CheckFailed):
        outcome, message = Outcome.FAIL, error.summary
        finding, findings, rules = error.finding, error.findings, error.rules or [check.id]
        rules = sorted(rules, key=lambda r: check.level_of(r) is not catalog.MUST)  # the weightiest rule first
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
                         notes=[*(hc.attached.notes if hc else []), *_notes(attached)], started=started,
                         exercised=catalog.coverage(check, hc.exercised) if hc else {},
                         paths_seen=sorted(hc.exercised) if hc else [],
                         levers=hc.lever_record() if hc else {}, findings=findings)
    collector = item.config.stash[COLLECTOR]
    collector.add(result)
    if hc is not None and hc.stall and "stall" not in collector.run:  # the run header says where it stalled
        collector.run["stall"] = {"check": check.id, **hc.stall}
    return result


# The checks that judge exactly that refusal (test_turns.py: a history with a broken call, never a 5xx).
_JUDGES_REFUSED_HISTORY = frozenset(f"{apis.get(name).PREFIX}-TURN-001" for name in apis.NAMES)


def _carried_broken_call(t: Any, error: BaseException, check_id: str) -> str:
    """What broken call of the endpoint's own a refused request carried back, or '' (a finding of a
    stream's grammar stays a failure: only a refusal of the history is set aside)."""
    if t is None or getattr(error, "findings", None) or t.api not in apis.APIS or t.ok or t.error \
            or check_id in _JUDGES_REFUSED_HISTORY or refused_for_config(t):  # a refusal for its size is not
        return ""  # the call's (vLLM's 30-turn session reached its window: CTX-003 judges that refusal)
    return str(apis.get(t.api).malformed_history(t.request_body))


def _longer(hc: Session | None) -> str:
    return f"{max(4 * (hc.endpoint.timeout if hc else 30.0), 60.0):g}"


def _timed_out_exchange(attached: list[tuple[str, Any]]) -> tuple[str, Any] | None:
    return next(((label, t) for label, t in attached if timed_out(t)), None)


def _notes(attached: list[tuple[str, Any]]) -> list[str]:
    """What the references allow and the run saw anyway (unknown events, error events): shown, not failed."""
    from harnesscheck.conformance.grammar import validate_for

    notes: list[str] = []
    for label, t in attached:
        if not t.frames or t.api not in catalog.APIS:
            continue
        for f in validate_for(t.api, t):
            if getattr(f, "informational", False):
                notes.append(f"{label}: {f}")
    return list(dict.fromkeys(notes))[:20]


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> Generator[None, None, None]:
    """The results are written first, before xdist's sessionfinish (which waits for its workers to
    end) and the fixtures' teardown; SIGINT and SIGTERM that come while the session finishes wait
    until it is done, then take effect (issue 43: a stop after [100%] raised inside xdist's teardown
    and the results were never written). An xdist worker freezes its heap once its session is done:
    pytest's last gc pass over it took 3-4 s a worker on a loaded machine, which the controller
    waited for (up to xdist's 10 s, then killed it)."""
    suite = _collects_suite(session.config)  # else another project's session: only the results (if any)
    if hasattr(session.config, "workerinput"):
        try:
            return (yield)
        finally:
            if suite:
                gc.freeze()  # what is left goes with the process; a last gc.collect scans no old object
    if not suite or threading.current_thread() is not threading.main_thread():
        _write_results(session)
        return (yield)
    stops: list[int] = []
    previous = {sig: signal.signal(sig, lambda signum, frame: stops.append(signum))
                for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        _write_results(session)
        return (yield)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if stops:
            signal.raise_signal(stops[0])  # now, to the handler there was (the CLI's raises Interrupted)


def _write_results(session: pytest.Session) -> None:
    """One process: write results.json. The xdist controller: merge its workers' results (each came
    with its report) into the one results.json. A session stopped by Ctrl-C or SIGTERM writes what
    was measured, marked `run.interrupted`."""
    config = session.config
    shared = config.stash.get(SHARED, None)
    payloads = shared.payloads if shared is not None else (
        [config.stash[COLLECTOR].payload()] if COLLECTOR in config.stash else [])
    if not payloads:
        return
    if session.exitstatus == pytest.ExitCode.INTERRUPTED:
        for payload in payloads:
            payload["run"]["interrupted"] = True
    results = config.getoption("hc_results")
    transcripts = config.getoption("hc_transcripts")
    results_path = Path(results) if results else None
    transcripts_dir = Path(transcripts) if transcripts else (results_path.parent / "transcripts" if results_path
                                                              else None)
    if results_path or transcripts_dir:
        workers = {"workers": len({p.get("worker") for p in payloads})} if shared is not None else {}
        doc = write_results(payloads, results_path, transcripts_dir, settings=workers)
        from _pytest.junitxml import xml_key

        junit = config.stash.get(xml_key, None)
        if junit is not None:  # the run's one statement per client (reports.clients) as JUnit's properties
            for name, line in junit_properties(doc):
                junit.add_global_property(name, line)
