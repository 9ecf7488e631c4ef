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


def test_silent_listener_is_bounded_by_the_timeout():
    with counting_listener() as (url, accepted):
        started = time.monotonic()
        checked = preflight(url, api_key=None, model=None, apis=["chat"], timeout=3)
        took = time.monotonic() - started
    assert not checked.ok and "sent no HTTP answer" in checked.problem and "within 3 s (--timeout)" in checked.problem
    assert accepted and took < 3 + 3


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


# -- preflight that fits real endpoints (issue 35): the run's --timeout per probe, drips bounded, pages read --

def test_a_slow_first_answer_passes_preflight_and_the_whole_suite(tmp_path, reference_server):
    """A gateway that takes 5 s to answer its first request, then answers at once: preflight waits (and
    says what for, after 3 s), and the whole suite passes through it (a fixed 3 s probe timeout failed it)."""
    import json

    from tests.cli.slow_endpoints import slow_first_answer

    with slow_first_answer(reference_server, 5.0) as url:
        ran = harnesscheck("check", "--endpoint", url, "--timeout", "12", "--out", "out", cwd=tmp_path, timeout=300)
    assert ran.rc == 0, ran.out[-3000:] + ran.err
    assert f"preflight: GET /v1/models at {url}: waiting for its status line and headers after 3 s" in ran.out
    doc = json.loads((tmp_path / "out" / "results.json").read_text())
    bad = [(c["id"], c["outcome"], c["message"][:200]) for c in doc["checks"] if c["outcome"] in ("fail", "error")]
    assert bad == [] and doc["run"]["verdicts"]["outcome"] == "enough", (bad, doc["run"]["verdicts"])


def test_a_drip_of_one_byte_a_second_fails_within_the_timeout(tmp_path):
    from tests.cli.slow_endpoints import drip

    with drip() as url:
        ran = harnesscheck("check", "--endpoint", url, "--timeout", "4", "--out", "out", cwd=tmp_path)
    assert ran.rc == 2, ran.out + ran.err
    line = ran.one_line()
    assert "sent no HTTP answer to GET /v1/models within 4 s (--timeout)" in line, line
    assert ran.seconds < 4 + 6, f"took {ran.seconds:.1f} s"
    assert not (tmp_path / "out" / "results.json").exists()


def test_a_model_on_page_two_of_the_list_is_found():
    from tests.cli.slow_endpoints import paged_models

    pages = [["org/model-a", "org/model-b"], ["org/model-c"], ["org/page-three"]]
    with paged_models(pages) as url:
        found = preflight(url, api_key=None, model="org/model-c", apis=["anthropic"], timeout=5)
        third = preflight(url, api_key=None, model=("org/model-a", "org/page-three"), apis=["anthropic"], timeout=5)
        missing = preflight(url, api_key=None, model="org/none", apis=["anthropic"], timeout=5)
    assert found.ok and "org/model-c" in found.models, found.problem
    assert third.ok and third.models == ("org/model-a", "org/model-b", "org/model-c", "org/page-three")
    assert not missing.ok and "'org/none'" in missing.problem and "org/page-three" in missing.problem


# -- the other commands that talk to an endpoint use the same preflight and its one-line errors ----------

def _other_commands(url: str, tmp_path) -> dict[str, list[str]]:
    return {
        "replay": ["replay", "builtin:agent-coding", "--endpoint", url, "--no-progress"],
        "clients": ["clients", "--endpoint", url, "--out", str(tmp_path / "clients")],
        "profile": ["profile", "--endpoint", url, "--model", "a/m", "--model", "b/m", "--out", str(tmp_path / "p")],
        "swebench": ["swebench", "run", "--toy", "--run-dir", str(tmp_path / "run"), "--profile", f"a=a/m@{url}/v1"],
    }


@pytest.mark.parametrize("command", ["replay", "clients", "profile", "swebench"])
def test_other_commands_refuse_a_closed_port_in_one_line(tmp_path, command):
    ran = harnesscheck(*_other_commands(f"http://127.0.0.1:{free_port()}", tmp_path)[command], cwd=tmp_path)
    assert ran.rc == 2, ran.out + ran.err
    last = ran.err.strip().splitlines()[-1]  # (swebench notes first how it read its task file)
    assert last.startswith(f"harnesscheck {command.split()[0]}: cannot connect to ") and "connection refused" in last
    assert "Traceback" not in ran.err and ran.seconds < 30, f"took {ran.seconds:.1f} s"


def test_replay_names_the_cause(tmp_path, keyed_server):
    """Replay said "the trace has no model id and the endpoint lists none" for all three."""
    with file_server(tmp_path) as url:
        plain = harnesscheck("replay", "builtin:agent-coding", "--endpoint", url, "--no-progress", cwd=tmp_path)
    keyless = harnesscheck("replay", "builtin:agent-coding", "--endpoint", keyed_server, "--no-progress",
                           cwd=tmp_path, env={"HARNESSCHECK_API_KEY": ""})
    assert plain.rc == 2 and "does not answer as an LLM API" in plain.one_line()
    assert keyless.rc == 2 and "wants an API key" in keyless.one_line()


# -- preflight generates (issue 41): an endpoint whose every generation fails is one line, not 45 failures ----

def test_every_generation_a_500_stops_the_run_in_one_line(tmp_path, reference_server):
    """A proxy that cannot route the model answers a bare 500 to every generation: its model list and the
    routes' shapes pass the probes, so only a generation tells. Before, 45 checks failed, each titled after
    a property never measured."""
    import sys
    from pathlib import Path

    from tests.processes import http_process

    root = Path(__file__).resolve().parents[2]
    with http_process(lambda port: [sys.executable, "-m", "tests.conformance.reasoning_proxy", "--upstream",
                                    reference_server, "--port", str(port), "--modes",
                                    "anthropic=fail-500,chat=fail-500,responses=fail-500"],
                      "/v1/models", cwd=root, startup_s=30) as url:
        ran = harnesscheck("check", "--endpoint", url, "--out", "out", cwd=tmp_path)
        fine = preflight(url, api_key=None, model=None, apis=["anthropic"], timeout=10)  # no generation asked
    _unusable(ran, tmp_path, "answers no generation", "POST /v1/messages: HTTP 500 Internal Server Error",
              "POST /v1/chat/completions: HTTP 500", "POST /v1/responses: HTTP 500")
    assert fine.ok, fine.problem
