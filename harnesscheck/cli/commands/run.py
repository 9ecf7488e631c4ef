"""`harnesscheck run`: the main job. The whole conformance suite (against the embedded reference
server when no --endpoint is given), a summary table per API, results JSON and the HTML report."""

from __future__ import annotations

import argparse
from pathlib import Path

from harnesscheck.cli.commands.check import (EXIT_STATUS, INTERRUPTED, add_suite_arguments, after_suite,
                                             run_and_summarize, suite_options)

NAME = "run"
ORDER = 1
HELP = "the main job: run the suite, print a summary per API, write results.json and report.html"
DESCRIPTION = f"""\
Run every conformance check against --endpoint (or, with none, the embedded reference server,
started on a free port), print a pass / fail / skip / inconclusive table per API, and write
OUT/results.json, OUT/transcripts/ (every check's, within a size budget) and OUT/report.html.
--concurrency N runs N checks at once (timing-sensitive checks still alone).

{EXIT_STATUS}"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_suite_arguments(parser)
    parser.add_argument("--no-report", action="store_true", help="skip the HTML report")


def run(args: argparse.Namespace) -> int:
    options = suite_options(args)
    out = Path(args.out)
    from harnesscheck.protocol.wire.redact import redact_url

    shown = redact_url(options.endpoint) if options.endpoint else "the embedded reference server"
    print(f"harnesscheck: checking {shown} ...", flush=True)
    doc, status = run_and_summarize(options, out, after=after_suite(args), label_width=12)
    from harnesscheck.reports.html import write_report
    from harnesscheck.reports.summary import final_line
    if not args.no_report:
        report = out / "report.html"
        write_report([out / "results.json"], report)
        print(f"{'report:':<12} {report}")
    if status != INTERRUPTED:
        print(final_line(doc))  # the last line: MUST failures, or no verdict and why (exit 1 / 4)
    return status
