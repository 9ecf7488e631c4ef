"""`harnesscheck gate`: compare current results with a baseline; exit 1 on a regression."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

NAME = "gate"
ORDER = 61
HELP = "regression gate: fail on newly failing MUST checks or clearly slower benchmarks"
DESCRIPTION = """\
Compare a current results.json with a baseline and print what changed.

Fails (exit 1) when
  - a MUST check newly fails: pass, skip or inconclusive in the baseline (or absent from
    it), fail or error now; or
  - a benchmark arm in both runs is slower beyond --threshold and clearly so: the bootstrap
    95% CI of (current median / baseline median) lies wholly above 1 + threshold.
Checks marked flaky (--flaky, --flaky-file, or "flaky": true in the results) are shown but
never gate. SHOULD failures, still-failing checks, checks missing from the current run and
benchmarks within the threshold are shown and do not gate.

Exit status:
  0  no regression (the baseline is updated when --update-baseline is given)
  1  regression
  2  usage or input error (missing or invalid file, bad option)

Example:
  harnesscheck gate --baseline baseline/results.json --current results/results.json
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--baseline", required=True, metavar="B.json", help="baseline results.json")
    parser.add_argument("--current", required=True, metavar="C.json", help="current results.json")
    parser.add_argument("--threshold", type=float, default=0.10,
                        help="relative slowdown a benchmark may show before it gates (default 0.10 = 10%%)")
    parser.add_argument("--flaky", action="append", default=[], metavar="ID",
                        help="a known flaky check (ID or ID:api); repeatable; shown but never gates")
    parser.add_argument("--flaky-file", metavar="FILE", help="file of flaky check ids, one per line, # comments")
    parser.add_argument("--update-baseline", action="store_true",
                        help="copy current over baseline when the gate passes (or when there is no baseline yet)")
    parser.add_argument("--force", action="store_true", help="with --update-baseline: write even when the gate fails")
    parser.add_argument("--json", metavar="OUT", help="also write the gate verdict as JSON to OUT")
    parser.add_argument("--bootstrap", type=int, default=2000, metavar="N", help="bootstrap resamples (default 2000)")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")


def _write_baseline(current: Path, baseline: Path) -> None:
    baseline.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".baseline-", suffix=".json", dir=baseline.parent)
    os.close(fd)
    shutil.copyfile(current, tmp)
    os.replace(tmp, baseline)


def run(args: argparse.Namespace) -> int:
    from reports.gate import format_gate, gate, read_flaky_file
    from reports.schema import ResultsError, load_results

    def err(msg: str) -> int:
        print(f"harnesscheck gate: {msg}", file=sys.stderr)
        return 2

    if args.threshold < 0:
        return err(f"--threshold must be >= 0, got {args.threshold}")
    if args.force and not args.update_baseline:
        return err("--force only makes sense with --update-baseline")
    baseline_path, current_path = Path(args.baseline), Path(args.current)
    try:
        current = load_results(current_path)
        if not baseline_path.exists():
            if args.update_baseline:
                _write_baseline(current_path, baseline_path)
                print(f"harnesscheck gate: no baseline at {baseline_path}; wrote the current results as the baseline")
                return 0
            return err(f"{baseline_path}: baseline not found (run with --update-baseline to create it)")
        baseline = load_results(baseline_path)
        flaky = set(args.flaky)
        if args.flaky_file:
            flaky |= read_flaky_file(args.flaky_file)
    except ResultsError as exc:
        return err(str(exc))

    report = gate(baseline, current, threshold=args.threshold, flaky=flaky, n_boot=args.bootstrap, seed=args.seed)
    print(format_gate(report))
    if args.json:
        out = Path(args.json)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report.to_dict(), indent=2) + "\n", encoding="utf-8")
    if args.update_baseline:
        if report.passed or args.force:
            _write_baseline(current_path, baseline_path)
            print(f"\nbaseline updated: {baseline_path}")
        else:
            print(f"\nbaseline NOT updated (gate failed; use --force to overwrite): {baseline_path}")
    return 0 if report.passed else 1
