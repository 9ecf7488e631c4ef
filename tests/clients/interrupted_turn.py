"""Run by tests/clients/test_unit.py in a process of its own: one client turn (run_turn) whose stand-in
client starts writers that fill its private TMPDIR without pause, as node does, until the test stops
this process with SIGINT. argv: the endpoint, the work folder."""

from __future__ import annotations

import sys
from pathlib import Path

from harnesscheck.agents.clients import turns
from harnesscheck.agents.clients.claude_code import ClaudeCode
from harnesscheck.agents.clients.install import Install

WRITER = """
import os, sys, time
d = os.environ["TMPDIR"]
n = 0
open(os.path.join(d, f"ready-{os.getpid()}"), "w").close()
while True:
    n += 1
    sub = os.path.join(d, f"w{os.getpid()}-{n % 50}")
    os.makedirs(sub, exist_ok=True)
    with open(os.path.join(sub, str(n)), "w") as f:
        f.write("x" * 512)
"""
# the client: writers in its process group (no pipe of the kit held), then it waits
CLIENT = f"""
import subprocess, sys, time
for _ in range(4):
    subprocess.Popen([sys.executable, "-c", {WRITER!r}], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
time.sleep(600)
"""


class Writers(ClaudeCode):
    def command(self, inst, prep, prompt, model):
        return [sys.executable, "-c", CLIENT]


if __name__ == "__main__":
    endpoint, work = sys.argv[1], Path(sys.argv[2])
    inst = Install("claude-code", work / "cache" / "claude-code", version="1.0")
    turns.run_turn(Writers(), inst, endpoint, "m", work / "turn", turn="text", prompt="Say ok", timeout=300)
