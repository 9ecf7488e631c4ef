"""Suite concurrency (issue 21): the conformance suite against a reference server whose timing model
makes every turn take about a second, run with N = 1, 4, 16 checks at once (`check --concurrency N`,
xdist workers), its wall time beside the longest single case. A suite that runs as fast as its
slowest case has a ratio near 1; one check at a time, the ratio is the number of turns in the run.

    python -m harnesscheck.conformance.concurrency_bench [--levels 1,4,16] [--turn-s 1.0] [--out DIR]

The wall time is the checks' own (run.checks_wall_s: the first check's start to the last one's end,
over every worker), without pytest's start-up and collection, which do not depend on the endpoint;
the process's whole time is printed beside it. Each level gets a fresh server (no cache carried over).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LEVELS = (1, 4, 16)
TARGET_RATIO = 3.0  # issue 21: at N = 16, the wall time within 3x the longest single case


def server_args(turn_s: float) -> list[str]:
    """The reference server's timing model for about `turn_s` seconds a turn: the fixed cost before
    the first token is the turn (prefill and decode stay small, as the embedded server's)."""
    return ["--ttft-base-ms", f"{turn_s * 1000:g}", "--decode-ms", "0.2", "--prefill-us-per-token", "50"]


@dataclass(frozen=True, slots=True)
class Level:
    """One run of the suite at `concurrency` checks at once."""

    concurrency: int
    wall_s: float  # the checks' wall time (run.checks_wall_s)
    process_s: float  # the whole pytest run, start-up and collection included
    longest_s: float  # the longest single case (duration_s)
    longest_id: str
    sum_s: float  # every case's duration added up: the wall time one at a time, lock waits aside
    outcomes: dict[str, int]

    @property
    def ratio(self) -> float:
        return self.wall_s / self.longest_s if self.longest_s else float("inf")


def measure_level(concurrency: int, out: Path, *, turn_s: float = 1.0,
                  apis: str = "anthropic,chat,responses") -> Level:
    """Run the suite once at `concurrency` against a fresh reference server; results in `out`."""
    from harnesscheck.conformance.options import embedded_features
    from harnesscheck.conformance.runner import SuiteOptions, run_suite
    from harnesscheck.reference_server.launch import ServerProcess

    with ServerProcess(server_args(turn_s)) as server:
        options = SuiteOptions(endpoint=server.url, apis=apis, concurrency=concurrency, preflight=False,
                               expect=tuple(sorted(embedded_features(()))))
        start = time.monotonic()
        doc = run_suite(options, out, subprocess_run=True, quiet=True)
        process_s = time.monotonic() - start
    checks = doc["checks"]
    longest = max(checks, key=lambda c: c["duration_s"])
    return Level(concurrency=concurrency, wall_s=float(doc["run"].get("checks_wall_s") or process_s),
                 process_s=round(process_s, 2), longest_s=longest["duration_s"], longest_id=longest["id"],
                 sum_s=round(sum(c["duration_s"] for c in checks), 2),
                 outcomes=dict(Counter(c["outcome"] for c in checks)))


def measure(levels: tuple[int, ...] = LEVELS, out: Path | None = None, *, turn_s: float = 1.0,
            apis: str = "anthropic,chat,responses", progress: Any = print) -> list[Level]:
    """Every level in turn; each run's results in OUT/n<N>/ (a temporary folder without `out`)."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="harnesscheck-suite-bench-") as scratch:
        base = out or Path(scratch)
        measured = []
        for n in levels:
            progress(f"suite at concurrency {n} ...")
            measured.append(measure_level(n, base / f"n{n}", turn_s=turn_s, apis=apis))
            progress(format_level(measured[-1]))
        return measured


def format_level(level: Level) -> str:
    outcomes = ", ".join(f"{k} {v}" for k, v in sorted(level.outcomes.items()))
    return (f"N={level.concurrency:<3} wall {level.wall_s:7.1f} s (process {level.process_s:6.1f} s)  longest case "
            f"{level.longest_s:5.1f} s ({level.longest_id})  wall/longest {level.ratio:5.2f}  sum of cases "
            f"{level.sum_s:7.1f} s  [{outcomes}]")


def benchmark(levels: list[Level], *, turn_s: float) -> dict[str, Any]:
    """The figures as one `benchmarks[]` entry of a results document (docs/results-schema.md)."""
    arms, ratios = [], []
    for level in levels:
        suite, longest = f"suite N={level.concurrency}", f"longest case N={level.concurrency}"
        for name, value in ((suite, level.wall_s), (longest, level.longest_s)):
            arms.append({"name": name, "samples": [value], "median": value, "p90": value, "ci95": [value, value]})
        ratios.append({"name": f"wall / longest case, N={level.concurrency}", "numerator": suite,
                       "denominator": longest, "value": round(level.ratio, 3)})
    return {"name": "suite-concurrency", "title": "Conformance suite wall time by concurrency", "unit": "s",
            "timing": "scripted-model", "arms": arms, "ratios": ratios,
            "settings": {"turn_s": turn_s, "server_args": server_args(turn_s),
                         "levels": [level.concurrency for level in levels], "target_ratio": TARGET_RATIO,
                         "load_average": [round(x, 2) for x in os.getloadavg()], "cpus": os.cpu_count(),
                         "outcomes": {str(level.concurrency): level.outcomes for level in levels}}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harnesscheck.conformance.concurrency_bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--levels", default=",".join(map(str, LEVELS)), metavar="LIST",
                        help="comma-separated concurrency levels (default: 1,4,16)")
    parser.add_argument("--turn-s", type=float, default=1.0, metavar="SECONDS",
                        help="the reference server's time per turn (default: 1)")
    parser.add_argument("--apis", default="anthropic,chat,responses", metavar="LIST", help="APIs to check (default: all)")
    parser.add_argument("--out", default=None, metavar="DIR",
                        help="keep each run's results in DIR/n<N>/ and write DIR/bench-suite.json")
    args = parser.parse_args(argv)
    levels = tuple(int(x) for x in args.levels.split(",") if x.strip())
    out = Path(args.out) if args.out else None
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")
    measured = measure(levels, out, turn_s=args.turn_s, apis=args.apis)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if out is not None:
        (out / "bench-suite.json").write_text(json.dumps({"benchmarks": [benchmark(measured, turn_s=args.turn_s)]},
                                                         indent=1) + "\n", encoding="utf-8")
    top = max(measured, key=lambda level: level.concurrency)
    verdict = "within" if top.ratio <= TARGET_RATIO else "NOT within"
    print(f"at N={top.concurrency} the suite's wall time is {top.ratio:.2f}x its longest case: {verdict} "
          f"{TARGET_RATIO:g}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
