"""`harnesscheck report`: results JSON files -> one self-contained HTML page."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

NAME = "report"
ORDER = 60
HELP = "render results JSON (one or more runs, merged) as a self-contained HTML report"
DESCRIPTION = """\
Render one or more results.json files as a single HTML file with no external assets
(inline CSS, plots embedded as PNG): run header, per-API summary, the check matrix with
each failure's rule, frame and transcript excerpt, the fault matrix, benchmark plots with
95% confidence intervals, and comparison tables.

Several files are merged in order: a check (id, api) in a later file overrides an earlier
one; benchmarks and comparisons are keyed by name.

Exit status: 0 written, 2 bad input (missing file, invalid results).

Example:
  harnesscheck report results/results.json --out results/report.html
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("results", nargs="+", metavar="RESULTS", help="results.json files, earliest first")
    parser.add_argument("--out", "-o", default="report.html", help="HTML file to write (default: report.html)")
    parser.add_argument("--quiet", "-q", action="store_true", help="do not print the summary table")


def run(args: argparse.Namespace) -> int:
    from reports.html import write_report
    from reports.schema import ResultsError
    from reports.summary import format_summary

    try:
        merged = write_report(args.results, args.out)
    except ResultsError as exc:
        print(f"harnesscheck report: {exc}", file=sys.stderr)
        return 2
    if not args.quiet:
        print(format_summary(merged))
        print()
    print(f"report written to {Path(args.out)}")
    return 0
