"""`harnesscheck report`: results JSON files -> one self-contained HTML page."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

NAME = "report"
ORDER = 60
HELP = "render results JSON (files or folders, merged; fault matrices too) as a self-contained HTML report"
DESCRIPTION = """\
Render results documents as a single HTML file with no external assets (inline CSS, benchmark
plots as PNG, timelines as inline SVG): run header, per-API summary, the verdict matrix (one row
per check), a section per case with its rule, expected vs observed, a timeline of the stream and
the numbered wire log read from the transcripts beside the results, the fault matrix (a
fault-matrix document, or this run's row when its server had faults on), benchmark plots with 95%
confidence intervals, settings as tables, and comparison tables.

Each RESULTS is a file or a folder. A file is a results document (results.json of `check` or
`run`, bench-NAME.json of `bench`) or a fault-matrix document (fault-matrix.json of `faults
--matrix`, shown as the fault-matrix section). A folder stands for every such document at its
top level, in the order their runs started; other JSON files in it (gate.json) are passed over.
Everything is merged in order: a check (id, api) in a later document overrides an earlier one;
benchmarks and comparisons are keyed by name; the header describes the last run with checks.

--format md writes a Markdown summary instead, to paste into an issue or a pull request or to
append to a CI job's summary: the verdict line, the table per API, the MUST and SHOULD failures
with their rule and frame, the kit errors, one line per real client, the benchmarks' arms. It goes
to stdout unless --out names a file; --link URL ends it with a link to the HTML report.

Exit status: 0 written, 2 bad input (missing file, invalid results, a folder without any).

Examples:
  harnesscheck report results/ --out results/report.html
  harnesscheck report results/results.json harnesscheck-results/fault-matrix/fault-matrix.json
  harnesscheck report results/ --format md >> "$GITHUB_STEP_SUMMARY"
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("results", nargs="+", metavar="RESULTS",
                        help="results files (results.json, bench-NAME.json, fault-matrix.json) or "
                             "folders of them, earliest first")
    parser.add_argument("--out", "-o", default=None,
                        help="file to write (default: report.html; with --format md: stdout)")
    parser.add_argument("--format", choices=("html", "md"), default="html",
                        help="html: the self-contained report (default); md: a Markdown summary")
    parser.add_argument("--link", metavar="URL", help="with --format md: a link to the HTML report, at the end")
    parser.add_argument("--quiet", "-q", action="store_true", help="do not print the summary table")


def run(args: argparse.Namespace) -> int:
    from harnesscheck.reports.schema import ResultsError
    from harnesscheck.reports.summary import format_summary

    if args.link and args.format != "md":
        print("harnesscheck report: --link goes with --format md", file=sys.stderr)
        return 2
    try:
        if args.format == "md":
            from harnesscheck.reports.markdown import write_markdown

            _, text = write_markdown(args.results, args.out, report_link=args.link)
            if args.out is None:
                sys.stdout.write(text)
            elif not args.quiet:
                print(f"summary written to {Path(args.out)}")
            return 0
        from harnesscheck.reports.html import write_report

        out = args.out or "report.html"
        merged = write_report(args.results, out)
    except ResultsError as exc:
        print(f"harnesscheck report: {exc}", file=sys.stderr)
        return 2
    if not args.quiet and merged["checks"]:
        print(format_summary(merged))
        print()
    print(f"report written to {Path(out)}")
    return 0
