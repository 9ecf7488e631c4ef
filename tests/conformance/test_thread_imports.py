"""The kit's threads import none of the kit's modules (a kit error seen in the fault matrix, 2 of 82
rows): pytest's assertion rewriter parses every module of a plugin's distribution it imports, and CPython
3.11's AST constructor is not thread-safe, so two threads importing kit modules at once can fail with
"SystemError: AST constructor recursion depth mismatch" wherever .pyc files are not written
(PYTHONDONTWRITEBYTECODE, a read-only install). The client-session replays and the context sessions
run in threads: each API's grammar module is imported before they start, in the main thread. (The SDK
import thread of test_sdk.py still makes pytest rewrite anyio, a pytest plugin's module, in a thread: left,
named in the closing note of 2026-12-07.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

_PROBE = r"""
import json, sys, threading
import _pytest.assertion.rewrite as rewrite
imports = []
parse = rewrite._rewrite_test  # where pytest parses a module it rewrites: the race site
def logged(fn, config):
    if threading.current_thread().name.startswith(("hc-client-session", "hc-session")):
        imports.append([threading.current_thread().name, str(fn)])
    return parse(fn, config)
rewrite._rewrite_test = logged
from pathlib import Path
from harnesscheck.conformance.runner import SuiteOptions, run_suite
doc = run_suite(SuiteOptions(select="CLIENT or CTX-002"), Path(sys.argv[1]), quiet=True, after=lambda *a: None)
print(json.dumps({"outcomes": {c["id"]: c["outcome"] for c in doc["checks"]}, "imports": imports}))
"""


def test_no_kit_module_is_imported_in_a_kit_thread(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-c", _PROBE, str(tmp_path / "out")], capture_output=True, text=True,
                          timeout=300, env={"PYTHONDONTWRITEBYTECODE": "1", **__import__("os").environ})
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert set(got["outcomes"].values()) == {"pass"}, got["outcomes"]
    assert got["imports"] == [], got["imports"]
