"""--quick (issue 36): a profile for slow endpoints that says what it leaves out, shared by the CLI and
the plugin: the run header lists it, --tries is 1, and the checks it thins say so in their notes."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from harnesscheck.conformance.options import QUICK_LEAVES_OUT, add_options
from harnesscheck.conformance.forked import run_forked
from harnesscheck.conformance.runner import SuiteOptions


def test_the_cli_and_the_plugin_take_it() -> None:
    parser = argparse.ArgumentParser()
    add_options(parser.add_argument, files=False)
    assert parser.parse_args(["--quick"]).hc_quick is True
    assert "--hc-quick" in SuiteOptions(quick=True).pytest_args(Path("/tmp/out"))
    assert "--hc-quick" not in SuiteOptions().pytest_args(Path("/tmp/out"))


def test_a_quick_run_says_what_it_left_out(tmp_path: Path) -> None:
    doc = run_forked(SuiteOptions(select="AN-PREAMBLE-001", quick=True, tries=3), tmp_path)
    settings = doc["run"]["settings"]
    assert settings["quick"] == list(QUICK_LEAVES_OUT) and settings["tries"] == 1
    (check,) = doc["checks"]
    assert check["outcome"] == "pass", check["message"]
    assert check["notes"] == ["the older cch= form was not judged: --quick leaves it out"]


def test_quick_bounds_each_replayed_client_request_and_judges_it_the_same(tmp_path: Path) -> None:
    """A slow model's answer to Claude Code's recorded 32,000-token limit runs for minutes (llama-server with
    Gemma 3 270M: 120 s and no end): --quick sends each recorded request with its output limit bounded,
    adds one where the client sent none (Codex), and the replay is judged as before."""
    from harnesscheck.conformance.options import QUICK_REPLAY_BUDGET

    select = "AN-CLIENT-001 or RS-CLIENT-001 or CH-CLIENT-001"
    doc = run_forked(SuiteOptions(select=select, quick=True), tmp_path)
    limits = {"AN-CLIENT-001": "max_tokens", "RS-CLIENT-001": "max_output_tokens",
              "CH-CLIENT-001": "max_completion_tokens"}
    for check in doc["checks"]:
        assert check["outcome"] == "pass", check["message"]
        assert f"--quick: each request went with its output limit bounded at {QUICK_REPLAY_BUDGET} tokens" \
            in check["notes"]
        sent = json.loads((tmp_path / check["transcript"]).read_text())["request_body"]  # the last request
        assert sent[limits[check["id"]]] == QUICK_REPLAY_BUDGET, sent
