"""Run the conformance suites programmatically (what `harnesscheck check` / `run` / `faults
--matrix` do): pytest over this package with the plugin, results JSON in an output folder.

`check_endpoint` is what `check` and `run` ask first (conformance.preflight); `run_suite` does not,
so the kit's own tests can run the suite against deliberately broken servers. A step to run after
the suite against the same endpoint (`after`: `check --verify-clients` passes the real clients'
verification, harnesscheck.agents.clients.verify) makes `run_suite` start the embedded reference
server itself, so that it outlives the suite. A run stopped by Ctrl-C or SIGTERM ends its pytest session
cleanly (the embedded server stopped by its fixture, the results written) and raises
RunInterrupted with what was measured, marked `run.interrupted`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from harnesscheck.errors import STOP_REQUESTED, Interrupted, UsageError

PACKAGE = Path(__file__).resolve().parent
CHILD_STOP_S = 30.0  # a suite child asked to stop has this long to tear down before it is killed

_REWRITE_WARNING = "pytest.PytestAssertRewriteWarning"
# pytest's exit codes (pytest.ExitCode), without importing pytest for a subprocess run.
_INTERRUPTED, _USAGE_ERROR, _NO_TESTS = 2, 4, 5


class RunInterrupted(Interrupted):
    """The run was stopped part way: `doc` is what was measured (`run.interrupted` true, also written
    to results.json)."""

    def __init__(self, doc: dict[str, Any]):
        super().__init__("interrupted")
        self.doc = doc


@dataclass(slots=True)
class SuiteOptions:
    endpoint: str | None = None
    model: str | None = None
    api_key: str | None = None
    apis: str = "anthropic,chat,responses"
    tries: int = 3
    timeout: float = 30.0
    expect: tuple[str, ...] = ()
    server_args: tuple[str, ...] = ()
    witness: str = "auto"
    junit: str | None = None
    select: str | None = None  # pytest -k expression
    verbose: bool = False
    preflight: bool = True  # check_endpoint checks the endpoint (the suite never does: see pytest_args)
    concurrency: int = 1  # checks run at once (xdist workers); timing-sensitive ones still alone (sharing.EndpointLock)
    min_verdicts: float = 0.5  # below this share of checks with a verdict: no pass (verdict.run_verdicts)
    min_must_verdicts: float = 0.8  # below this share of MUST checks with a verdict: no pass
    quick: bool = False  # --quick: a profile for slow endpoints (options.QUICK_LEAVES_OUT says what it leaves out)
    peer: str = ""  # a peer profile (conformance/levers.py), e.g. dynamo-mocker
    context_window: int | None = None  # --context-window: the model's window (None: ask the endpoint)

    def pytest_args(self, out: Path) -> list[str]:
        args = [str(PACKAGE), "-c", str(PACKAGE / "pytest.ini"), "--rootdir", str(PACKAGE),
                "--hc-results", str(out / "results.json"), "--hc-transcripts", str(out / "transcripts"),
                "--hc-apis", self.apis, "--hc-tries", str(self.tries), "--hc-timeout", str(self.timeout),
                "--hc-witness", self.witness, "-p", "no:randomly",
                # a failed check is said once in the FAILURES section (the plugin's message in place of a
                # traceback), then in the summary's MUST list: no `FAILED ...` repeat (-rE: errors only)
                "-rE", "--tb=short",
                # pytest-benchmark would leave its storage folder (.benchmarks/) in the working directory;
                # hypothesis's plugin imports hypothesis (a second or more) to print its summary
                "-p", "no:benchmark", "-p", "no:hypothesispytest",
                # httpx (so anyio, a pytest plugin) is imported before pytest when the runner checks the
                # endpoint or starts the server: nothing of the suite's to rewrite there
                "-W", f"ignore:Module already imported so cannot be rewritten; anyio:{_REWRITE_WARNING}",
                # the kit itself (the plugin's package) is imported by then too: its checks are plain asserts
                # with their own messages
                "-W", f"ignore:Module already imported so cannot be rewritten; harnesscheck:{_REWRITE_WARNING}",
                # checked before (check_endpoint), or a broken server on purpose (the kit's own tests)
                "--hc-no-preflight"]
        args += ["-v"] if self.verbose else ["-q"]
        if self.concurrency > 1:  # xdist workers, given checks in collection order as they free up (the
            # timing-sensitive ones last: plugin.pytest_collection_modifyitems)
            args += ["-n", str(self.concurrency), "--dist", "load"]
        if self.endpoint:
            args += ["--hc-endpoint", self.endpoint]
        if self.model:
            args += ["--hc-model", self.model]
        if self.quick:
            args.append("--hc-quick")
        for feature in self.expect:
            args += ["--hc-expect", feature]
        if self.peer:
            args += ["--hc-peer", self.peer]
        if self.context_window is not None:
            args += ["--hc-context-window", str(self.context_window)]
        for server_arg in self.server_args:
            args.append(f"--hc-server-arg={server_arg}")
        if self.junit:
            args += ["--junitxml", self.junit]
        if self.select:
            args += ["-k", self.select]
        return args


def concurrency_problem(concurrency: int) -> str | None:
    """Why `--concurrency N` cannot be used (below 1, or above 1 without pytest-xdist), or None."""
    if concurrency < 1:
        return f"--concurrency must be 1 or more, got {concurrency}"
    if concurrency > 1:
        import importlib.util

        if importlib.util.find_spec("xdist") is None:
            return "--concurrency above 1 runs the checks in pytest-xdist workers: pip install pytest-xdist"
    return None


#: A step run after the suite against the endpoint it checked: it gets the results document (to add its
#: own keys to, written to results.json after it), the options the suite ran with (`endpoint` set,
#: the embedded server's when none was given) and the output folder.
AfterSuite = Callable[[dict[str, Any], SuiteOptions, Path], None]


def run_suite(options: SuiteOptions, out: Path, *, subprocess_run: bool = False, quiet: bool = False,
              usage: dict[str, float] | None = None, after: AfterSuite | None = None) -> dict[str, Any]:
    """Run the suite, then `after` (if given); return the results document. The API key travels by
    environment only. With subprocess_run, `usage` (if given) gets the run's own peak memory:
    {"max_rss_mb": ...}.

    Raises UsageError when no check was selected, and RunInterrupted (or Interrupted, before
    anything was measured) when stopped."""
    out.mkdir(parents=True, exist_ok=True)
    results = out / "results.json"
    results.unlink(missing_ok=True)  # a previous run's document is never read as this one's
    server = None
    try:
        suite = options
        if after is not None and not options.endpoint:
            server, suite = _start_embedded(options)
        code, interrupted = _run_pytest(suite, out, subprocess_run=subprocess_run, quiet=quiet, usage=usage)
        doc = _read_results(results, code, interrupted, options)
        if server is not None:
            doc["run"]["endpoint"] = "embedded reference server"
            doc["run"].setdefault("server", {})["kind"] = "embedded"
        if after is not None and not interrupted:
            try:
                after(doc, suite, out)
            except KeyboardInterrupt:
                interrupted = True
        if interrupted:
            doc["run"]["interrupted"] = True
        from harnesscheck.conformance.verdict import run_verdicts

        doc["run"]["verdicts"] = run_verdicts(doc["checks"], min_share=options.min_verdicts,
                                              min_must_share=options.min_must_verdicts,
                                              stall=doc["run"].get("stall"))
        from harnesscheck.reports.clients import summary

        doc["clients"] = summary(doc)  # the one per-client statement, with the clients' verification if run
        results.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
        if interrupted:
            raise RunInterrupted(doc)
        return doc
    finally:
        if server is not None:
            server.stop()


def check_endpoint(options: SuiteOptions, progress: Callable[[str], None] | None = None) -> None:
    """UsageError with the one line to print when the --endpoint is unusable (conformance.preflight:
    each probe waits up to --timeout; `progress` hears what a slow one waits for)."""
    if not options.endpoint or not options.preflight:
        return
    from harnesscheck.conformance.options import split_apis
    from harnesscheck.conformance.preflight import require_usable

    require_usable(options.endpoint, api_key=options.api_key, model=options.model, apis=split_apis(options.apis),
                   timeout=options.timeout, progress=progress, generate=True)


def _start_embedded(options: SuiteOptions) -> tuple[Any, SuiteOptions]:
    """The embedded reference server, started here rather than by the plugin, so it outlives the suite."""
    from harnesscheck.conformance.options import embedded_features, embedded_server_args
    from harnesscheck.reference_server.launch import ServerProcess

    server = ServerProcess([*embedded_server_args(options.witness), *options.server_args]).start()
    expect = tuple(sorted(set(options.expect) | embedded_features(options.server_args)))
    return server, replace(options, endpoint=server.url, expect=expect)


class _StopWatch:
    """A pytest plugin that notes why a session stopped early (pytest exits 2 for each, and for
    collection errors): a Ctrl-C / SIGTERM, or `pytest.exit(reason)`, the plugin's one-line refusal."""

    interrupted = False
    exit_reason = ""

    def pytest_keyboard_interrupt(self, excinfo: Any) -> None:
        if isinstance(excinfo.value, KeyboardInterrupt):
            self.interrupted = True
        else:
            self.exit_reason = str(getattr(excinfo.value, "msg", excinfo.value)).removeprefix("harnesscheck: ")


def _run_pytest(options: SuiteOptions, out: Path, *, subprocess_run: bool, quiet: bool,
                usage: dict[str, float] | None) -> tuple[int, bool]:
    """pytest's exit status, and whether it was interrupted."""
    args = options.pytest_args(out)
    env_key = {"HARNESSCHECK_API_KEY": options.api_key} if options.api_key else {}
    if not subprocess_run:
        import pytest

        os.environ.update(env_key)
        watch = _StopWatch()
        plugins: list[Any] = [watch]
        if not quiet and not options.verbose and sys.stdout.isatty():  # a live line in the dots' place
            from harnesscheck.conformance.progress import LiveLine

            plugins.append(LiveLine(sys.stdout))
        try:
            code = int(pytest.main(args, plugins=plugins))
        except KeyboardInterrupt:  # a stop while the session finished, deferred until it was done (sharing.stops_deferred):
            return _INTERRUPTED, True  # the results are written; read as an interrupted run's
        if watch.exit_reason and not (out / "results.json").exists():
            raise UsageError(watch.exit_reason)
        return code, watch.interrupted
    stdout = subprocess.DEVNULL if quiet else None
    # Its own session: a Ctrl-C at the terminal reaches only us, and we stop the child once, cleanly
    # (also from a worker thread, which sees the stop as STOP_REQUESTED).
    proc = subprocess.Popen([sys.executable, "-m", "pytest", *args], env={**os.environ, **env_key},
                            stdout=stdout, stderr=stdout, start_new_session=True)
    peak_kb = 0
    try:
        while proc.poll() is None:
            if STOP_REQUESTED.is_set():
                raise Interrupted("stop requested")
            # VmHWM: the peak of the child's own address space (ru_maxrss would include the
            # parent's resident set inherited at fork, before exec).
            peak_kb = max(peak_kb, _vm_hwm_kb(proc.pid))
            time.sleep(0.1)
    except KeyboardInterrupt:
        proc.send_signal(signal.SIGINT)  # pytest tears down (the embedded server) and writes results
        try:
            proc.wait(timeout=CHILD_STOP_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        return proc.returncode, True
    finally:
        try:  # whatever of its session is left (a server of a child that was killed)
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if usage is not None:
            usage["max_rss_mb"] = peak_kb / 1024
    return proc.returncode, False


def inferred_verdicts(doc: dict[str, Any]) -> dict[str, str]:
    """Per client label, what the results infer (reports.clients.inferred: the one per-client statement),
    for the comparison with the clients measured against the endpoint (agents.clients.verify)."""
    from harnesscheck.reports.clients import inferred

    return inferred(doc)


def _read_results(results: Path, code: int, interrupted: bool, options: SuiteOptions) -> dict[str, Any]:
    if not results.exists():
        if interrupted:
            raise Interrupted("interrupted before any check ran")
        if code == _NO_TESTS:
            if options.select:
                raise UsageError(f"-k {options.select!r} selects no check of the APIs {options.apis}; "
                                 "`harnesscheck catalog` lists them")
            raise UsageError("no check was collected")
        if code == _USAGE_ERROR:
            raise UsageError("pytest refused the suite's arguments (its message is above)")
        raise RuntimeError(f"the conformance run wrote no {results} (pytest exit status {code}); "
                           "see the output above")
    return json.loads(results.read_text(encoding="utf-8"))


def _vm_hwm_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0
