"""What agents/clients/overflow.py reads from a capture (no client runs): compactions (the history
shrank, or the client asked for a summary), refusals, and the signal the client compacted on."""

from __future__ import annotations

from typing import Any

from harnesscheck.agents.clients import overflow


def _request(entries: int, status: int = 200, last_user: str = "go on", error: str = "") -> dict[str, Any]:
    messages = [{"role": "user", "content": f"m{n}"} for n in range(entries - 1)]
    messages.append({"role": "user", "content": last_user})
    body = f'{{"type":"error","error":{{"message":"{error}"}}}}' if status >= 400 else ""
    return {"method": "POST", "url": "/v1/messages", "status": status, "request_body": {"messages": messages},
            "body": {"text": body}, "frames": []}


def test_a_compaction_after_a_refusal_is_on_the_refusal() -> None:
    records = [_request(2), _request(4), _request(6, 400, error="prompt is too long: 70000 tokens > 60000 maximum"),
               _request(4, last_user="Your task is to create a detailed summary of the conversation"), _request(3)]
    requests, refused, compacted, signal = overflow.observe(records, 60000)
    assert [r.entries for r in requests] == [2, 4, 6, 4, 3]
    assert refused == [2] and compacted[0] == 3 and signal == "refusal"


def test_a_compaction_before_any_refusal_is_on_the_usage() -> None:
    records = [_request(2), _request(4), _request(6), _request(6, last_user="Please write a summary"), _request(2)]
    _, refused, compacted, signal = overflow.observe(records, 60000)
    assert refused == [] and compacted == [3] and signal == "usage"


def test_no_compaction_no_signal() -> None:
    records = [_request(2), _request(4), _request(6, 400, error="Bad Request")]
    _, refused, compacted, signal = overflow.observe(records, 60000)
    assert (refused, compacted, signal) == ([2], [], None)


def test_the_outcome_line_says_what_the_client_did() -> None:
    obs = overflow.Observation("codex", "0.171.0", "bare-400", 56000, ("overflow-bare-400",), rc=1,
                               client_error="Bad Request", refusals=[4])
    assert overflow.outcome_line(obs) == ("no compaction; 1 refused request(s) (first: #4); broke (exit 1): "
                                          "'Bad Request'")


def test_an_unknown_case_is_a_usage_error(tmp_path) -> None:  # noqa: ANN001
    from harnesscheck.cli.main import main

    assert main(["clients", "--overflow", "--case", "nope", "--out", str(tmp_path)]) == 2


def test_every_case_names_its_faults_and_each_fault_exists() -> None:
    from harnesscheck.reference_server.faults import FAULTS

    assert set(overflow.DEFAULT_CASES) == set(overflow.CASES)
    assert all(f in FAULTS for faults, _ in overflow.CASES.values() for f in faults)
