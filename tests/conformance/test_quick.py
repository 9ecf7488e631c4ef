"""--quick (issue 36): a profile for slow endpoints that says what it leaves out, shared by the CLI and
the plugin: the run header lists it, --tries is 1, and the checks it thins say so in their notes."""

from __future__ import annotations

import argparse
from pathlib import Path

from harnesscheck.conformance.options import QUICK_LEAVES_OUT, add_options
from harnesscheck.conformance.runner import SuiteOptions, run_suite


def test_the_cli_and_the_plugin_take_it() -> None:
    parser = argparse.ArgumentParser()
    add_options(parser.add_argument, files=False)
    assert parser.parse_args(["--quick"]).hc_quick is True
    assert "--hc-quick" in SuiteOptions(quick=True).pytest_args(Path("/tmp/out"))
    assert "--hc-quick" not in SuiteOptions().pytest_args(Path("/tmp/out"))


def test_a_quick_run_says_what_it_left_out(tmp_path: Path) -> None:
    doc = run_suite(SuiteOptions(select="AN-PREAMBLE-001", quick=True, tries=3), tmp_path, subprocess_run=True,
                    quiet=True)
    settings = doc["run"]["settings"]
    assert settings["quick"] == list(QUICK_LEAVES_OUT) and settings["tries"] == 1
    (check,) = doc["checks"]
    assert check["outcome"] == "pass", check["message"]
    assert check["notes"] == ["the older cch= form was not judged: --quick leaves it out"]
