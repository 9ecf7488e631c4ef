"""The streaming tool-dispatch checks (conformance/test_dispatch.py) through the real suite:

- the reference server passes AN/CH/RS-DISPATCH-001, each exercised (a call completed before
  reasoning that streamed after it), and its buffer-tool-calls fault fails each at SHOULD;
- against the independent plain-model server (tests/conformance/plain_model_server.py) whose model
  interleaves only on every third plain ask, `--tries 3` gives pass and `--tries 1` inconclusive
  (not exercised), never pass;
- that server with its tool calls held to the end of the turn is inconclusive, not pass: its model's
  reasoning is not the scenario's script, so only a call followed by reasoning or text could have
  shown the calls were not held back, and calls that follow each other prove nothing.
"""

from __future__ import annotations

from pathlib import Path

from harnesscheck.conformance.forked import run_forked
from harnesscheck.conformance.runner import SuiteOptions, run_suite
from tests.conformance.test_plain_model import plain_server

DISPATCH = ("AN-DISPATCH-001", "CH-DISPATCH-001", "RS-DISPATCH-001")


def _run(tmp_path: Path, *, endpoint: str | None = None, apis: str = "anthropic,chat,responses", tries: int = 3,
         server_args: tuple[str, ...] = ()) -> dict[str, dict]:
    options = SuiteOptions(endpoint=endpoint, apis=apis, tries=tries, select="DISPATCH-001", timeout=20.0,
                           server_args=server_args)
    # the embedded server's runs forked from the warm process; an endpoint's in a pytest subprocess
    doc = run_suite(options, tmp_path, subprocess_run=True, quiet=True) if endpoint else run_forked(options, tmp_path)
    return {c["id"]: c for c in doc["checks"]}


def _brief(checks: dict[str, dict]) -> dict[str, str]:
    return {k: f"{c['outcome']} {c['level']} {c.get('cause', '')}: {c['message'][:240]}" for k, c in checks.items()}


def test_reference_server_passes_exercised_and_its_buffer_fault_fails(tmp_path: Path) -> None:
    clean = _run(tmp_path / "clean")
    assert {k: c["outcome"] for k, c in clean.items()} == dict.fromkeys(DISPATCH, "pass"), _brief(clean)
    assert all(clean[k]["exercised"] == {k: ["output-after-call"]} for k in DISPATCH), \
        {k: c["exercised"] for k, c in clean.items()}
    buffered = _run(tmp_path / "buffered", server_args=("--fault=buffer-tool-calls",))
    assert {k: (c["outcome"], c["level"]) for k, c in buffered.items()} == dict.fromkeys(DISPATCH, ("fail", "SHOULD")), \
        _brief(buffered)
    assert all("held back to the end of the turn" in c["message"] for c in buffered.values()), _brief(buffered)


def test_tries_find_the_dispatch_path_taken_one_time_in_three(tmp_path: Path) -> None:
    with plain_server(one_in=3) as url:
        retried = _run(tmp_path / "tries3", endpoint=url, apis="anthropic,chat", tries=3)
    with plain_server(one_in=1000) as url:  # a path no try and no lever reaches
        never = _run(tmp_path / "never", endpoint=url, apis="anthropic,chat", tries=1)
    assert {k: c["outcome"] for k, c in retried.items()} == dict.fromkeys(DISPATCH[:2], "pass"), _brief(retried)
    assert {k: (c["outcome"], c.get("cause")) for k, c in never.items()} == \
        dict.fromkeys(DISPATCH[:2], ("inconclusive", "not-exercised")), _brief(never)
    assert all("no tool call was followed by reasoning or text" in c["message"] for c in never.values()), _brief(never)


def test_calls_held_to_the_end_with_a_model_of_its_own_are_not_a_pass(tmp_path: Path) -> None:
    with plain_server("buffer-tool-calls") as url:
        checks = _run(tmp_path, endpoint=url, apis="anthropic,chat")
    assert {k: (c["outcome"], c.get("cause")) for k, c in checks.items()} == \
        dict.fromkeys(DISPATCH[:2], ("inconclusive", "not-exercised")), _brief(checks)
    assert all("is followed by only other tool calls" in c["message"] for c in checks.values()), _brief(checks)
