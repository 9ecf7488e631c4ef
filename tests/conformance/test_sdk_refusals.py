"""An official SDK helper's own refusal of a legal answer is reported as what it is: openai's
Responses stream helper raises on a stream that ends in `response.incomplete` (max_output_tokens
reached, a legal end), so RS-SDK-001 is inconclusive there, never a MUST failure of the endpoint."""

from __future__ import annotations

from pathlib import Path

from harnesscheck.conformance.runner import SuiteOptions, run_suite


def test_a_responses_stream_ending_incomplete_is_not_an_sdk_failure(tmp_path: Path) -> None:
    doc = run_suite(SuiteOptions(apis="responses", select="RS-SDK-001",
                                 server_args=("--max-output-tokens=4",)), tmp_path, quiet=True)
    (check,) = doc["checks"]
    assert (check["id"], check["outcome"]) == ("RS-SDK-001", "inconclusive"), check["message"]
    assert "response.incomplete" in check["message"] and "refuses by design" in check["message"]
