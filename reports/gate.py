"""The regression gate: compare a current results document with a baseline.

The gate fails when
- a MUST check newly fails: pass / skip / inconclusive in the baseline (or absent from it), fail or
  error now; checks marked flaky are shown but never gate;
- a benchmark arm present in both runs got slower beyond `threshold` *and* the slowdown is
  statistically clear: the ratio current median / baseline median has a bootstrap 95% CI whose
  lower bound lies above `1 + threshold`. (For a benchmark with `"better": "higher"`, e.g. tokens
  per second, the ratio is taken the other way round, so a ratio above 1 is always worse.)
  An arm with fewer than `MIN_SAMPLES` samples on either side is never judged ("not enough
  samples"): with n = 3 per side even a complete separation has an exact one-sided rank-test
  p = 1/C(6,3) = 0.05, above the 0.025 that a 95% interval's lower bound stands for, while with
  n = 4 it is 1/C(8,4) = 1/70 = 0.014. Below that the bootstrap interval only restates the range
  (with one sample per side it is a single point).

- a check lost its verdict: it passed in the baseline and is inconclusive, skipped or absent now
  (a stalled endpoint's run is all inconclusive; a run cut short misses checks); flaky ones are
  shown and never gate;
- the current run holds fewer checks than the baseline (the missing ones are named).

Everything else (newly passing, still failing, SHOULD failures, slower within the threshold, faster)
is reported and does not gate. Documented for users in docs/gate.md.

Public API: `gate(baseline, current, *, threshold, flaky, ...) -> GateReport`,
`format_gate(report) -> str`, `bootstrap_ratio_ci(numerator, denominator, ...) -> (lo, hi)`,
`read_flaky_file(path) -> set[str]`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from harnesscheck.reports.schema import ResultsError
from harnesscheck.stats.bootstrap import ratio_ci

__all__ = [
    "MIN_SAMPLES",
    "BenchmarkDelta",
    "CheckChange",
    "GateReport",
    "bootstrap_ratio_ci",
    "format_gate",
    "gate",
    "read_flaky_file",
]

FAILING = ("fail", "error")
#: fewest samples per side for a benchmark verdict (the smallest n at which an exact rank test of
#: two samples of n can reach one-sided p < 0.025: 1 / C(2n, n) = 1/70 at n = 4; see the module docstring)
MIN_SAMPLES = 4
NO_VERDICT = ("skip", "inconclusive")  # a check that ran and said nothing about the endpoint


@dataclass(frozen=True)
class CheckChange:
    """One check whose state is worth showing. `baseline` is None when the baseline lacks it,
    `current` None when the current run lacks it."""

    id: str
    api: str
    level: str
    title: str
    baseline: str | None
    current: str | None
    flaky: bool = False
    message: str = ""

    @property
    def key(self) -> str:
        return f"{self.id} [{self.api}]"


@dataclass(frozen=True)
class BenchmarkDelta:
    """One arm of one benchmark, baseline vs current."""

    benchmark: str
    arm: str
    unit: str
    better: str  # "lower" or "higher"
    baseline_median: float | None
    current_median: float | None
    n_baseline: int
    n_current: int
    ratio: float | None  # > 1 means worse, whichever way "better" points
    ci95: tuple[float, float] | None
    verdict: str  # regression | slower (not clear) | slower (within threshold) | faster | no clear change
    #               | no samples | not enough samples | undefined (median 0)
    gating: bool


@dataclass
class GateReport:
    threshold: float
    newly_failing: list[CheckChange] = field(default_factory=list)
    newly_passing: list[CheckChange] = field(default_factory=list)
    still_failing: list[CheckChange] = field(default_factory=list)
    should_failing: list[CheckChange] = field(default_factory=list)  # SHOULD checks newly failing (never gate)
    flaky: list[CheckChange] = field(default_factory=list)  # flaky checks that fail now (never gate)
    missing: list[CheckChange] = field(default_factory=list)  # in baseline, absent now
    # passed in the baseline, inconclusive / skipped / absent now (gating unless flaky)
    lost_verdicts: list[CheckChange] = field(default_factory=list)
    lost_flaky: list[CheckChange] = field(default_factory=list)  # the same for flaky checks (never gate)
    baseline_checks: int = 0
    current_checks: int = 0
    benchmarks: list[BenchmarkDelta] = field(default_factory=list)
    missing_benchmarks: list[str] = field(default_factory=list)
    baseline_run: str = ""
    current_run: str = ""

    @property
    def regressions(self) -> list[BenchmarkDelta]:
        return [b for b in self.benchmarks if b.gating]

    @property
    def fewer_checks(self) -> bool:
        """The current run holds fewer checks than the baseline (a run cut short or narrowed)."""
        return self.current_checks < self.baseline_checks

    @property
    def passed(self) -> bool:
        return not (self.newly_failing or self.regressions or self.lost_verdicts or self.fewer_checks)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["passed"] = self.passed
        out["regressions"] = [asdict(b) for b in self.regressions]
        out["newly_failing_ids"] = [c.key for c in self.newly_failing]
        out["lost_verdict_ids"] = [c.key for c in self.lost_verdicts]
        out["missing_ids"] = [c.key for c in self.missing]
        out["fewer_checks"] = self.fewer_checks
        return out


def bootstrap_ratio_ci(
    numerator: Sequence[float] | np.ndarray,
    denominator: Sequence[float] | np.ndarray,
    *,
    n_boot: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap CI of median(numerator) / median(denominator).

    Each sample set is resampled independently with replacement, `n_boot` times, from a seeded
    generator, so the same inputs always give the same interval (`harnesscheck.stats.bootstrap.ratio_ci`,
    the kit's shared implementation). Raises ValueError when a side is empty or the denominator's
    median is 0.
    """
    num = np.asarray(numerator, dtype=float)
    den = np.asarray(denominator, dtype=float)
    if num.size == 0 or den.size == 0:
        raise ValueError("bootstrap_ratio_ci needs samples on both sides")
    if np.median(den) == 0:
        raise ValueError("the denominator's median is 0: the ratio is undefined")
    ci = ratio_ci(num, den, np.median, confidence=confidence, resamples=n_boot, seed=seed)
    return float(ci.low), float(ci.high)


def read_flaky_file(path: str | Path) -> set[str]:
    """Flaky check ids, one per line (`ID` or `ID:api`); `#` starts a comment; blanks ignored."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ResultsError(f"{path}: cannot read flaky file: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise ResultsError(f"{path}: not a flaky file (not UTF-8 text at byte {exc.start})") from None
    out = set()
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            out.add(line)
    return out


def _is_flaky(check: dict[str, Any], flaky: set[str]) -> bool:
    return bool(check.get("flaky")) or check["id"] in flaky or f"{check['id']}:{check['api']}" in flaky


def _change(c: dict[str, Any], base: str | None, cur: str | None, flaky: bool) -> CheckChange:
    message = c.get("message", "") if cur else ""
    if cur == "inconclusive" and c.get("cause") and c["cause"] not in message:
        message = f"{c['cause']}: {message}" if message else c["cause"]
    return CheckChange(id=c["id"], api=c["api"], level=c["level"], title=c.get("title", ""), baseline=base,
                       current=cur, flaky=flaky, message=message)


def _compare_checks(baseline: dict[str, Any], current: dict[str, Any], flaky: set[str], report: GateReport) -> None:
    base = {(c["id"], c["api"]): c for c in baseline.get("checks", [])}
    cur = {(c["id"], c["api"]): c for c in current.get("checks", [])}
    for key, c in cur.items():
        b = base.get(key)
        b_out = b["outcome"] if b else None
        is_flaky = _is_flaky(c, flaky) or (b is not None and _is_flaky(b, flaky))
        ch = _change(c, b_out, c["outcome"], is_flaky)
        if c["outcome"] in FAILING:
            if is_flaky:
                report.flaky.append(ch)
            elif b_out in FAILING:
                report.still_failing.append(ch)
            elif c["level"] == "MUST":
                report.newly_failing.append(ch)
            else:
                report.should_failing.append(ch)  # a SHOULD check newly failing: shown, never gates
        elif b_out in FAILING:
            report.newly_passing.append(ch)
        elif b_out == "pass" and c["outcome"] in NO_VERDICT:
            (report.lost_flaky if is_flaky else report.lost_verdicts).append(ch)
    for key, b in base.items():
        if key not in cur:
            ch = _change(b, b["outcome"], None, _is_flaky(b, flaky))
            report.missing.append(ch)
            if b["outcome"] == "pass":
                (report.lost_flaky if ch.flaky else report.lost_verdicts).append(ch)
    report.baseline_checks, report.current_checks = len(base), len(cur)


def _samples(arm: dict[str, Any]) -> np.ndarray:
    xs = np.asarray([x for x in arm.get("samples") or [] if x is not None], dtype=float)
    finite: np.ndarray = xs[np.isfinite(xs)]
    return finite


def _compare_benchmarks(
    baseline: dict[str, Any], current: dict[str, Any], threshold: float, n_boot: int, seed: int, report: GateReport
) -> None:
    base = {b["name"]: b for b in baseline.get("benchmarks") or []}
    for bench in current.get("benchmarks") or []:
        old = base.get(bench["name"])
        if old is None:
            continue
        better = bench.get("better", old.get("better", "lower"))
        old_arms = {a["name"]: a for a in old.get("arms", [])}
        for arm in bench.get("arms", []):
            if arm["name"] not in old_arms:
                continue
            xs_b, xs_c = _samples(old_arms[arm["name"]]), _samples(arm)
            if xs_b.size == 0 or xs_c.size == 0:
                report.benchmarks.append(BenchmarkDelta(
                    bench["name"], arm["name"], bench.get("unit", ""), better,
                    float(np.median(xs_b)) if xs_b.size else None, float(np.median(xs_c)) if xs_c.size else None,
                    int(xs_b.size), int(xs_c.size), None, None, "no samples", False))
                continue
            med_b, med_c = float(np.median(xs_b)), float(np.median(xs_c))
            num, den = (xs_c, xs_b) if better == "lower" else (xs_b, xs_c)
            if min(xs_b.size, xs_c.size) < MIN_SAMPLES:
                ratio_shown = float(np.median(num) / np.median(den)) if np.median(den) != 0 else None
                report.benchmarks.append(BenchmarkDelta(
                    bench["name"], arm["name"], bench.get("unit", ""), better, med_b, med_c,
                    int(xs_b.size), int(xs_c.size), ratio_shown, None, "not enough samples", False))
                continue
            if np.median(den) == 0:
                report.benchmarks.append(BenchmarkDelta(
                    bench["name"], arm["name"], bench.get("unit", ""), better, med_b, med_c,
                    int(xs_b.size), int(xs_c.size), None, None, "undefined (median 0)", False))
                continue
            ratio = float(np.median(num) / np.median(den))
            lo, hi = bootstrap_ratio_ci(num, den, n_boot=n_boot, seed=seed)
            limit = 1 + threshold
            if lo > limit:
                verdict, gating = "regression", True
            elif ratio > limit:
                verdict, gating = "slower (not clear)", False
            elif lo > 1:
                verdict, gating = "slower (within threshold)", False
            elif hi < 1:
                verdict, gating = "faster", False
            else:
                verdict, gating = "no clear change", False
            report.benchmarks.append(BenchmarkDelta(
                bench["name"], arm["name"], bench.get("unit", ""), better, med_b, med_c,
                int(xs_b.size), int(xs_c.size), ratio, (lo, hi), verdict, gating))
    cur_names = {b["name"] for b in current.get("benchmarks") or []}
    report.missing_benchmarks = [n for n in base if n not in cur_names]


def gate(
    baseline: dict[str, Any],
    current: dict[str, Any],
    *,
    threshold: float = 0.10,
    flaky: Iterable[str] = (),
    n_boot: int = 2000,
    seed: int = 0,
) -> GateReport:
    """Compare two (validated) results documents; see the module docstring for the rules."""
    if threshold < 0:
        raise ValueError(f"threshold must be >= 0, got {threshold}")
    report = GateReport(threshold=threshold, baseline_run=baseline["run"]["id"], current_run=current["run"]["id"])
    _compare_checks(baseline, current, set(flaky), report)
    _compare_benchmarks(baseline, current, threshold, n_boot, seed, report)
    return report


def _fmt_num(x: float | None) -> str:
    if x is None:
        return "-"
    a = abs(x)
    return f"{x:,.0f}" if a >= 1000 else f"{x:.1f}" if a >= 10 else f"{x:.3g}"


def _table(rows: list[list[str]], right: set[int]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  " + "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()
            for r in rows]


def format_gate(report: GateReport) -> str:
    """The readable diff printed by `harnesscheck gate` (plain ASCII, fit for CI logs)."""
    lines: list[str] = []
    reasons = []
    if report.newly_failing:
        n = len(report.newly_failing)
        reasons.append(f"{n} MUST check{'s' if n != 1 else ''} newly failing")
    if report.lost_verdicts:
        n = len(report.lost_verdicts)
        reasons.append(f"{n} check{'s' if n != 1 else ''} that passed in the baseline without a verdict now")
    if report.fewer_checks:
        reasons.append(f"{report.current_checks} checks in the current run, {report.baseline_checks} in the "
                       "baseline")
    if report.regressions:
        n = len(report.regressions)
        reasons.append(f"{n} benchmark regression{'s' if n != 1 else ''}")
    verdict = "PASS" if report.passed else "FAIL: " + ", ".join(reasons)
    lines.append(f"harnesscheck gate: {verdict}")
    lines.append(f"  baseline {report.baseline_run}  ->  current {report.current_run}"
                 f"  (benchmark threshold +{report.threshold:.0%})")

    def section(title: str, items: list[CheckChange], mark: str) -> None:
        if not items:
            return
        lines.append("")
        lines.append(f"{title} ({len(items)}):")
        rows = []
        for c in items:
            msg = (c.message or c.title).replace("\n", " ")
            if len(msg) > 90:
                msg = msg[:87] + "..."
            rows.append([mark, c.id, f"[{c.api}]", c.level, f"{c.baseline or 'absent'} -> {c.current or 'absent'}", msg])
        lines.extend(_table(rows, set()))

    section("Newly failing MUST checks (gating)", report.newly_failing, "X")
    section("Passed in the baseline, no verdict now (gating)", report.lost_verdicts, "X")
    section("Flaky checks failing (shown, not gating)", report.flaky, "~")
    section("Flaky checks without a verdict now (shown, not gating)", report.lost_flaky, "~")
    section("Newly failing SHOULD checks (not gating)", report.should_failing, "!")
    section("Still failing (not gating)", report.still_failing, "-")
    section("Newly passing", report.newly_passing, "+")
    gating_missing = " (gating: fewer checks than the baseline)" if report.fewer_checks else ""
    section(f"Missing from the current run{gating_missing or ' (not gating)'}", report.missing, "?")

    if report.benchmarks:
        lines.append("")
        lines.append(f"Benchmarks: ratio of medians current/baseline (>1 is worse), bootstrap 95% CI; "
                     f"gates when the CI's low end > {1 + report.threshold:.2f}, "
                     f"with at least {MIN_SAMPLES} samples a side:")
        rows = [["benchmark", "arm", "baseline", "current", "ratio", "95% CI", "verdict"]]
        for b in report.benchmarks:
            unit = f" {b.unit}" if b.unit else ""
            ci = f"[{b.ci95[0]:.3f}, {b.ci95[1]:.3f}]" if b.ci95 else "-"
            rows.append([b.benchmark, b.arm, _fmt_num(b.baseline_median) + unit, _fmt_num(b.current_median) + unit,
                         f"{b.ratio:.3f}x" if b.ratio is not None else "-", ci,
                         b.verdict.upper() if b.gating else b.verdict])
        lines.extend(_table(rows, {2, 3, 4}))
    if report.missing_benchmarks:
        lines.append("")
        lines.append("Benchmarks in the baseline but not in the current run (not gating): "
                     + ", ".join(report.missing_benchmarks))
    if not (report.newly_failing or report.flaky or report.should_failing or report.still_failing
            or report.newly_passing or report.missing or report.lost_verdicts or report.lost_flaky
            or report.benchmarks):
        lines.append("")
        lines.append("No check changed state; no benchmark in common.")
    return "\n".join(lines)
