"""Child processes that end with the kit: each agent or client runs in its own process group, and a
guard process ends those groups (and removes the scratch folders) when the kit's process dies,
however it dies.

A process group is what a time-out, a cancel or an interruption kills as a whole (``kill_group``):
an agent's shells, test runners and servers die with it. That is done by the process that started
the group, when it can. When it cannot — it was killed itself (a Ray task cancelled with
``force=True`` kills its worker with SIGKILL; the kit killed by the OOM killer) — the guard does
it: one small process per kit process (``guard()``, started on first use, in its own session so a
Ctrl-C at the terminal does not end it first, and nobody's child, so a cleaner that kills a dead
process's children does not end it either), which reads what to clean up from a pipe and, when
the pipe closes (its owner exited, whichever way), kills every group still registered and removes
every folder still registered. The owner forgets a group once it has ended it, and a folder once
it has removed it (or keeps it on purpose), so a clean exit leaves the guard nothing to do.

    g = guard()
    proc = subprocess.Popen(argv, start_new_session=True)
    g.watch_group(proc.pid)
    ...
    kill_group(proc)          # the whole group, TERM then KILL
    g.forget_group(proc.pid)
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

__all__ = ["Guard", "guard", "kill_group"]

# The guard's program: stdin lines "group PGID" / "ungroup PGID" / "folder PATH" / "unfolder PATH";
# at EOF (its owner is gone) SIGKILL to every group left, then every folder left is removed.
# It forks first and the parent exits: the guard is nobody's child, so a cleaner that kills a dying
# process's children (Ray kills a cancelled worker's) does not kill the guard with them.
_GUARD = r"""
import os, shutil, signal, sys
if os.fork():
    os._exit(0)
signal.signal(signal.SIGINT, signal.SIG_IGN)
groups, folders = set(), []
for raw in sys.stdin.buffer:
    kind, _, arg = raw.decode("utf-8", "surrogateescape").rstrip("\n").partition(" ")
    if kind == "group":
        groups.add(int(arg))
    elif kind == "ungroup":
        groups.discard(int(arg))
    elif kind == "folder":
        folders.append(arg)
    elif kind == "unfolder" and arg in folders:
        folders.remove(arg)
for g in groups:
    try:
        os.killpg(g, signal.SIGKILL)
    except OSError:
        pass
for f in folders:
    shutil.rmtree(f, ignore_errors=True)
"""


class Guard:
    """The guard process of this process (see the module docstring). Thread-safe."""

    def __init__(self) -> None:
        read, self._write = os.pipe()
        try:
            self._proc = subprocess.Popen([sys.executable, "-S", "-c", _GUARD], stdin=read,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                          start_new_session=True, close_fds=True)
            self._proc.wait()  # the first process, which forks the guard and exits
        finally:
            os.close(read)
        self._lock = threading.Lock()

    def _send(self, line: str) -> None:
        data = (line + "\n").encode("utf-8", "surrogateescape")
        with self._lock:
            try:
                os.write(self._write, data)
            except OSError:  # the guard is gone (killed by hand): nothing more it can do
                pass

    def watch_group(self, pgid: int) -> None:
        """Kill process group ``pgid`` if this process dies before ``forget_group(pgid)``."""
        self._send(f"group {int(pgid)}")

    def forget_group(self, pgid: int) -> None:
        self._send(f"ungroup {int(pgid)}")

    def remove_on_exit(self, folder: str | Path) -> None:
        """Remove ``folder`` if this process dies before ``forget_folder(folder)``."""
        self._send(f"folder {os.path.abspath(folder)}")

    def forget_folder(self, folder: str | Path) -> None:
        self._send(f"unfolder {os.path.abspath(folder)}")

    def close(self) -> None:
        """Close the pipe: the guard ends, cleaning up what is still registered."""
        with self._lock:
            if self._write >= 0:
                os.close(self._write)
                self._write = -1


_GUARD_LOCK = threading.Lock()
_GUARD_OF: dict[int, Guard] = {}  # pid -> its guard (a forked child must not use its parent's)


def guard() -> Guard:
    """This process's guard, started on first use."""
    pid = os.getpid()
    with _GUARD_LOCK:
        g = _GUARD_OF.get(pid)
        if g is None:
            _GUARD_OF.clear()  # a parent's guard, inherited by fork: not ours to use
            g = _GUARD_OF[pid] = Guard()
        return g


def kill_group(proc: subprocess.Popen, *, grace_s: float = 3.0) -> None:
    """End ``proc``'s process group (started with ``start_new_session=True``): SIGTERM, then SIGKILL
    after ``grace_s`` if the leader has not exited, then SIGKILL to whatever is left of the group
    (a child that outlived its leader). Reaps the leader."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            break
        try:
            proc.wait(timeout=grace_s)
            break
        except subprocess.TimeoutExpired:
            continue
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if proc.poll() is None:
        proc.wait()
