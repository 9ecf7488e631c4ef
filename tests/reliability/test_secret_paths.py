"""Secrets, the three paths beyond test_secrets.py's flow (issue 43 item 5): a key given to the
embedded server (`--server-arg=--api-key=K`), a key in the endpoint URL (user info, `?api_key=`), and
a key the endpoint echoes in an error (an official SDK's exception quotes the body) never reach
results.json, report.html, junit.xml or the terminal.

Each runs `harnesscheck check` as a user does, against a real server over loopback, and searches
every file and every line printed for the key in every form test_secrets.forms knows.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from harnesscheck.protocol.wire.redact import (
    REDACTED,
    redact_args,
    redact_data,
    secrets_from_args,
    secrets_from_url,
)
from harnesscheck.reference_server.launch import ServerProcess
from tests.reliability.test_secrets import FAST, scan

HC = [sys.executable, "-m", "harnesscheck"]


def _env() -> dict[str, str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1",
           # the suite's pytest child with the conformance plugin only (the auto-loaded ones cost ~2 s)
           "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTEST_PLUGINS": "harnesscheck.conformance.plugin"}
    env.pop("HARNESSCHECK_API_KEY", None)
    return env


def _check(args: list[str], out: Path, logs: Path) -> subprocess.CompletedProcess[bytes]:
    """`harnesscheck check ARGS --out OUT`, then `harnesscheck report`; both commands' output to `logs`."""
    run = subprocess.run([*HC, "check", *args, "--out", str(out)], capture_output=True, env=_env(), timeout=240)
    text = [run.stdout, run.stderr]
    if (out / "results.json").exists():
        rep = subprocess.run([*HC, "report", str(out / "results.json"), "--out", str(out / "report.html"), "-q"],
                             capture_output=True, env=_env(), timeout=120)
        assert rep.returncode == 0, rep.stderr[-2000:]
        text += [rep.stdout, rep.stderr]
    logs.write_bytes(b"\n".join(text))
    return run


def _no_leak(paths: list[Path], key: str) -> None:
    files, leaks = scan(paths, {"api key": key})
    assert files >= 2 and not leaks, leaks


def _key() -> str:
    return "sk-hc-PLANTED-" + secrets.token_hex(16)


# -- the redaction functions ------------------------------------------------------------------------

def test_credential_options_are_redacted_in_either_form() -> None:
    args = ["--fault", "an-block-index-skip", "--api-key=K-1234", "--api-key", "K-5678", "--hf_token=T-9999",
            "--tokenizer", "gpt2", "--max-tokens", "64"]
    assert redact_args(args) == ["--fault", "an-block-index-skip", f"--api-key={REDACTED}", "--api-key", REDACTED,
                                 f"--hf_token={REDACTED}", "--tokenizer", "gpt2", "--max-tokens", "64"]
    assert sorted(secrets_from_args(args)) == ["K-1234", "K-5678", "T-9999"]


def test_url_credentials_are_secrets_with_the_basic_credential_a_client_makes() -> None:
    found = secrets_from_url("http://user:p%40ss-word@h:1/?api_key=K-1234&model=m")
    assert {"p%40ss-word", "p@ss-word", "K-1234"} <= set(found)
    assert "dXNlcjpwQHNzLXdvcmQ=" in found  # base64("user:p@ss-word"): httpx's Basic header
    assert "m" not in found and "user" not in found  # a user name beside a password is no secret
    assert secrets_from_url("http://h:1/v1?model=gpt") == []
    assert "tok-1234" in secrets_from_url("http://tok-1234@h:1")  # a token as the user name is


def test_redact_data_reaches_every_string_of_nested_data_and_objects() -> None:
    class Repr:
        def __init__(self) -> None:
            self.lines = ["E  invalid key Bearer K-1234"]
            self.crash = ("path", 3, "401 K-1234")

    obj = Repr()
    doc = redact_data({"a": ["x K-1234 y", ("K-1234",), 7, None], "K-1234": obj}, ["K-1234"])
    assert doc == {"a": [f"x {REDACTED} y", (REDACTED,), 7, None], REDACTED: obj}
    assert obj.lines == [f"E  invalid key Bearer {REDACTED}"] and obj.crash == ("path", 3, f"401 {REDACTED}")


# -- the paths, end to end ----------------------------------------------------------------------------

def test_a_key_given_to_the_embedded_server_stays_out_of_results_and_report(tmp_path: Path) -> None:
    key = _key()
    out, logs = tmp_path / "out", tmp_path / "logs.txt"
    run = _check([f"--server-arg=--api-key={key}", "--api-key", key, "-k", "AN-STREAM-001"], out, logs)
    assert run.returncode == 0, (run.stdout[-2000:], run.stderr[-2000:])  # the key got through
    doc = json.loads((out / "results.json").read_text())
    assert doc["run"]["settings"]["server_args"] == [f"--api-key={REDACTED}"]
    _no_leak([out, logs], key)


def test_a_key_in_the_endpoint_url_stays_out_of_results_report_and_the_terminal(tmp_path: Path) -> None:
    key = _key()
    with ServerProcess(FAST) as server:
        port = server.url.rsplit(":", 1)[1]
        userinfo = f"http://user:{key}@127.0.0.1:{port}"
        run = _check(["--endpoint", userinfo, "-k", "AN-STREAM-001"], tmp_path / "userinfo",
                     tmp_path / "userinfo.txt")
        assert run.returncode == 0, (run.stdout[-2000:], run.stderr[-2000:])
        doc = json.loads((tmp_path / "userinfo" / "results.json").read_text())
        assert doc["run"]["endpoint"] == f"http://{REDACTED}@127.0.0.1:{port}"
        transcripts = " ".join(f.read_text() for f in (tmp_path / "userinfo" / "transcripts").glob("*-*.json"))
        assert '"user"' in transcripts  # the user name beside the key is not scrubbed from every role
        # a key in the query: the kit cannot use that base URL, and the line saying so hides the key
        run = _check(["--endpoint", f"{server.url}/?api_key={key}", "-k", "AN-STREAM-001"], tmp_path / "query",
                     tmp_path / "query.txt")
        assert run.returncode == 2 and b"api_key=" + REDACTED.encode() in run.stderr, run.stderr[-2000:]
    # and an endpoint that cannot be reached: the line names the URL, without the key
    run = _check(["--endpoint", f"http://user:{key}@127.0.0.1:9", "-k", "AN-STREAM-001"], tmp_path / "closed",
                 tmp_path / "closed.txt")
    assert run.returncode == 2 and b"cannot connect to" in run.stderr, run.stderr[-2000:]
    _no_leak([tmp_path], key)


class _EchoingEndpoint(BaseHTTPRequestHandler):
    """Lists a model, then refuses every request with a 401 that quotes the credential it got (as some
    gateways do): 'invalid key Bearer K'."""

    def _answer(self, status: int, body: dict[str, object]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path.startswith("/v1/models"):
            self._answer(200, {"object": "list", "data": [{"id": "m", "object": "model"}]})
        else:
            self.do_POST()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        said = self.headers.get("authorization") or self.headers.get("x-api-key")
        self._answer(401, {"type": "error", "error": {"type": "authentication_error",
                                                       "message": f"invalid key {said}"}})

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture()
def echoing_endpoint() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _EchoingEndpoint)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_a_key_the_endpoint_echoes_stays_out_of_junit_and_the_terminal(tmp_path: Path,
                                                                        echoing_endpoint: str) -> None:
    key = _key()
    out, logs = tmp_path / "out", tmp_path / "logs.txt"
    # the SDK checks: the official SDKs raise with the body's message; the stream checks: the kit's client
    run = _check(["--endpoint", echoing_endpoint, "--api-key", key, "--junit", str(out / "junit.xml"), "-v",
                  "--timeout", "10", "-k", "AN-SDK-001 or CH-SDK-001 or RS-SDK-001 or AN-STREAM-001"], out, logs)
    assert run.returncode == 1, (run.stdout[-2000:], run.stderr[-2000:])
    junit = (out / "junit.xml").read_text()
    assert "invalid key Bearer " + REDACTED in junit  # the echo is there, the key is not
    _no_leak([out, logs], key)
