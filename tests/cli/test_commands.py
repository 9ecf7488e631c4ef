"""Expected failures of every command are one line and exit 2, never a traceback: a busy port, an
endpoint that is down, a model the server does not serve, a -k that selects nothing, bad input
files. Real processes: the `harnesscheck` command, a real listening socket, the embedded server."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import uuid

import pytest

from harnesscheck.reports.schema import validate_results
from tests.cli.helpers import free_port, harnesscheck, processes_with_env


def test_serve_on_a_busy_port_then_stop_on_sigterm(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        ran = harnesscheck("serve", "--port", str(port), cwd=tmp_path, timeout=60)
    assert ran.rc == 2
    assert f"cannot listen on 127.0.0.1:{port}: Address already in use" in ran.one_line()
    server = subprocess.Popen([sys.executable, "-m", "harnesscheck", "serve", "--port", "0"], cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert "listening on http://" in server.stdout.readline()
    server.send_signal(signal.SIGTERM)
    assert server.wait(timeout=30) == 0
    assert "Traceback" not in server.stderr.read()


def test_bench_against_a_closed_port(tmp_path):
    ran = harnesscheck("bench", "preamble", "--endpoint", f"http://127.0.0.1:{free_port()}", "--sessions", "4",
                       cwd=tmp_path, timeout=60)
    assert ran.rc == 2 and "connection refused" in ran.err.splitlines()[-1]
    assert not list(tmp_path.glob("harnesscheck-results/*"))


def test_bench_history_unknown_model(tmp_path):
    ran = harnesscheck("bench", "history", "--model", "no/such", "--sessions", "4", cwd=tmp_path, timeout=120)
    assert ran.rc == 2
    assert "model 'no/such' not found" in ran.err.splitlines()[-1]


def test_check_selecting_nothing(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.json").write_text('{"stale": true}')  # a previous run's: never taken for this one's
    ran = harnesscheck("check", "-k", "no_such_check_anywhere", "--out", "out", cwd=tmp_path, timeout=120)
    assert ran.rc == 2
    assert "-k 'no_such_check_anywhere' selects no check" in ran.one_line()
    assert not (out / "results.json").exists()


BAD_FILES = {"bad.json": b"{not json", "binary.json": b"\xff\xfe\x00\x81binary", "list.json": b"[1, 2]"}


@pytest.mark.parametrize("name", sorted(BAD_FILES))
@pytest.mark.parametrize("command", [
    ["report", "{f}", "--out", "r.html"],
    ["gate", "--baseline", "{f}", "--current", "{f}"],
    ["trace", "check", "{f}"],
    ["trace", "from-capture", "{f}", "--out", "t.json"],
    ["compare", "{f}", "{f}"],
    ["report", "missing.json"],
])
def test_bad_input_file(tmp_path, command, name):
    (tmp_path / name).write_bytes(BAD_FILES[name])
    ran = harnesscheck(*(part.format(f=name) for part in command), cwd=tmp_path, timeout=60)
    assert ran.rc == 2, ran.out + ran.err
    assert ran.err.strip() and len(ran.err.strip().splitlines()) == 1, ran.err


def test_verify_clients_wiring_without_installed_clients(tmp_path):
    """--verify-clients: the runner owns the embedded server, keeps it for the clients, stops it
    after; with no client installed every client is listed as not run, nothing fails."""
    mark = uuid.uuid4().hex
    empty = tmp_path / "no-clients"
    empty.mkdir()
    ran = harnesscheck("check", "--apis", "chat", "-k", "test_streams", "--verify-clients", "--out", "out",
                       cwd=tmp_path, timeout=300, env={"HARNESSCHECK_CLIENTS_DIR": str(empty), "HC_MARK": mark})
    assert ran.rc == 0, ran.out + ran.err
    doc = validate_results(json.loads((tmp_path / "out" / "results.json").read_text()))
    verification = doc["client_verification"]
    assert verification["comparison"] == []
    assert verification["clients"] and all(c["skipped"] and c["measured"] == "" for c in
                                           verification["clients"].values())
    assert {c["api"] for c in verification["clients"].values()} == {"chat"}
    assert doc["run"]["endpoint"] == "embedded reference server" and doc["run"]["server"]["kind"] == "embedded"
    assert verification["endpoint"].startswith("http://127.0.0.1:")
    assert "OpenClaw" in ran.out and "not run (not installed" in ran.out
    assert processes_with_env(mark) == []  # the embedded server was stopped after the clients


@pytest.mark.e2e
def test_verify_clients_measures_claude_code(tmp_path):
    ran = harnesscheck("check", "--apis", "anthropic", "-k", "test_models_list", "--verify-clients", "--out", "out",
                       cwd=tmp_path, timeout=600)
    assert ran.rc == 0, ran.out + ran.err
    rows = json.loads((tmp_path / "out" / "results.json").read_text())["client_verification"]["comparison"]
    claude = next(r for r in rows if r["client"].startswith("Claude Code"))
    assert claude == {**claude, "measured": "works", "inferred": "unaffected", "agrees": True}
    line = next(line for line in ran.out.splitlines() if line.strip().startswith(claude["client"]))
    assert line.endswith("; measured against this endpoint: works (anthropic works)"), line
