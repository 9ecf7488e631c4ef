"""A run that cannot be useful ends at once: bad options and unusable endpoints are one line and
exit 2, before any check (and, for a bad option, before any request). Real processes throughout:
the `harnesscheck` command, a closed port, `python -m http.server`, the reference server with
`--api-key`, and a silent TCP listener."""

from __future__ import annotations

import time

import pytest

from harnesscheck.conformance.preflight import preflight
from harnesscheck.reference_server.launch import ServerProcess
from tests.cli.helpers import counting_listener, file_server, free_port, harnesscheck

KEY = "sk-preflight-test-key"


@pytest.fixture(scope="module")
def keyed_server():
    with ServerProcess(["--api-key", KEY]) as server:
        yield server.url


def _unusable(ran, tmp_path, *needles: str) -> None:
    assert ran.rc == 2, ran.out + ran.err
    line = ran.one_line()
    for needle in needles:
        assert needle in line, line
    assert ran.seconds < 5, f"took {ran.seconds:.1f} s"
    assert not (tmp_path / "out" / "results.json").exists()  # no check ran
    assert "passed" not in ran.out and "failed" not in ran.out and "would break" not in ran.out


def test_closed_port(tmp_path):
    ran = harnesscheck("check", "--endpoint", f"http://127.0.0.1:{free_port()}", "--out", "out", cwd=tmp_path)
    _unusable(ran, tmp_path, "connection refused")


def test_plain_file_server(tmp_path):
    with file_server(tmp_path) as url:
        ran = harnesscheck("check", "--endpoint", url, "--out", "out", cwd=tmp_path)
    _unusable(ran, tmp_path, "does not answer as an LLM API", "HTTP 404 text/html")


def test_wrong_api_key(tmp_path, keyed_server):
    ran = harnesscheck("check", "--endpoint", keyed_server, "--api-key", "sk-wrong", "--out", "out", cwd=tmp_path)
    _unusable(ran, tmp_path, "the endpoint refused the API key", "HTTP 401")
    assert "sk-wrong" not in ran.err + ran.out


def test_missing_api_key(tmp_path, keyed_server):
    ran = harnesscheck("check", "--endpoint", keyed_server, "--out", "out", cwd=tmp_path,
                       env={"HARNESSCHECK_API_KEY": ""})
    _unusable(ran, tmp_path, "wants an API key", "--api-key")


def test_model_not_served(tmp_path, keyed_server):
    ran = harnesscheck("check", "--endpoint", keyed_server, "--model", "no/such", "--out", "out", cwd=tmp_path,
                       env={"HARNESSCHECK_API_KEY": KEY})
    _unusable(ran, tmp_path, "does not serve the model 'no/such'", "deepseek-ai/DeepSeek-R1")


def test_right_key_and_model_pass_preflight(keyed_server):
    checked = preflight(keyed_server, api_key=KEY, model="deepseek-ai/DeepSeek-R1",
                        apis=["anthropic", "chat", "responses"], timeout=30)
    assert checked.ok, checked.problem
    assert "deepseek-ai/DeepSeek-R1" in checked.models


def test_silent_listener_is_bounded():
    with counting_listener() as (url, accepted):
        started = time.monotonic()
        checked = preflight(url, api_key=None, model=None, apis=["chat"], timeout=30)
        took = time.monotonic() - started
    assert not checked.ok and "sent no HTTP answer" in checked.problem
    assert accepted and took < 5


@pytest.mark.parametrize(("args", "needle"), [
    (["--apis", "antrhopic"], "did you mean 'anthropic'"),
    (["--expect", "tool-dispach"], "did you mean 'tool-dispatch'"),
    (["--tries", "0"], "--tries must be 1 or more"),
    (["--timeout", "0"], "--timeout must be a number of seconds above 0"),
    (["--timeout", "-5"], "--timeout must be a number of seconds above 0"),
])
def test_bad_option_sends_no_request(tmp_path, args, needle):
    with counting_listener() as (url, accepted):
        ran = harnesscheck("check", "--endpoint", url, "--out", "out", *args, cwd=tmp_path)
    _unusable(ran, tmp_path, needle)
    assert accepted == []


@pytest.mark.parametrize(("url", "needle"), [
    ("127.0.0.1:18102", "did you mean 'http://127.0.0.1:18102'"),
    ("htp://x", "the scheme 'htp' is not http or https"),
    ("http://", "has no host"),
])
def test_malformed_url(tmp_path, url, needle):
    ran = harnesscheck("run", "--endpoint", url, "--out", "out", cwd=tmp_path)
    assert ran.rc == 2 and needle in ran.one_line()
    assert ran.out == "" and ran.seconds < 5
