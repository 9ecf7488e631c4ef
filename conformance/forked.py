"""Suite runs forked from a warm process: what the fault matrix does once per fault.

A suite run in a fresh subprocess (`runner.run_suite(subprocess_run=True)`) spends seconds before
its first check: the interpreter, pytest, the official SDKs (`anthropic` alone takes about a second
to import), then a reference server, itself a fresh interpreter importing the server. Run after run
those are the same imports. A `Forker` pays them once: it starts one small process (the zygote)
that imports them and then only forks. For each run it forks the reference server with the run's
arguments (`harnesscheck serve --port 0 ...`, in its own session), waits for its "listening on"
line, forks the suite (`pytest.main` over this package, in its own session) against it, waits,
stops the server, and answers with pytest's exit status. The suite sees the server as the embedded
one it stands for: the same arguments, every optional feature it offers declared (as
`runner.run_suite` does for `--verify-clients`), and its results are read as a subprocess run's.

The zygote is single-threaded (it is safe to fork) and holds no server, loop, tokenizer or socket
of its own. Each child asks the kernel to kill it when the zygote dies (PR_SET_PDEATHSIG), and the
zygote stops its children and exits when its owner goes (its stdin closes), so an interrupted
owner, killed in any way, leaves no process behind; an owner stopped by Ctrl-C asks the suite to
stop (SIGINT: it writes what it measured) and gets the results so far, as `run_suite` does.

    with Forker() as forker:
        doc = forker.run(SuiteOptions(server_args=("--fault=x",)), out)

`run_forked(options, out)` borrows an idle zygote from a per-process pool (one is started when none
is idle, so threads can run suites at once), for callers that run many suites: the fault matrix,
the kit's own tests.
"""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import sys
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

from harnesscheck.conformance.runner import RunInterrupted, SuiteOptions
from harnesscheck.errors import Interrupted

__all__ = ["Forker", "close_all", "run_forked"]

SERVER_START_S = 60.0  # a forked server prints "listening on" within this, or the run fails
STOP_GRACE_S = 30.0  # a suite asked to stop (SIGINT) has this long to write its results

# The zygote's program. Imports first (what a suite run and a server would import), then a loop:
# one JSON job per stdin line, one JSON answer per job on stdout. Nothing here starts a thread.
_ZYGOTE = r'''
import ctypes, json, os, select, signal, sys, time
import pytest, _pytest.junitxml, _pytest.terminal  # noqa: F401 - warm imports for the forked suites
for name in ("anthropic", "openai", "httpx", "pydantic", "jsonschema", "numpy", "uvicorn", "starlette",
             "harnesscheck.cli.main", "harnesscheck.cli.commands.serve", "harnesscheck.reference_server.app",
             "harnesscheck.conformance.plugin", "harnesscheck.conformance.grammar",
             "harnesscheck.conformance.session", "harnesscheck.conformance.witnesses"):
    try:
        __import__(name)
    except Exception:  # an optional part missing here is imported (or missed) by the child itself
        pass
answer, jobs = os.fdopen(os.dup(1), "w"), os.dup(0)  # jobs read unbuffered: select sees every byte
devnull = os.open(os.devnull, os.O_RDWR)
os.dup2(devnull, 0)
os.dup2(devnull, 1)
pending = [b""]


def read_line(timeout):
    """The next job line (bytes), b"" at EOF, None when none came within `timeout` (None: wait)."""
    while b"\n" not in pending[0]:
        ready, _, _ = select.select([jobs], [], [], timeout)
        if not ready:
            return None
        chunk = os.read(jobs, 65536)
        if not chunk:
            return b""
        pending[0] += chunk
    line, _, pending[0] = pending[0].partition(b"\n")
    return line + b"\n"
try:
    _prctl = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):
    _prctl = None


def child(log):
    """In a forked child: own session, killed with the zygote, fresh randomness, output to `log`."""
    os.setsid()
    if _prctl is not None:
        _prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() == 1:
        os._exit(1)
    import random
    random.seed()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)
    if log is not None:
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.dup2(fd, 2)
        os.close(fd)


def kill_group(pid, grace):
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pid, sig)
        except OSError:
            return
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            if os.waitpid(pid, os.WNOHANG)[0]:
                break
            time.sleep(0.02)
        else:
            continue
        break
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


def start_server(args, log):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        child(log)
        os.dup2(w, 1)
        os.close(w)
        code = 1
        try:
            from harnesscheck.cli.main import main
            code = main(["serve", "--port", "0", *args])
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else 1
        finally:
            os._exit(int(code or 0))
    os.close(w)
    deadline, seen = time.monotonic() + SERVER_START_S, b""
    while time.monotonic() < deadline and b"\n" not in seen.partition(b"listening on ")[2]:
        ready, _, _ = select.select([r], [], [], 0.1)
        if ready:
            chunk = os.read(r, 65536)
            if not chunk:
                break
            seen += chunk
    tail = seen.partition(b"listening on ")[2]
    if b"\n" not in tail:
        kill_group(pid, 2.0)
        os.close(r)
        return None, None, None
    return pid, r, tail.split(b"\n", 1)[0].decode().strip()


def run(job):
    log = job.get("log")
    server, pipe, url = start_server(job["server_args"], log)
    if server is None:
        return {"error": f"the reference server did not start (see {log})"}
    pid = os.fork()
    if pid == 0:
        child(log)
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
        os.environ.update(job.get("env") or {})
        code = 3
        try:
            code = int(pytest.main([*job["args"], "--hc-endpoint", url]))
        finally:
            os._exit(code)
    stopped, status = False, None
    while status is None:
        ready, _, _ = select.select([pipe], [], [], 0)
        if ready:
            os.read(pipe, 65536)  # the server's output, drained so it never blocks on a full pipe
        line = read_line(0.1)
        if line == b"":  # our owner is gone: stop everything and go
            kill_group(pid, 2.0)
            kill_group(server, 2.0)
            os._exit(0)
        if line and not stopped and json.loads(line).get("stop"):
            stopped, stop_at = True, time.monotonic()
            try:
                os.killpg(pid, signal.SIGINT)  # the suite writes what it measured, as at a Ctrl-C
            except OSError:
                pass
        if stopped and time.monotonic() - stop_at > STOP_GRACE_S:
            kill_group(pid, 0.0)
        done, raw = os.waitpid(pid, os.WNOHANG)
        if done:
            status = os.waitstatus_to_exitcode(raw)
    try:
        os.killpg(pid, signal.SIGKILL)  # whatever the suite left in its session
    except OSError:
        pass
    kill_group(server, 5.0)
    os.close(pipe)
    return {"code": status, "interrupted": stopped}


while True:
    line = read_line(None)
    if not line:
        break
    job = json.loads(line)
    if job.get("stop"):
        continue  # a stop that came after its run ended
    answer.write(json.dumps(run(job)) + "\n")
    answer.flush()
'''


class Forker:
    """One zygote (see the module docstring): `run` one suite at a time; `close` (or the end of a
    `with` block) ends it."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[str] | None = None

    def _zygote(self) -> subprocess.Popen[str]:
        if self._proc is None or self._proc.poll() is not None:
            program = (f"SERVER_START_S = {SERVER_START_S!r}\nSTOP_GRACE_S = {STOP_GRACE_S!r}\n" + _ZYGOTE)
            self._proc = subprocess.Popen([sys.executable, "-c", program], stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                          start_new_session=True, close_fds=True)
        return self._proc

    def run(self, options: SuiteOptions, out: Path) -> dict[str, Any]:
        """The suite with `options` against a forked reference server started with
        `options.server_args` after the embedded server's own; the results document (results.json in `out`, the children's stderr
        in `out`/suite.log). RunInterrupted (or Interrupted before anything was measured) when
        stopped by Ctrl-C."""
        from harnesscheck.conformance.options import embedded_features, embedded_server_args

        if options.endpoint:
            raise ValueError("a forked run starts its own reference server: give server_args, not an endpoint")
        out.mkdir(parents=True, exist_ok=True)
        results = out / "results.json"
        results.unlink(missing_ok=True)
        suite = replace(options, preflight=False, concurrency=1,
                        expect=tuple(sorted(set(options.expect) | embedded_features(options.server_args))))
        args = [*suite.pytest_args(out), "-W", "ignore::pytest.PytestAssertRewriteWarning"]
        env = {"HARNESSCHECK_API_KEY": options.api_key} if options.api_key else {}
        server_args = [*embedded_server_args(options.witness), *options.server_args]  # as the plugin starts it
        job = {"args": args, "server_args": server_args, "env": env, "log": str(out / "suite.log")}
        proc = self._zygote()
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps(job) + "\n")
        proc.stdin.flush()
        try:
            reply = proc.stdout.readline()
        except KeyboardInterrupt:
            proc.stdin.write(json.dumps({"stop": True}) + "\n")
            proc.stdin.flush()
            reply = proc.stdout.readline()
            if not results.exists():
                raise Interrupted("interrupted before any check ran") from None
            doc = json.loads(results.read_text(encoding="utf-8"))
            doc["run"]["interrupted"] = True
            raise RunInterrupted(doc) from None
        if not reply:
            raise RuntimeError(f"the suite's fork server ended (exit {proc.poll()}); see {out / 'suite.log'}")
        answer = json.loads(reply)
        if "error" in answer:
            raise RuntimeError(answer["error"])
        if not results.exists():
            raise RuntimeError(f"the forked suite wrote no {results} (pytest exit status {answer['code']}); "
                               f"see {out / 'suite.log'}")
        return json.loads(results.read_text(encoding="utf-8"))

    def close(self) -> None:
        """Close the zygote's stdin: it stops whatever runs and exits."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait()

    def __enter__(self) -> Forker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_POOL_LOCK = threading.Lock()
_IDLE: list[Forker] = []
_ALL: list[Forker] = []
_POOL_PID = os.getpid()


def run_forked(options: SuiteOptions, out: Path) -> dict[str, Any]:
    """`Forker.run` on an idle zygote of this process's pool (a new one when all are busy)."""
    global _POOL_PID
    with _POOL_LOCK:
        if os.getpid() != _POOL_PID:  # a forked copy of this process: the pool's zygotes are not ours
            _IDLE.clear()
            _ALL.clear()
            _POOL_PID = os.getpid()
        forker = _IDLE.pop() if _IDLE else None
        if forker is None:
            forker = Forker()
            _ALL.append(forker)
    try:
        return forker.run(options, out)
    finally:
        with _POOL_LOCK:
            _IDLE.append(forker)


@atexit.register
def close_all() -> None:
    """End every zygote of this process's pool (at exit; a test session's end)."""
    with _POOL_LOCK:
        forkers = list(_ALL) if os.getpid() == _POOL_PID else []
        _ALL.clear()
        _IDLE.clear()
    for forker in forkers:
        forker.close()
