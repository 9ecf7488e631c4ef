"""The client-session checks' round trip against a real reference server (conformance/test_client_sessions.py):
under invalid-tool-json (a tool call's arguments that do not join to JSON) the answers' grammar fails first
in the suite; with the grammar left unjudged, the round trip is what fails, in each of its forms:
Claude Code's next request cannot carry tool input that does not parse (Anthropic sends it as an object),
OpenClaw over Chat writes the arguments again from their parsed form, which it cannot do, and Codex sends
the broken arguments back as they came, which the server refuses while the same request with the
recorded answer is accepted. On the clean server every session replays."""

from __future__ import annotations

import pytest

from harnesscheck.conformance.session import Endpoint, Session
from harnesscheck.conformance.test_client_sessions import SESSION_CHECKS, replay
from harnesscheck.conformance.verdict import CheckFailed
from harnesscheck.scenarios import client_sessions

MODEL = "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4"


def _hc(url: str) -> Session:
    return Session(Endpoint(url=url, model=MODEL, tries=1, timeout=30.0))


@pytest.fixture(scope="module")
def broken(server_factory) -> str:  # noqa: ANN001
    return server_factory("--fault=invalid-tool-json")


@pytest.mark.parametrize("name,why", [
    ("claude-code", "does not parse as a JSON object"),  # Anthropic carries tool input as an object
    ("openclaw-chat", "writes tool arguments again from their parsed form"),  # OpenClaw re-serialises them
    ("codex-gpt-5.5", "the same request with the recorded answer was accepted"),  # Codex sends them as they came
])
def test_the_round_trip_fails_where_the_answer_cannot_come_back(broken: str, name: str, why: str) -> None:
    check_id = SESSION_CHECKS[name]
    with pytest.raises(CheckFailed) as failed:
        replay(_hc(broken), client_sessions.get(name), check_id, grammar_rules=False)
    assert failed.value.rule == f"{check_id}:roundtrip", failed.value.summary
    assert why in failed.value.summary, failed.value.summary


@pytest.mark.parametrize("name", sorted(SESSION_CHECKS))
def test_every_session_replays_on_the_clean_server(reference_server: str, name: str) -> None:
    hc = _hc(reference_server)
    replay(hc, client_sessions.get(name), SESSION_CHECKS[name])
    assert "client-roundtrip" in hc.exercised
