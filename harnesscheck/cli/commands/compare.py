"""`harnesscheck compare A B`: per-task paired comparison of two profiles (tool calls by default)."""

from __future__ import annotations

import argparse
import sys

NAME = "compare"
HELP = ("compare two profiles task by task (tool calls: totals, W/L/T, p-values, CI), or results folders side by "
        "side (a compatibility matrix)")
DESCRIPTION = """\
Compare two profiles task by task, as in the catalog-profile experiment (same model, two model ids).

A and B are each a run folder RUN/PROFILE/ with one sub-folder per task holding the agent's logs
(Codex rollout-*.jsonl, `codex exec --json` stdout, or Claude Code stream-json), or a CSV with
columns task_id and tool_calls (or the --metric column). Tasks present in both are paired; the
difference is B - A; wins are tasks where A is larger.

Prints the table (total and mean per task, difference, wins/losses/ties, paired permutation p,
Wilcoxon p, bootstrap 95% CI of the mean difference) and, with --out, writes comparison.json,
comparison.md and paired_differences.png there. --format md prints that table and the figures as
Markdown (comparison.md's text), to paste into an issue or a pull request.

Example:
  harnesscheck compare runs/r1/gpt-5.5 runs/r1/fallback --out reports/r1

Given results folders or files instead (`check --out` of two stacks, or of two nights), compare lays the runs
side by side: one row per check, one column per run (outcome, and a failure's level), the rows that differ marked,
each run's per-client lines after the table; `--format md` prints Markdown for an issue or a PR, `--out DIR`
writes compare.md and compare.html (in the report's style), `--only-changes` keeps the rows that differ. A run may
be labelled LABEL=PATH:
  harnesscheck compare vllm=runs/vllm dynamo=runs/dynamo llamacpp=runs/llamacpp --out docs/compat

Exit status: 0 compared; 2 a missing or unreadable input, or no task in both.
"""
ORDER = 70


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("a", help="profile A: run folder (RUN/PROFILE/) or CSV (task_id, tool_calls)")
    parser.add_argument("b", help="profile B: run folder or CSV")
    parser.add_argument("more", nargs="*", metavar="RUN",
                        help="with results folders or files: more runs, side by side (a compatibility matrix)")
    parser.add_argument("--out", metavar="DIR", help="write comparison.json, comparison.md and the plot here")
    parser.add_argument("--label-a", help="name of profile A (default: CSV profile column or folder name)")
    parser.add_argument("--label-b", help="name of profile B")
    parser.add_argument(
        "--metric",
        default="tool_calls",
        help="per-task value to compare: tool_calls (default), turns, input_tokens, output_tokens, "
        "or any numeric CSV column",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the Monte Carlo and bootstrap draws")
    parser.add_argument(
        "--resamples",
        type=int,
        default=99_999,
        help="Monte Carlo sign flips when 2^n is too many to enumerate",
    )
    parser.add_argument("--bootstrap", type=int, default=10_000, help="bootstrap resamples")
    parser.add_argument(
        "--json", action="store_true", help="print comparison.json to stdout instead of the table"
    )
    parser.add_argument(
        "--format", choices=("table", "md"), default="table",
        help="table: the terminal table (default); md: the same as Markdown, for an issue or a PR",
    )
    parser.add_argument("--only-changes", action="store_true",
                        help="results mode: list only the checks whose outcome differs between the runs")


def _is_results(path: str) -> bool:
    """A results folder (holding results.json) or a results file: `compare` lays the runs side by side."""
    from pathlib import Path

    label, sep, rest = path.partition("=")
    p = Path(rest if sep and label and "/" not in label else path)
    return (p / "results.json").is_file() or (p.is_file() and p.suffix == ".json")


def _matrix(args: argparse.Namespace) -> int:
    """RUN_A RUN_B [...]: one table, check x run (docs/peers, docs/compat.md); HTML and Markdown with --out."""
    from pathlib import Path

    from harnesscheck.errors import UsageError
    from harnesscheck.reports import matrix
    from harnesscheck.reports.schema import ResultsError

    try:
        runs = [matrix.load_run(spec) for spec in [args.a, args.b, *args.more]]
    except ResultsError as exc:
        raise UsageError(str(exc)) from None
    m = matrix.build(runs)
    if args.format == "md":
        sys.stdout.write(matrix.to_markdown(m, only_changes=args.only_changes))
    else:
        sys.stdout.write(matrix.to_text(m, only_changes=args.only_changes))
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "compare.md").write_text(matrix.to_markdown(m), encoding="utf-8")
        (out / "compare.html").write_text(matrix.to_html(m), encoding="utf-8")
        print(f"wrote {out / 'compare.md'}, {out / 'compare.html'}", file=sys.stderr)
    return 0


def run(args: argparse.Namespace) -> int:
    import json

    if _is_results(args.a) and _is_results(args.b):
        return _matrix(args)
    if args.more:
        from harnesscheck.errors import UsageError

        raise UsageError("more than two inputs are compared only as results (folders with results.json)")

    from rich.console import Console

    from harnesscheck.agents.counts import load_counts, write_comparison
    from harnesscheck.stats.compare import compare_counts, comparison_markdown

    err = Console(stderr=True)
    try:
        ca, la, ua = load_counts(args.a, args.metric)
        cb, lb, ub = load_counts(args.b, args.metric)
    except (OSError, ValueError) as exc:
        err.print(f"[red]error:[/red] {exc}")
        return 2
    if la == lb and not (args.label_a or args.label_b):
        la, lb = f"{la} (A)", f"{lb} (B)"
    try:
        comp = compare_counts(
            ca,
            cb,
            label_a=args.label_a or la,
            label_b=args.label_b or lb,
            metric=args.metric,
            permutation_resamples=args.resamples,
            bootstrap_resamples=args.bootstrap,
            seed=args.seed,
        )
    except ValueError as exc:
        err.print(f"[red]error:[/red] {exc} (A has {len(ca)} tasks, B has {len(cb)})")
        return 2
    if args.json and args.format == "md":
        err.print("[red]error:[/red] --json and --format md each choose what is printed: give one")
        return 2
    if args.json:
        sys.stdout.write(json.dumps(comp.to_dict(), indent=2) + "\n")
    elif args.format == "md":
        sys.stdout.write(comparison_markdown(comp))
    else:
        console = Console()
        console.print(comp.rich_table())
        for line in comp.summary_lines():
            console.print(line, highlight=False, soft_wrap=True)
        if comp.only_a or comp.only_b:
            console.print(
                f"Only in A: {', '.join(comp.only_a) or '-'}; only in B: {', '.join(comp.only_b) or '-'}",
                highlight=False,
            )
    if args.out:
        paths = write_comparison(comp, args.out, usages_a=ua, usages_b=ub)
        err.print("wrote " + ", ".join(str(p) for p in paths.values()), highlight=False, soft_wrap=True)
    return 0
