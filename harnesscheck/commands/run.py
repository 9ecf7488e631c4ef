"""`harnesscheck run`: the main job. The whole conformance suite (against the embedded reference
server when no --endpoint is given), a summary table per API, results JSON and the HTML report."""

from __future__ import annotations

import argparse
from pathlib import Path

from harnesscheck.commands.check import add_suite_arguments, suite_options

NAME = "run"
ORDER = 1
HELP = "the main job: run the suite, print a summary per API, write results.json and report.html"
DESCRIPTION = """\
Run every conformance check against --endpoint (or, with none, the embedded reference server,
started on a free port), print a pass / fail / skip / inconclusive table per API, and write
OUT/results.json, OUT/transcripts/ (failing checks) and OUT/report.html.
Exit status: 0 when no MUST check failed, 1 when one did.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_suite_arguments(parser)
    parser.add_argument("--no-report", action="store_true", help="skip the HTML report")


def run(args: argparse.Namespace) -> int:
    from conformance.runner import harness_lines, must_failed, run_suite
    from reports.html import write_report
    from reports.summary import format_summary

    out = Path(args.out)
    target = args.hc_endpoint or "the embedded reference server"
    print(f"harnesscheck: checking {target} ...", flush=True)
    doc = run_suite(suite_options(args), out)
    print()
    print(format_summary(doc))
    for line in harness_lines(doc):
        print(line)
    print(f"results:     {out / 'results.json'}")
    if not args.no_report:
        report = out / "report.html"
        write_report([out / "results.json"], report)
        print(f"report:      {report}")
    failed = must_failed(doc)
    if failed:
        print(f"{len(failed)} MUST check(s) failed: {', '.join(c['id'] for c in failed)}")
    return 1 if failed else 0
