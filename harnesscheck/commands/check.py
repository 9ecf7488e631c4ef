"""`harnesscheck check`: the conformance suite against an endpoint, results in a folder."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

NAME = "check"
ORDER = 10
HELP = "run the conformance suite against an endpoint (default: the embedded reference server)"
DESCRIPTION = """\
Run every conformance check (see `harnesscheck catalog`) against an endpoint and write
OUT/results.json (schema docs/results-schema.md) plus the transcripts of failing checks.
Exit status: 0 when no MUST check failed, 1 when one did, 2 on a usage error.
The same suite runs under plain pytest: `pytest --pyargs conformance --endpoint URL`.
"""


def add_suite_arguments(parser: argparse.ArgumentParser) -> None:
    from conformance.options import add_options

    add_options(parser.add_argument)
    parser.add_argument("--out", default="harnesscheck-results", metavar="DIR",
                        help="output folder for results.json and transcripts (default: harnesscheck-results)")
    parser.add_argument("--junit", default=None, metavar="FILE", help="also write a JUnit XML report")
    parser.add_argument("-k", dest="select", default=None, metavar="EXPR", help="only checks matching (pytest -k)")
    parser.add_argument("-v", "--verbose", action="store_true", help="one line per check while running")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_suite_arguments(parser)


def suite_options(args: argparse.Namespace):  # -> SuiteOptions
    from conformance.runner import SuiteOptions

    return SuiteOptions(endpoint=args.hc_endpoint, model=args.hc_model,
                        api_key=args.hc_api_key or os.environ.get("HARNESSCHECK_API_KEY"), apis=args.hc_apis,
                        tries=args.hc_tries, timeout=args.hc_timeout, expect=tuple(args.hc_expect),
                        server_args=tuple(args.hc_server_arg), witness=args.hc_witness, junit=args.junit, select=args.select,
                        verbose=args.verbose)


def run(args: argparse.Namespace) -> int:
    from conformance.runner import harness_lines, must_failed, run_suite
    from reports.summary import format_summary

    out = Path(args.out)
    doc = run_suite(suite_options(args), out)
    print(format_summary(doc))
    for line in harness_lines(doc):
        print(line)
    print(f"results: {out / 'results.json'}")
    return 1 if must_failed(doc) else 0
