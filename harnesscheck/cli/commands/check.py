"""`harnesscheck check`: the conformance suite against an endpoint, results in a folder."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

NAME = "check"
ORDER = 10
HELP = "run the conformance suite against an endpoint (default: the embedded reference server)"
EXIT_STATUS = """\
Exit status:
  0    no MUST check failed (SHOULD failures are listed, never fail the run)
  1    a MUST check failed
  2    usage error, or the endpoint is unusable (unreachable, not an LLM API, API key refused,
       model not served: checked before any check runs), or -k selected no check
  3    no MUST check failed, but the kit itself failed on a check (outcome error: a kit bug)
  4    no verdict: no MUST check failed, but the endpoint stalled (a stream stopped sending), or
       fewer than --min-verdicts (default half) of the selected checks, or fewer than
       --min-must-verdicts (default 0.8) of the selected MUST checks, reached a verdict (pass or
       fail): too little was judged to call the endpoint fine (results.json run.verdicts)
  130  interrupted (Ctrl-C, SIGTERM): what was measured is written, marked "interrupted"
The last line printed says which: the MUST failures, "NO VERDICT: ..." and why, or that none failed.
"""
DESCRIPTION = f"""\
Run every conformance check (see `harnesscheck catalog`) against an endpoint and write
OUT/results.json (schema docs/results-schema.md) plus every check's transcript (OUT/transcripts/,
within a size budget, failing checks first). --concurrency N runs N checks at once against the
endpoint (timing-sensitive checks still alone).
--verify-clients then runs the installed real clients (Claude Code, Codex, OpenClaw) against the
same endpoint and prints their measured verdicts beside the inferred ones.
The same suite runs under plain pytest: `pytest --pyargs harnesscheck.conformance --hc-endpoint URL [-n N]`.

{EXIT_STATUS}"""
INTERRUPTED = 130
NO_VERDICT = 4


def add_suite_arguments(parser: argparse.ArgumentParser) -> None:
    from harnesscheck.conformance.options import add_options

    add_options(parser.add_argument, files=False)
    parser.add_argument("--out", default="harnesscheck-results", metavar="DIR",
                        help="output folder for results.json and transcripts (default: harnesscheck-results)")
    parser.add_argument("--junit", default=None, metavar="FILE", help="also write a JUnit XML report")
    parser.add_argument("-k", dest="select", default=None, metavar="EXPR", help="only checks matching (pytest -k)")
    parser.add_argument("-v", "--verbose", action="store_true", help="one line per check while running")
    parser.add_argument("--concurrency", type=int, default=1, metavar="N",
                        help="run N checks at once against the endpoint, in pytest-xdist workers; timing-sensitive "
                             "checks (history timing witness, preamble timing) still hold it alone (default: 1)")
    parser.add_argument("--verify-clients", action="store_true",
                        help="after the suite, run the installed real clients (a turn per real tool kind: text, "
                             "shell, Claude Code's Read/Edit/image, Codex's and OpenClaw's apply_patch) against the "
                             "endpoint and print their measured verdicts beside the inferred ones (results.json: "
                             "client_verification); install them once with `python -m harnesscheck.agents.clients`")
    parser.add_argument("--client-timeout", type=float, default=180.0, metavar="SECONDS",
                        help="with --verify-clients: time limit per client turn (default: 180)")
    parser.add_argument("--min-verdicts", type=float, default=0.5, metavar="SHARE",
                        help="the share of the selected checks (0 to 1) that must reach a verdict, pass or "
                             "fail; below it, or when the endpoint stalled, the run exits 4 (default: 0.5)")
    parser.add_argument("--min-must-verdicts", type=float, default=0.8, metavar="SHARE",
                        help="the share of the selected MUST checks (0 to 1) that must reach a verdict, pass or "
                             "fail; below it the run exits 4 (default: 0.8)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_suite_arguments(parser)


def suite_options(args: argparse.Namespace):  # -> SuiteOptions
    """The suite's options from the command line, checked, and the endpoint checked
    (conformance.preflight): a bad value or an unusable endpoint raises UsageError (exit 2)."""
    from harnesscheck.conformance.options import validate_options
    from harnesscheck.conformance.runner import SuiteOptions, check_endpoint, concurrency_problem
    from harnesscheck.errors import UsageError

    problem = validate_options(endpoint=args.hc_endpoint, apis=args.hc_apis, expect=args.hc_expect,
                               tries=args.hc_tries, timeout=args.hc_timeout)
    if problem is None:
        problem = concurrency_problem(args.concurrency)
    if problem is None and not args.client_timeout > 0:
        problem = f"--client-timeout must be a number of seconds above 0, got {args.client_timeout:g}"
    if problem is None and not 0 <= args.min_verdicts <= 1:
        problem = f"--min-verdicts is a share from 0 to 1, got {args.min_verdicts:g}"
    if problem is None and args.hc_context_window is not None and args.hc_context_window < 1:
        problem = f"--context-window is a number of tokens above 0, got {args.hc_context_window}"
    if problem is None and not 0 <= args.min_must_verdicts <= 1:
        problem = f"--min-must-verdicts is a share from 0 to 1, got {args.min_must_verdicts:g}"
    if problem is None:  # a mistyped --server-arg=--fault=NAME: said here, not as the embedded server's crash
        from harnesscheck.reference_server.faults import in_server_args, unknown_problem

        problem = unknown_problem(in_server_args(args.hc_server_arg))
    if problem:
        raise UsageError(problem)
    options = SuiteOptions(endpoint=args.hc_endpoint, model=args.hc_model,
                           api_key=args.hc_api_key or os.environ.get("HARNESSCHECK_API_KEY"),
                           apis=args.hc_apis, tries=args.hc_tries, timeout=args.hc_timeout,
                           expect=tuple(args.hc_expect), server_args=tuple(args.hc_server_arg),
                           witness=args.hc_witness, quick=args.hc_quick, junit=args.junit,
                           select=args.select, verbose=args.verbose, preflight=not args.hc_no_preflight,
                           concurrency=args.concurrency, min_verdicts=args.min_verdicts,
                           min_must_verdicts=args.min_must_verdicts, peer=args.hc_peer,
                           context_window=args.hc_context_window)
    check_endpoint(options, progress=lambda line: print(line, flush=True))
    return options


def after_suite(args: argparse.Namespace):  # -> AfterSuite | None
    """What runs after the suite against the same endpoint: with --verify-clients, the installed real
    clients (harnesscheck.agents.clients.verify), each turn limited to --client-timeout."""
    if not args.verify_clients:
        return None
    from functools import partial

    from harnesscheck.agents.clients.verify import after_suite as verify_clients

    return partial(verify_clients, timeout=args.client_timeout)


def run_and_summarize(options: Any, out: Path, *, after: Any = None,
                      label_width: int = 0) -> tuple[dict[str, Any], int]:
    """Run the suite (SuiteOptions), then `after` (see `after_suite`), and print its summary: the table,
    the failures, the per-client lines (reports.clients) and where the results are. Returns the document and the exit
    status (see EXIT_STATUS)."""
    from harnesscheck.conformance.runner import RunInterrupted, run_suite

    try:
        doc, status = run_suite(options, out, after=after), None
    except RunInterrupted as stopped:
        doc, status = stopped.doc, INTERRUPTED
    from harnesscheck.reports.summary import format_summary  # after: `reports` loads matplotlib (seconds)
    print()
    print(format_summary(doc))
    for line in client_summary(doc):
        print(line)
    print(f"{'results:':<{label_width}} {out / 'results.json'}")
    if status == INTERRUPTED:
        print("interrupted: the results hold what was measured until then (run.interrupted)")
        return doc, status
    return doc, final_status(doc)


def client_summary(doc: dict[str, Any]) -> list[str]:
    """What `check` and `run` print per real client: the run's one statement per client (reports.clients,
    the same lines as the report's banner and JUnit's properties), each with the frame its own failed
    session names under it."""
    from harnesscheck.reports.clients import client_verdicts

    verdicts = client_verdicts(doc)
    out = ["", "real clients:"] if verdicts else []
    for verdict in verdicts:
        out.append(f"  {verdict.line}")
        if verdict.frame_text:
            out.append(f"      {verdict.frame_text}")
    return out


def final_status(doc: dict[str, Any]) -> int:
    """The exit status of a finished run (EXIT_STATUS): a MUST failure first, then no verdict (a stalled
    endpoint, too few verdicts: run.verdicts), then a kit error."""
    from harnesscheck.reports.summary import EXIT_MUST_FAILED, exit_status

    status = exit_status(doc)
    if status != EXIT_MUST_FAILED and (doc["run"].get("verdicts") or {}).get("outcome", "enough") != "enough":
        return NO_VERDICT
    return status


def run(args: argparse.Namespace) -> int:
    from harnesscheck.reports.summary import final_line

    doc, status = run_and_summarize(suite_options(args), Path(args.out), after=after_suite(args))
    if status != INTERRUPTED:
        print(final_line(doc))
    return status
