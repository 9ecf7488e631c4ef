"""Test servers run as subprocesses on a free loopback port, waited for until they answer HTTP."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def http_process(command: Callable[[int], Sequence[str]], probe: str = "/", *, cwd: Path | None = None,
                 startup_s: float = 20.0, quiet: bool = False) -> Iterator[str]:
    """Start `command(port)` on a free port and yield its base URL once GET `probe` answers (any
    status); stop it afterwards. A process that exits or stays silent past `startup_s` is an error."""
    port = free_port()
    out = subprocess.DEVNULL if quiet else None
    proc = subprocess.Popen(list(command(port)), cwd=cwd, stdout=out, stderr=out)
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
        proc.terminate()
        proc.wait(timeout=10)
