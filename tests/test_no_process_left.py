"""Interrupting pytest leaves no process behind (issue 33): the shared servers (each in a process
group of its own), a plain HTTP server and a forked suite run (conformance/forked.py: zygote, forked
server, forked suite) are all ended when pytest -n 2 is stopped by Ctrl-C at the terminal, by
SIGTERM to pytest, or by SIGTERM to one xdist worker (that worker's processes end with it); and the
run says it was interrupted."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path


from tests.cli.helpers import processes_with_env

ROOT = Path(__file__).resolve().parents[1]
PROBE = "tests/interrupt_probe.py"


def _wait(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def _worker_of(pid: int) -> str | None:
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    found = [e.split(b"=", 1)[1].decode() for e in env if e.startswith(b"PYTEST_XDIST_WORKER=")]
    return found[0] if found else None


def _start(tmp_path: Path) -> tuple[subprocess.Popen, str, Path]:
    mark = f"HC_PROBE_RUN={uuid.uuid4().hex}"
    key, value = mark.split("=")
    probe_dir = tmp_path / "ready"
    probe_dir.mkdir()
    env = {**os.environ, key: value, "HC_PROBE_DIR": str(probe_dir), "PYTHONUNBUFFERED": "1"}
    env.pop("PYTEST_XDIST_WORKER", None)
    env.pop("PYTEST_ADDOPTS", None)
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-n", "2", "-p", "no:randomly", "-q", PROBE],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        _wait(lambda: len(list(probe_dir.iterdir())) == 2, 180, "both probes to be ready")
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        raise
    return proc, mark, probe_dir


def _finish(proc: subprocess.Popen, mark: str) -> str:
    try:
        out, _ = proc.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        raise AssertionError(f"pytest did not end after the stop:\n{out[-3000:]}") from None
    left: list[int] = []
    deadline = time.monotonic() + 20
    while (left := processes_with_env(mark)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert left == [], [Path(f"/proc/{p}/cmdline").read_bytes().replace(b"\0", b" ")[:200] for p in left]
    return out


def test_sigterm_to_pytest_ends_every_server_and_suite_run(tmp_path: Path) -> None:
    proc, mark, _ = _start(tmp_path)
    running = processes_with_env(mark)
    assert len(running) >= 8, running  # pytest, 2 workers, 3 servers, http.server, zygote, its server + suite
    os.kill(proc.pid, signal.SIGTERM)
    out = _finish(proc, mark)
    assert "KeyboardInterrupt" in out or "Interrupted" in out or "interrupted" in out, out[-2000:]


def test_sigterm_to_a_worker_then_ctrl_c_end_every_process(tmp_path: Path) -> None:
    """SIGTERM to the worker holding the forked suite run: its zygote, forked server and suite end
    (the worker itself lingers until the controller ends); then a Ctrl-C at the terminal ends the rest."""
    proc, mark, probe_dir = _start(tmp_path)
    ready = {p.name.split("-")[1]: (p.name.split("-")[2], int(p.name.split("-")[3])) for p in probe_dir.iterdir()}
    worker, pid = ready["suite"]
    mine = [p for p in processes_with_env(mark) if _worker_of(p) == worker and p != pid]
    assert len(mine) >= 3, mine  # the zygote, the forked server and the forked suite
    os.kill(pid, signal.SIGTERM)
    try:
        _wait(lambda: not [p for p in processes_with_env(mark) if _worker_of(p) == worker], 60,
              f"worker {worker}'s processes to end")
    finally:
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal sends on Ctrl-C
    _finish(proc, mark)
