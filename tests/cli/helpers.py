"""Run `harnesscheck` as a user does (a real process), and small real endpoints to point it at."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.processes import free_port, http_process  # noqa: F401 - free_port: the CLI tests' import


@dataclass(frozen=True)
class Ran:
    rc: int
    out: str
    err: str
    seconds: float

    def one_line(self) -> str:
        """The single stderr line the command ended with (asserting there is exactly one)."""
        lines = [line for line in self.err.splitlines() if line.strip()]
        assert len(lines) == 1, f"expected one line on stderr, got {len(lines)}:\n{self.err}"
        return lines[0]


def harnesscheck(*args: str, cwd: Path, timeout: float = 120.0, env: dict[str, str] | None = None) -> Ran:
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "harnesscheck", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})
    seconds = time.monotonic() - started
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout, proc.stderr + proc.stdout
    return Ran(proc.returncode, proc.stdout, proc.stderr, seconds)


@contextmanager
def file_server(root: Path) -> Iterator[str]:
    """`python -m http.server` on a free port: HTTP, but no LLM API."""
    with http_process(lambda port: [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
                      cwd=root, quiet=True) as url:
        yield url


@contextmanager
def counting_listener() -> Iterator[tuple[str, list[object]]]:
    """A TCP port that accepts connections and says nothing: the list grows by one per connection,
    so a test can tell that a command sent no request at all."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    sock.settimeout(0.1)
    accepted: list[object] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            accepted.append(conn)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}", accepted
    finally:
        stop.set()
        thread.join(timeout=5)
        for conn in accepted:
            conn.close()  # type: ignore[attr-defined]
        sock.close()


def processes_with_cmdline(marker: str) -> list[int]:
    """Pids whose command line holds ``marker``."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if marker.encode() in (proc / "cmdline").read_bytes():
                    found.append(int(proc.name))
            except OSError:
                pass
    return found


def processes_with_env(marker: str) -> list[int]:
    """Pids of live processes whose environment holds `marker` (inherited by every descendant,
    even one re-parented to init or in a session of its own)."""
    found = []
    needle = marker.encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().split(") ", 1)[1][0]
        except (OSError, IndexError):
            continue
        if needle in environ and state != "Z":
            found.append(int(entry.name))
    return found
