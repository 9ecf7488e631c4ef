"""Issue 40, item 2: the context window read in each stack's own dialect (conformance/window.py
known_window, over real loopback against tests/conformance/window_dialects_server.py), --context-window
over them all, and, with no window known, the overflow rules still judged with a far prompt: the
reference server with --no-announce-window passes CTX-001 and CTX-003, and fails them with each
overflow fault planted."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from harnesscheck.conformance import window
from harnesscheck.conformance.forked import run_forked
from harnesscheck.conformance.runner import SuiteOptions
from harnesscheck.conformance.session import Endpoint, Session
from tests.processes import http_process

ROOT = Path(__file__).resolve().parents[2]
MODEL = "stub/model"


def test_a_window_in_an_entry_of_any_nesting() -> None:
    assert window.window_of({"id": "m", "meta": {"n_ctx": 4096}}) == 4096
    assert window.window_of({"id": "m", "model_info": {"max_input_tokens": 16384}}) == 16384
    assert window.window_of({"id": "m", "context_window": 0}) is None  # Dynamo's zero says nothing
    assert window.window_of({"id": "m", "meta": {"n_ctx_train": 131072}}) is None  # trained, not served


@pytest.mark.parametrize(("dialect", "size", "where"), [
    ("llama", 4096, "/props"), ("llama-trained", 131072, "n_ctx_train"), ("ollama", 8192, "/api/show"),
    ("ollama-info", 32768, "/api/show"), ("litellm", 16384, "/model/info"), ("sglang", 32768, "/v1/models"),
    ("dynamo", None, None)])
def test_each_stack_says_its_window_in_its_own_dialect(dialect: str, size: int | None, where: str | None) -> None:
    with http_process(lambda port: [sys.executable, "-m", "tests.conformance.window_dialects_server", "--port",
                                    str(port), "--dialect", dialect], "/v1/models", cwd=ROOT, quiet=True) as url:
        hc = Session(Endpoint(url=url, model=MODEL, timeout=10.0))
        known = window.known_window(hc)
        given = window.known_window(Session(Endpoint(url=url, model=MODEL, timeout=10.0, context_window=2048)))
    if size is None:
        assert known is None
    else:
        assert known is not None and known[0] == size and where in known[1], known
    assert given == (2048, "--context-window")


def _ctx(tmp_path: Path, *server_args: str, apis: str = "anthropic,chat", select: str = "CTX-001 or CTX-003",
         **options: Any) -> dict[str, dict[str, Any]]:
    doc = run_forked(SuiteOptions(apis=apis, tries=1, select=select,
                                  server_args=("--no-announce-window", *server_args), **options), tmp_path)
    return {c["id"]: c for c in doc["checks"]}


def test_no_window_announced_the_refusal_is_still_judged(tmp_path: Path) -> None:
    clean = _ctx(tmp_path / "clean")
    assert {k: c["outcome"] for k, c in clean.items()} == dict.fromkeys(
        ("AN-CTX-001", "AN-CTX-003", "CH-CTX-001", "CH-CTX-003"), "pass"), clean
    assert any("no context window known" in n for n in clean["AN-CTX-001"].get("notes", []))
    bare = _ctx(tmp_path / "bare", "--fault", "overflow-bare-400")
    assert (bare["AN-CTX-001"]["outcome"], bare["AN-CTX-001"]["rules_failed"]) == ("fail", ["AN-CTX-001:marker"])
    assert (bare["AN-CTX-003"]["outcome"], bare["AN-CTX-003"]["rules_failed"]) == ("fail", ["AN-CTX-003:marker"])
    five = _ctx(tmp_path / "500", "--fault", "overflow-500")
    for check_id in ("AN-CTX-001", "CH-CTX-001"):
        assert (five[check_id]["outcome"], five[check_id]["level"]) == ("fail", "MUST"), five[check_id]
        assert "HTTP 500" in five[check_id]["message"], five[check_id]["message"]
        # both rules the 500 breaks (issue 40: every failed rule), the status and shape first
        assert five[check_id]["rules_failed"] == [check_id, f"{check_id}:marker"], five[check_id]


def test_the_context_window_option_is_the_window(tmp_path: Path) -> None:
    given = _ctx(tmp_path, "--context-window", "16384", context_window=16384)
    assert all(c["outcome"] == "pass" for c in given.values()), given
    assert any("context window 16384 tokens (--context-window)" in n for n in given["CH-CTX-001"].get("notes", []))


def test_no_window_a_refusal_inside_the_200_stream_is_judged(tmp_path: Path) -> None:
    """Dynamo 1.6.1's form (fault overflow-stream-error): HTTP 200, then the API's in-stream error. With no
    window known it was 'not exercised: answered HTTP 200'; it is the endpoint refusing the prompt, in no
    form the clients act on: both rules fail, in every API."""
    stream = _ctx(tmp_path, "--fault", "overflow-stream-error", apis="anthropic,chat,responses",
                  timeout=120.0)  # the 4 MiB prompts, on a loaded machine
    for check_id, rules in (("AN-CTX-001", ["AN-CTX-001", "AN-CTX-001:marker"]),
                            ("AN-CTX-003", ["AN-CTX-003:window", "AN-CTX-003:marker"]),
                            ("CH-CTX-001", ["CH-CTX-001", "CH-CTX-001:marker"]),
                            ("CH-CTX-003", ["CH-CTX-003:window", "CH-CTX-003:marker"]),
                            ("RS-CTX-001", ["RS-CTX-001", "RS-CTX-001:marker"]),
                            ("RS-CTX-003", ["RS-CTX-003:window", "RS-CTX-003:marker"])):
        assert (stream[check_id]["outcome"], stream[check_id]["rules_failed"]) == ("fail", rules), stream[check_id]
        assert "inside a 200 stream" in stream[check_id]["message"], stream[check_id]["message"]


def test_no_window_a_prompt_taken_at_every_step_is_not_exercised_in_every_api(tmp_path: Path) -> None:
    """An endpoint that takes any prompt (no window at all): the 256 KiB step's 200 sends the 4 MiB one, and
    its 200 leaves the rules not exercised, in Responses as in the others (Responses failed at 256 KiB:
    'answered (HTTP 200, no response.failed)')."""
    taken = _ctx(tmp_path, "--context-window", "0", apis="chat,responses", select="CTX-001", timeout=120.0)
    for check_id in ("CH-CTX-001", "RS-CTX-001"):
        assert taken[check_id]["outcome"] == "inconclusive", taken[check_id]
        assert f"{window.FAR_CHARS} characters of filler" in taken[check_id]["message"], taken[check_id]["message"]
        assert "not exercised" in taken[check_id]["message"], taken[check_id]["message"]
