"""What the plugin's processes share (plugin.py's hooks call these): under pytest-xdist (`-n N`) the
controller starts the one embedded reference server and a lock folder and hands both to its workers
(`workerinput`); each worker sends each check's result to the controller with the check's own report
(as it is measured, so a run stopped part way keeps it), and the controller writes the one
results.json. Checks run concurrently against the endpoint, except those whose verdict rests on time
measured there (the catalog entry's `timing`), which hold it alone (`EndpointLock`). And how the
suite's process stops: SIGTERM as Ctrl-C, and a stop while the session finishes deferred until it is done.
"""

from __future__ import annotations

import fcntl
import shutil
import signal
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from harnesscheck.conformance import catalog
from harnesscheck.conformance.options import embedded_server_args
from harnesscheck.conformance.results import CheckResult, Collector

__all__ = ["COLLECTOR", "PACKAGE", "RESULT_ATTR", "SHARED", "WORKERINPUT_KEY", "EndpointLock", "LiveResults",
           "Shared", "collects_suite", "exclusive", "from_controller", "is_xdist_controller", "payloads",
           "restore_sigterm", "result_payload", "start_embedded", "stop_on_sigterm", "stops_deferred"]

PACKAGE = Path(__file__).resolve().parent
WORKERINPUT_KEY = "harnesscheck"  # in workerinput: the shared server and lock folder
RESULT_ATTR = "harnesscheck_result"  # on an xdist worker's report: the check's result, for the controller
COLLECTOR = pytest.StashKey[Collector]()  # on the config: the results of the checks this process ran


def exclusive(item: pytest.Item, witness: str) -> bool:
    """Whether the item's check holds the endpoint alone (catalog.Check.holds_endpoint_alone)."""
    marker = item.get_closest_marker("check")
    return marker is not None and catalog.get(marker.args[0]).holds_endpoint_alone(witness)


def start_embedded(config: pytest.Config) -> Any:
    from harnesscheck.reference_server.launch import ServerProcess

    # No modelled time, unless the timing witness is forced (options.embedded_server_args).
    return ServerProcess([*embedded_server_args(config.getoption("hc_witness")),
                          *config.getoption("hc_server_arg")]).start()


def collects_suite(config: pytest.Config) -> bool:
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
            if not config.getoption("hc_endpoint") and collects_suite(config):
                self.server = start_embedded(config)
        return {"lock_folder": str(self.folder), "embedded_url": self.server.url if self.server else None}

    def close(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None


SHARED = pytest.StashKey[Shared]()


def is_xdist_controller(config: pytest.Config) -> bool:
    return (config.pluginmanager.hasplugin("xdist") and not hasattr(config, "workerinput")
            and bool(getattr(config.option, "numprocesses", None)) and not getattr(config.option, "collectonly", False))


class LiveResults:
    """The xdist controller's listener: each check's result arrives with its report (RESULT_ATTR, set
    by the worker), so what was measured is here even when a worker never finishes (a run stopped by
    SIGTERM or Ctrl-C, a worker lost)."""

    def __init__(self, shared: Shared) -> None:
        self.shared = shared

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        payload = report.__dict__.pop(RESULT_ATTR, None)
        if payload is not None:
            self.shared.payloads.append(payload)


def result_payload(config: pytest.Config, result: CheckResult) -> dict[str, Any]:
    """One check's result as a worker sends it (Collector.payload of that result alone)."""
    collector = config.stash[COLLECTOR]
    payload = Collector(run=collector.run, secrets=collector.secrets, results=[result]).payload()
    payload["worker"] = config.workerinput.get("workerid", "")  # type: ignore[attr-defined]
    return payload


def from_controller(config: pytest.Config) -> dict[str, Any]:
    """What the xdist controller handed this worker (the lock folder, the embedded server's URL); {} else."""
    return (getattr(config, "workerinput", None) or {}).get(WORKERINPUT_KEY) or {}


def payloads(config: pytest.Config) -> tuple[list[dict[str, Any]], bool]:
    """The results this process writes, and whether it is the xdist controller merging its workers'."""
    shared = config.stash.get(SHARED, None)
    if shared is not None:
        return shared.payloads, True
    return ([config.stash[COLLECTOR].payload()] if COLLECTOR in config.stash else []), False


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


# -- stopping ---------------------------------------------------------------------------------------

_PREVIOUS_SIGTERM = pytest.StashKey[Any]()


def stop_on_sigterm(config: pytest.Config) -> None:
    """A SIGTERM stops the suite as Ctrl-C does (pytest's own default is to die at once, writing
    nothing): the session ends, and what was measured is written, marked interrupted. Only where
    nobody has a handler of their own (the CLI has), in the main thread; put back by restore_sigterm."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, None):
        return

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt("stopped by SIGTERM")

    config.stash[_PREVIOUS_SIGTERM] = signal.signal(signal.SIGTERM, stop)


def restore_sigterm(config: pytest.Config) -> None:
    previous = config.stash.get(_PREVIOUS_SIGTERM, None)
    if previous is not None:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def stops_deferred() -> Iterator[None]:
    """SIGINT and SIGTERM that come inside wait until it is left, then take effect (raised again, to
    the handler there was). Main thread only."""
    stops: list[int] = []
    previous = {sig: signal.signal(sig, lambda signum, frame: stops.append(signum))
                for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if stops:
            signal.raise_signal(stops[0])  # now, to the handler there was (the CLI's raises Interrupted)
