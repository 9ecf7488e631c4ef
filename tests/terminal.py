"""Run a command on a pseudo-terminal, as a person at a terminal would see it (live progress lines)."""

from __future__ import annotations

import os
import pty
import subprocess
import time


def on_a_terminal(cmd: list[str], *, columns: int = 100, deadline_s: float = 180) -> tuple[int, bytes]:
    """The exit status and everything `cmd` wrote to its terminal (stdout and stderr both)."""
    primary, secondary = pty.openpty()
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=secondary, stderr=secondary,
                            env={**os.environ, "COLUMNS": str(columns)})
    os.close(secondary)
    seen = b""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        try:
            chunk = os.read(primary, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    os.close(primary)
    return proc.wait(timeout=60), seen
