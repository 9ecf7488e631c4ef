"""`harnesscheck faults`: the reference server's known-bug switches, and the fault matrix."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

NAME = "faults"
ORDER = 31
HELP = "list the reference server's fault modes (one known bug each); --matrix proves every check catches one"
DESCRIPTION = """\
Each fault makes the reference server reproduce one known bug (`harnesscheck serve --fault NAME`).
With --matrix, the whole suite runs once per fault (and once clean): the checks the catalog maps
to a fault must fail, no other MUST check may fail, and the clean server must pass everything.
Each run is forked from a warm process against its own server with that fault on, without
modelled time (no check of a default run reads the clock); on a terminal a bar counts the runs as
they finish and how many found a problem.

Exit status: 0 listed, or the matrix holds; 1 the matrix found a problem.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--matrix", action="store_true", help="run the fault matrix (takes minutes)")
    parser.add_argument("--fault", action="append", default=[], metavar="NAME",
                        help="with --matrix: only this fault (repeatable; default: every fault)")
    parser.add_argument("--out", default="harnesscheck-results/fault-matrix", metavar="DIR",
                        help="matrix output folder (default: harnesscheck-results/fault-matrix)")
    parser.add_argument("--workers", type=int, default=2, metavar="N", help="suite runs in parallel (default: 2)")
    parser.add_argument("--json", action="store_true", help="list faults as JSON")


def run(args: argparse.Namespace) -> int:
    from harnesscheck.conformance import catalog
    from harnesscheck.conformance.options import unknown_choice
    from harnesscheck.errors import UsageError
    from harnesscheck.reference_server.faults import FAULTS

    for name in args.fault:
        if name not in FAULTS:
            raise UsageError(unknown_choice("--fault", "fault", name, FAULTS))
    if args.workers < 1:
        raise UsageError(f"--workers must be 1 or more, got {args.workers}")

    if not args.matrix:
        if args.json:
            print(json.dumps([{"name": f.name, "bug": f.bug, "source": f.source,
                               "caught_by": [c.id for c in catalog.checks_for_fault(f.name)]}
                              for f in FAULTS.values()], indent=1))
            return 0
        for f in FAULTS.values():
            caught = ", ".join(c.id for c in catalog.checks_for_fault(f.name)) or "NO CHECK"
            print(f"{f.name:36} {f.bug}\n{'':36} source: {f.source}; caught by: {caught}")
        return 0

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from harnesscheck.conformance.fault_matrix import coverage_problems, run_matrix, write

    static = coverage_problems()
    for problem in static:
        print(f"catalog: {problem}")
    names = args.fault or sorted(FAULTS)
    # Each suite run takes tens of seconds: a spinner, the runs done of all and the time so far say
    # it is moving (a percentage with an estimate sat at 0% -:--:-- until the first run ended).
    columns = (SpinnerColumn(), TextColumn("fault matrix: {task.description}"), BarColumn(),
               MofNCompleteColumn(), TextColumn("suite runs"), TimeElapsedColumn())
    with Progress(*columns, disable=not sys.stdout.isatty()) as bar:
        task = bar.add_task(f"{args.workers} running at a time", total=len(names) + 1)
        troubled: list[str] = []

        def done(run: Any) -> None:  # called as each fault's run finishes, whichever comes first
            if run.problems():
                troubled.append(run.fault)
            problems = f", {len(troubled)} with problems so far" if troubled else ""
            bar.update(task, advance=1, description=f"{run.fault} done{problems}")

        matrix = run_matrix(Path(args.out), faults=names, workers=args.workers, progress=done)
    path = write(matrix, Path(args.out))
    rows: dict[str, list[str]] = {}
    for cell in matrix["cells"]:
        if cell["outcome"] in ("fail", "error"):
            rows.setdefault(cell["fault"], []).append(cell["check"] + ("" if cell["expected_fail"] else "!"))
    for fault in names:
        print(f"{fault:36} fails: {', '.join(rows.get(fault, [])) or '-'}")
    for problem in matrix["problems"]:
        print(f"PROBLEM {problem}")
    print(f"matrix: {path}  ({len(matrix['problems']) + len(static)} problem(s); '!' = not mapped in the catalog)")
    return 1 if matrix["problems"] or static else 0
