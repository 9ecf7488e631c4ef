"""The toy agent's pieces: arguments, the patch tool, exec_command, and a failed request's rollout.

Its loop against a reference server runs in tests/agents/test_swebench.py (the toy SWE-style run).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harnesscheck.agents.rollouts import parse_file
from harnesscheck.agents.toy_agent import PatchError, apply_patch, parse_args, run_exec

CALC = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a**b\n"


def test_parse_args_takes_codex_exec_arguments() -> None:
    argv = ["exec", "--json", "--skip-git-repo-check", "-c", "k=v", "-m", "m1", "fix\n`add`", "--max-turns=4"]
    opts = parse_args(argv)
    assert (opts["model"], opts["json"], opts["max_turns"], opts["words"]) == ("m1", True, 4, ["fix\n`add`"])
    with pytest.raises(ValueError):
        parse_args(["--request-timeout", "soon", "x"])


def test_apply_patch_update_add_delete_move(tmp_path: Path) -> None:
    (tmp_path / "calc.py").write_text(CALC)
    (tmp_path / "old.txt").write_text("x\n")
    patch = (
        "*** Begin Patch\n"
        "*** Update File: calc.py\n"
        "@@ def mul(a, b):\n"
        "-    return a**b\n"
        "+    return a * b\n"
        "@@ def add(a, b):\n"  # a second hunk above the first one is not found after it
        "-    return a - b\n"
        "+    return a + b\n"
        "*** End Patch\n"
    )
    with pytest.raises(PatchError, match="Failed to find expected lines"):
        apply_patch(patch, tmp_path)
    patch = patch.replace("@@ def mul", "@@ def xx")  # an unknown header: search from the start
    with pytest.raises(PatchError):
        apply_patch(patch, tmp_path)
    ok = (
        "*** Begin Patch\n*** Update File: calc.py\n@@ def add(a, b):\n-    return a - b\n+    return a + b\n"
        "@@\n def mul(a, b):\n-    return a**b\n+    return a * b\n"
        "*** Add File: pkg/new.py\n+VALUE = 1\n*** Delete File: old.txt\n*** End Patch"
    )
    assert apply_patch(ok, tmp_path) == ["M calc.py", "A pkg/new.py", "D old.txt"]
    assert (tmp_path / "calc.py").read_text() == CALC.replace("a - b", "a + b").replace("a**b", "a * b")
    assert (tmp_path / "pkg" / "new.py").read_text() == "VALUE = 1\n" and not (tmp_path / "old.txt").exists()
    moved = (
        "*** Begin Patch\n*** Update File: calc.py\n*** Move to: calc2.py\n@@\n"
        "-    return a + b\n+    return b + a\n*** End Patch"
    )
    assert apply_patch(moved, tmp_path) == ["M calc2.py"] and not (tmp_path / "calc.py").exists()
    with pytest.raises(PatchError, match="Begin Patch"):
        apply_patch("--- a/calc.py\n+++ b/calc.py\n", tmp_path)


def test_exec_command_runs_bash_and_applies_patch_heredocs(tmp_path: Path) -> None:
    out, code = run_exec({"cmd": "command -v python3; exit 3"}, tmp_path)  # this interpreter's folder first
    assert code == 3 and "Process exited with code 3\n" in out
    assert out.split("Output:\n", 1)[1].strip() == os.path.join(os.path.dirname(sys.executable), "python3")
    (tmp_path / "calc.py").write_text(CALC)
    patch = "*** Begin Patch\n*** Update File: calc.py\n-    return a - b\n+    return a + b\n*** End Patch"
    out, code = run_exec({"cmd": f"apply_patch <<'EOF'\n{patch}\nEOF\n"}, tmp_path)
    assert code == 0 and out.endswith("Output:\nSuccess. Updated the following files:\nM calc.py\n")
    assert "a + b" in (tmp_path / "calc.py").read_text()
    out, code = run_exec({"cmd": f"apply_patch <<EOF\n{patch}\nEOF"}, tmp_path)  # applied already
    assert code == 1 and "Failed to find expected lines" in out
    out, code = run_exec({"cmd": "sleep 5", "timeout_ms": 1000}, tmp_path)
    assert code == 124 and "timed out" in out
    assert run_exec({"cmd": ""}, tmp_path)[1] == 2
    assert run_exec({"cmd": "ls", "workdir": "missing"}, tmp_path)[1] == 127


def test_unreachable_endpoint_exits_1_with_a_rollout(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "CODEX_HOME": str(tmp_path / "home"),
        "HARNESSCHECK_ENDPOINT": "http://127.0.0.1:9/v1",  # discard port: connection refused
        "HARNESSCHECK_MODEL": "m",
    }
    cmd = [sys.executable, "-m", "harnesscheck.agents.toy_agent", "exec", "--request-timeout", "5", "fix it"]
    res = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert res.returncode == 1 and "request failed" in res.stderr
    (rollout,) = (tmp_path / "home" / "sessions").rglob("rollout-*.jsonl")
    summary = parse_file(rollout)
    assert summary.format == "codex-rollout" and summary.tool_calls == 0 and summary.model == "m"
    no_endpoint = {k: v for k, v in env.items() if k not in ("HARNESSCHECK_ENDPOINT", "OPENAI_BASE_URL")}
    res = subprocess.run(cmd, cwd=tmp_path, env=no_endpoint, capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "usage" in res.stderr


def _canned_sse(body: bytes):
    """A loopback server that answers every POST with `body` as an event stream."""
    import http.server
    import threading

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            self.rfile.read(int(self.headers.get("content-length", 0)))
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _stream(body: bytes) -> list[dict]:
    from openai import OpenAI

    from harnesscheck.agents.toy_agent import _events

    server = _canned_sse(body)
    try:
        client = OpenAI(base_url=f"http://127.0.0.1:{server.server_port}/v1", api_key="k", timeout=10, max_retries=0)
        return list(_events(client, {"model": "m", "input": [], "stream": True}))
    finally:
        server.shutdown()


def test_events_survive_a_done_marker_and_need_completed() -> None:
    call = '{"type":"response.output_item.done","item":{"type":"function_call","name":"x"}}'
    done = '{"type":"response.completed","response":{}}'
    events = _stream(f"data: [DONE]\n\ndata: {call}\n\nevent: response.completed\ndata: {done}\n\n".encode())
    assert [e["type"] for e in events] == ["response.output_item.done", "response.completed"]
    with pytest.raises(RuntimeError, match="without response.completed"):
        _stream(f"data: {call}\n\n".encode())
    with pytest.raises(ValueError, match="not a JSON object"):
        _stream(b"data: {oops\n\n")


def test_tool_commands_do_not_see_credentials(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESSCHECK_API_KEY", "sk-planted-123")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-planted-456")
    output, code = run_exec({"cmd": "env"}, tmp_path)
    assert code == 0 and "sk-planted" not in output and "PATH=" in output


def test_timed_out_command_takes_its_children_along(tmp_path: Path) -> None:
    output, code = run_exec({"cmd": "(sleep 29.77; touch late) & sleep 29.77", "timeout_ms": 1000}, tmp_path)
    assert code == 124 and "timed out" in output
    import time

    time.sleep(0.3)
    assert not (tmp_path / "late").exists()
    ps = subprocess.run(["pgrep", "-f", "sleep 29.77"], capture_output=True, text=True)
    assert not ps.stdout.strip(), ps.stdout
