"""`harnesscheck gate`: compare current results with a baseline; exit 1 on a regression."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

NAME = "gate"
ORDER = 61
HELP = "regression gate: fail on newly failing MUST checks, lost verdicts or clearly worse benchmarks"
DESCRIPTION = """\
Compare current results with a baseline and print what changed.

--baseline and --current are each a results file or a folder. A folder stands for every
harnesscheck results document at its top level, merged in the order their runs started: the
conformance run's results.json and each benchmark's bench-NAME.json (`check --out DIR` and
`bench ... --out DIR` write into the same folder), so the gate sees checks and benchmarks
together. Other JSON files in a folder (gate.json) are passed over.

Fails (exit 1) when
  - a MUST check newly fails: pass, skip or inconclusive in the baseline (or absent from
    it), fail or error now; or
  - a check that passed in the baseline has no verdict now: inconclusive (a stalled or timed-out
    endpoint), skipped, or absent from the current run; or
  - the current run holds fewer checks than the baseline (the missing ones are named); or
  - a benchmark arm in both runs is worse beyond --threshold and clearly so: the bootstrap
    95% CI of (current / baseline) lies wholly above 1 + threshold, with at least 4 samples a
    side (fewer are shown as "not enough samples" and never gate). Latency arms compare
    medians and are worse when higher; throughput and goodput arms (bench load) compare the
    means of their time windows and are worse when lower; a drop to zero is the worst change.
    A replay's arms are paired turn by turn (same session, same turn; at least 6 pairs): the
    median per-turn ratio, and a Wilcoxon signed-rank test must agree; or
  - an arm or a benchmark of the baseline measured nothing now: missing, no samples, or
    NaN / Infinity samples.
Checks marked flaky (--flaky, --flaky-file, or "flaky": true in the results) are shown but
never gate. SHOULD failures, still-failing checks and benchmarks within the threshold are
shown and do not gate.

--update-baseline writes the current results to --baseline: into a folder (an existing one, or
a new path not ending in .json when --current is a folder) as copies of the current documents,
removing the results documents the current run no longer has (other files, such as
flaky.txt, stay); into a file as the current document (merged, when --current is a folder).

Exit status:
  0  no regression (the baseline is updated when --update-baseline is given)
  1  regression
  2  usage or input error (missing or invalid file, a folder without results, bad option)

Examples:
  harnesscheck gate --baseline baseline/ --current results/
  harnesscheck gate --baseline baseline/results.json --current results/results.json
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--baseline", required=True, metavar="PATH",
                        help="baseline results: a results file or a folder of results documents")
    parser.add_argument("--current", required=True, metavar="PATH",
                        help="current results: a results file or a folder of results documents (results/)")
    parser.add_argument("--threshold", type=float, default=0.10,
                        help="relative slowdown a benchmark may show before it gates (default 0.10 = 10%%)")
    parser.add_argument("--flaky", action="append", default=[], metavar="ID",
                        help="a known flaky check (ID or ID:api); repeatable; shown but never gates")
    parser.add_argument("--flaky-file", metavar="FILE",
                        help="file of flaky check ids, one per line, # comments")
    parser.add_argument("--update-baseline", action="store_true",
                        help="write current over baseline when the gate passes (or when there is none yet)")
    parser.add_argument("--force", action="store_true",
                        help="with --update-baseline: write even when the gate fails")
    parser.add_argument("--out", metavar="DIR",
                        help="also write the verdict as DIR/gate.json (a results folder passes it over)")
    parser.add_argument("--json", action="store_true", help="print the verdict as JSON instead of the table")
    parser.add_argument("--bootstrap", type=int, default=2000, metavar="N",
                        help="bootstrap resamples (default 2000)")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")


def _atomic_write(target: Path, write: Any) -> None:
    """Write `target` through a temporary file beside it, so a reader never sees half a baseline."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".baseline-", suffix=".json", dir=target.parent)
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _baseline_is_folder(raw: str, current: Path) -> bool:
    path = Path(raw)
    if path.exists():
        return path.is_dir()
    return raw.endswith(("/", os.sep)) or (current.is_dir() and path.suffix != ".json")


def _write_baseline(current_docs: list[tuple[Path, dict[str, Any]]], current: Path,
                    raw_baseline: str) -> None:
    """--update-baseline: the current documents into the baseline folder, or the current document
    (merged from a folder) into the baseline file; see DESCRIPTION."""
    from harnesscheck.reports.merge import merge_results, read_folder

    baseline = Path(raw_baseline)
    if _baseline_is_folder(raw_baseline, current):
        baseline.mkdir(parents=True, exist_ok=True)
        names = set()
        for file, _ in current_docs:
            _atomic_write(baseline / file.name, lambda tmp, src=file: shutil.copyfile(src, tmp))
            names.add(file.name)
        for file, _ in read_folder(baseline):
            if file.name not in names:  # a document the current run no longer has
                file.unlink()
    elif current.is_dir():
        text = json.dumps(merge_results([doc for _, doc in current_docs]), indent=1) + "\n"
        _atomic_write(baseline, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))
    else:
        _atomic_write(baseline, lambda tmp: shutil.copyfile(current, tmp))


def _has_baseline(path: Path) -> bool:
    from harnesscheck.reports.merge import read_folder

    return path.is_file() or (path.is_dir() and bool(read_folder(path)))


def run(args: argparse.Namespace) -> int:
    from harnesscheck.reports.gate import format_gate, gate, read_flaky_file
    from harnesscheck.reports.merge import merge_results, read_inputs
    from harnesscheck.reports.schema import ResultsError

    def err(msg: str) -> int:
        print(f"harnesscheck gate: {msg}", file=sys.stderr)
        return 2

    if args.threshold < 0:
        return err(f"--threshold must be >= 0, got {args.threshold}")
    if args.force and not args.update_baseline:
        return err("--force only makes sense with --update-baseline")
    baseline_path, current_path = Path(args.baseline), Path(args.current)
    try:
        current_docs = read_inputs([current_path])
        current = merge_results([doc for _, doc in current_docs])
        if not _has_baseline(baseline_path):
            if args.update_baseline:
                _write_baseline(current_docs, current_path, args.baseline)
                print(f"harnesscheck gate: no baseline at {baseline_path}; "
                      "wrote the current results as the baseline")
                return 0
            return err(f"{baseline_path}: baseline not found (run with --update-baseline to create it)")
        baseline = merge_results([doc for _, doc in read_inputs([baseline_path])])
        flaky = set(args.flaky)
        if args.flaky_file:
            flaky |= read_flaky_file(args.flaky_file)
    except ResultsError as exc:
        return err(str(exc))

    report = gate(baseline, current, threshold=args.threshold, flaky=flaky, n_boot=args.bootstrap,
                  seed=args.seed)
    print(json.dumps(report.to_dict(), indent=2) if args.json else format_gate(report))
    if args.out:
        out = Path(args.out) / "gate.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report.to_dict(), indent=2) + "\n", encoding="utf-8")
    if args.update_baseline:
        if report.passed or args.force:
            _write_baseline(current_docs, current_path, args.baseline)
            print(f"\nbaseline updated: {baseline_path}")
        else:
            print(f"\nbaseline NOT updated (gate failed; use --force to overwrite): {baseline_path}")
    return 0 if report.passed else 1
