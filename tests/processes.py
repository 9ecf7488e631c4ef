"""Test servers run as subprocesses on a free loopback port, waited for until they answer HTTP.

Every server the shared fixtures start (``reference_server``, ``server_factory``, ``http_process``)
runs in a process group of its own, so a Ctrl-C at the terminal reaches pytest alone and the
fixture's teardown stops the server, whole. The groups are also registered here and with a guard
process (``agents.procgroup``): when pytest or an xdist worker is stopped (SIGINT, SIGTERM: the
conftest turns SIGTERM into an interruption, so teardowns run) whatever is still registered is
killed at its exit, and when it is killed outright the guard kills them.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import httpx

from harnesscheck.reference_server.launch import ServerProcess

_LOCK = threading.Lock()
_GROUPS: dict[int, subprocess.Popen] = {}  # group leader pid -> process, while it may be alive


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _guard():  # the kit's guard of process groups; None where it cannot start
    try:
        from harnesscheck.agents.procgroup import guard

        return guard()
    except Exception:  # noqa: BLE001 - the guard is a second line; the teardowns are the first
        return None


def own_group(proc: subprocess.Popen) -> subprocess.Popen:
    """Register ``proc`` (started with ``start_new_session=True``) to be ended with this process."""
    with _LOCK:
        _GROUPS[proc.pid] = proc
    g = _guard()
    if g is not None:
        g.watch_group(proc.pid)
    return proc


def end_group(proc: subprocess.Popen, grace_s: float = 5.0) -> None:
    """SIGTERM to ``proc``'s whole group, SIGKILL after ``grace_s``; reaps it and forgets it."""
    from harnesscheck.agents.procgroup import kill_group

    kill_group(proc, grace_s=grace_s)  # reaps the leader
    with _LOCK:
        _GROUPS.pop(proc.pid, None)
    g = _guard()
    if g is not None:
        g.forget_group(proc.pid)


def end_all_groups() -> None:
    """End every registered group still there (pytest's and each worker's exit)."""
    with _LOCK:
        procs = list(_GROUPS.values())
    for proc in procs:
        end_group(proc, grace_s=2.0)


class GroupServer(ServerProcess):
    """The reference server in its own process group, registered (see the module docstring)."""

    def start(self) -> GroupServer:
        cmd = [sys.executable, "-m", "harnesscheck", "serve", "--port", "0", *self.args]
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **(self.env or {})}
        self.proc = own_group(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                               env=env, start_new_session=True))
        try:
            self._wait_ready()
            return self
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        if self.proc is not None:
            end_group(self.proc)


@contextmanager
def http_process(command: Callable[[int], Sequence[str]], probe: str = "/", *, cwd: Path | None = None,
                 startup_s: float = 20.0, quiet: bool = False) -> Iterator[str]:
    """Start `command(port)` on a free port and yield its base URL once GET `probe` answers (any
    status); stop it (its whole group) afterwards. A process that exits or stays silent past
    `startup_s` is an error."""
    port = free_port()
    out = subprocess.DEVNULL if quiet else None
    proc = own_group(subprocess.Popen(list(command(port)), cwd=cwd, stdout=out, stderr=out, start_new_session=True))
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + startup_s
        while True:
            try:
                httpx.get(url + probe, timeout=2)
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError(f"{' '.join(command(port))} did not start") from None
                time.sleep(0.05)
        yield url
    finally:
        end_group(proc)


__all__ = ["GroupServer", "end_all_groups", "end_group", "free_port", "http_process", "own_group"]
