"""Start the reference server in a subprocess on a free port and wait until it answers.

Used by the kit (the embedded server of `run` / `check` / `bench`) and by the tests, so every
HTTP test talks to a real server process over loopback.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Sequence

import httpx

_LISTEN = re.compile(r"listening on (http://\S+)")


def wait_healthy(url: str, deadline: float) -> bool:
    """Poll a server's /health until it answers 200 (True) or ``deadline`` (time.monotonic) passes."""
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                return True
        except httpx.HTTPError:
            time.sleep(0.05)
    return False


class ServerProcess:
    """`with ServerProcess(["--fault", "x"]) as server: server.url`"""

    def __init__(self, args: Sequence[str] = (), *, startup_timeout: float = 60.0, env: dict[str, str] | None = None):
        self.args = list(args)
        self.startup_timeout = startup_timeout
        self.env = env
        self.url = ""
        self.proc: subprocess.Popen[str] | None = None
        self.output: list[str] = []

    def start(self) -> ServerProcess:
        """Start the server and wait until /health answers; on any failure or interruption on the way
        (Ctrl-C, SIGTERM) the process is stopped before the exception goes on."""
        cmd = [sys.executable, "-m", "harnesscheck", "serve", "--port", "0", *self.args]
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **(self.env or {})}
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        try:
            return self._wait_ready()
        except BaseException:
            self.stop()
            raise

    def _wait_ready(self) -> ServerProcess:
        assert self.proc is not None
        deadline = time.monotonic() + self.startup_timeout
        assert self.proc.stdout is not None
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            self.output.append(line)
            match = _LISTEN.search(line)
            if match:
                self.url = match.group(1)
                break
        if not self.url:
            raise RuntimeError("reference server did not start:\n" + "".join(self.output))
        # Keep draining its output so a chatty server never blocks on a full pipe.
        threading.Thread(target=self._drain, daemon=True).start()
        if wait_healthy(self.url, deadline):
            return self
        raise RuntimeError("reference server did not answer /health:\n" + "".join(self.output))

    def _drain(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            if len(self.output) < 2000:
                self.output.append(line)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 5 s; safe to call twice."""
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
