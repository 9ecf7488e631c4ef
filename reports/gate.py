"""The regression gate: compare a current results document with a baseline.

The gate fails when
- a MUST check newly fails: pass / skip / inconclusive in the baseline (or absent from it), fail or
  error now; checks marked flaky are shown but never gate;
- a benchmark arm present in both runs got worse beyond `threshold` *and* the change is
  statistically clear: the ratio current / baseline of the arms' statistic (latencies: the median;
  rates, `"better": "higher"`, one sample per equal time window: the mean, which is the run's rate)
  has a bootstrap 95% CI whose lower bound lies above `1 + threshold`. (For a benchmark with
  `"better": "higher"` the ratio is taken the other way round, so a ratio above 1 is always worse; a
  drop to 0 is the worst change, ratio `inf`.) Arms whose samples carry `sample_keys` (a replay's
  `session/turn`) are compared pair by pair when both hold at least `MIN_PAIRS` keys in common: the
  median of the per-pair ratios, its bootstrap interval (pairs resampled together), and a Wilcoxon
  signed-rank test of the log ratios against log(1 + threshold) (two-sided p < 0.05), both needed.
  Pairing takes the turn-to-turn spread out: a replay 1.5x slower on every turn is clear even when
  its turns' own times differ tenfold.
  An arm with fewer than `MIN_SAMPLES` samples on either side is never judged ("not enough
  samples"): with n = 3 per side even a complete separation has an exact one-sided rank-test
  p = 1/C(6,3) = 0.05, above the 0.025 that a 95% interval's lower bound stands for, while with
  n = 4 it is 1/C(8,4) = 1/70 = 0.014. Below that the bootstrap interval only restates the range
  (with one sample per side it is a single point).
- nothing was measured where the baseline measured something: an arm or a benchmark of the
  baseline absent now, an arm without samples now, or one holding a NaN / Infinity sample (no false
  success: a run whose every request failed has no samples, not a pass);

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

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from harnesscheck.reports.schema import ResultsError
from harnesscheck.stats.bootstrap import bootstrap_ci, ratio_ci
from harnesscheck.stats.paired import wilcoxon_test

__all__ = [
    "MIN_PAIRS",
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
#: fewest pairs for a paired verdict (arms whose samples carry `sample_keys`, e.g. a replay's turns): the
#: smallest n at which an exact two-sided signed-rank test can reach p < 0.05 (2 / 2^n = 1/32 at n = 6)
MIN_PAIRS = 6
PAIRED_ALPHA = 0.05  # two-sided level of the paired test (one-sided 0.025, as a 95% interval's low end)
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
    ratio: float | None  # > 1 means worse, whichever way "better" points; inf: dropped to zero
    ci95: tuple[float, float] | None
    verdict: str  # regression | dropped to zero | slower (not clear) | slower (within threshold) | faster
    #               | no clear change | not enough samples | no change (both 0) | no baseline samples
    #               | no samples now | no finite samples now | N non-finite samples now | missing now
    gating: bool
    # what `baseline_median` / `current_median` hold and the ratio compares: "median" (latencies), "mean"
    # (rates, one sample per time window: the run's rate), "paired" (the median of per-pair ratios; the
    # medians shown are of the paired samples)
    statistic: str = "median"
    n_pairs: int = 0  # paired: how many keys both arms hold
    p_value: float | None = None  # paired: the signed-rank test's two-sided p against 1 + threshold
    non_finite: int = 0  # current samples that were not finite numbers (NaN, Infinity, null)


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
    # benchmarks absent now whose baseline had samples: nothing measured them (gating)
    missing_benchmarks_gating: list[str] = field(default_factory=list)
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
        return not (self.newly_failing or self.regressions or self.lost_verdicts or self.fewer_checks
                    or self.missing_benchmarks_gating)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = _finite(asdict(self))
        out["passed"] = self.passed
        out["regressions"] = [_finite(asdict(b)) for b in self.regressions]
        out["newly_failing_ids"] = [c.key for c in self.newly_failing]
        out["lost_verdict_ids"] = [c.key for c in self.lost_verdicts]
        out["missing_ids"] = [c.key for c in self.missing]
        out["fewer_checks"] = self.fewer_checks
        return out


def _finite(value: Any) -> Any:
    """`value` with every infinite float as the string "inf" (a drop to zero's ratio), so that the
    verdict stays strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return "inf" if value > 0 else "-inf" if value < 0 else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


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


@dataclass(frozen=True)
class _Side:
    """One arm's samples as the gate reads them: the finite values, the pairing keys of those values
    (None when the arm carries none), and how many samples were not finite numbers."""

    values: np.ndarray
    keys: list[str] | None
    bad: int
    total: int


def _side(arm: dict[str, Any]) -> _Side:
    raw = arm.get("samples") or []
    listed = arm.get("sample_keys")
    keys_raw: list[Any] = listed if isinstance(listed, list) else []
    keyed = len(keys_raw) == len(raw) > 0 and all(isinstance(k, str) for k in keys_raw)
    values: list[float] = []
    keys: list[str] = []
    bad = 0
    for n, x in enumerate(raw):
        try:
            value = float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else math.nan
        except OverflowError:  # an integer of hundreds of digits
            value = math.inf
        if not math.isfinite(value):
            bad += 1
            continue
        values.append(value)
        if keyed:
            keys.append(keys_raw[n])
    return _Side(np.asarray(values, dtype=float), keys if keyed else None, bad, len(raw))


def _statistic(better: str) -> str:
    """What a side is summed up by: a latency by its median; a rate (higher is better: one sample per
    equal time window) by its mean, which is the rate over the whole run, not a count of one window."""
    return "mean" if better == "higher" else "median"


def _stat(xs: np.ndarray, statistic: str) -> float:
    return float(np.mean(xs) if statistic == "mean" else np.median(xs))


def _worse_ratio_ci(num: np.ndarray, den: np.ndarray, statistic: str, n_boot: int, seed: int
                    ) -> tuple[float, tuple[float, float]] | None:
    """stat(num) / stat(den) (above 1 is worse) and its bootstrap 95% interval; `inf` where `den`'s
    statistic is 0 and `num`'s is not (a throughput that dropped to 0, a latency up from 0: the worst
    change there is). None when both are 0."""
    fn = np.mean if statistic == "mean" else np.median
    s_num, s_den = _stat(num, statistic), _stat(den, statistic)
    if s_den != 0:
        ci = ratio_ci(num, den, fn, resamples=n_boot, seed=seed)
        return s_num / s_den, (float(ci.low), float(ci.high))
    if s_num == 0:
        return None
    # The ratio the other way round is finite; the percentile interval of 1/r is 1/(r's interval).
    ci = ratio_ci(den, num, fn, resamples=n_boot, seed=seed)
    return math.inf, (_inverse(float(ci.high)), _inverse(float(ci.low)))


def _inverse(x: float) -> float:
    return math.inf if x == 0 else 1.0 / x


def _paired(old: _Side, new: _Side, better: str) -> tuple[list[str], np.ndarray, np.ndarray] | None:
    """The samples both arms hold for the same key (a replay: the same session's same turn), when
    there are at least `MIN_PAIRS` of them, all positive (a per-pair ratio needs it); else None."""
    if old.keys is None or new.keys is None:
        return None
    a = dict(zip(old.keys, old.values.tolist()))
    b = dict(zip(new.keys, new.values.tolist()))
    if len(a) != len(old.keys) or len(b) != len(new.keys):
        return None  # a key given twice: no pairing
    common = sorted(set(a) & set(b))
    if len(common) < MIN_PAIRS:
        return None
    base = np.asarray([a[k] for k in common], dtype=float)
    cur = np.asarray([b[k] for k in common], dtype=float)
    if np.any(base <= 0) or np.any(cur <= 0):
        return None
    return common, base, cur


def _verdict(ratio: float, ci: tuple[float, float], limit: float) -> tuple[str, bool]:
    lo, hi = ci
    if lo > limit:
        return "regression", True
    if ratio > limit:
        return "slower (not clear)", False
    if lo > 1:
        return "slower (within threshold)", False
    if hi < 1:
        return "faster", False
    return "no clear change", False


def _paired_delta(name: str, arm: str, unit: str, better: str, pairs: tuple[list[str], np.ndarray, np.ndarray],
                  old: _Side, new: _Side, threshold: float, n_boot: int, seed: int) -> BenchmarkDelta:
    """Per pair the ratio current / baseline (baseline / current when higher is better): the median
    of those ratios, its bootstrap 95% interval (pairs resampled together) and a Wilcoxon signed-rank
    test of their logarithms against log(1 + threshold). A regression needs both: the interval's low
    end above 1 + threshold and the test's two-sided p below 0.05 in that direction."""
    keys, base, cur = pairs
    logs = np.log(cur / base) if better == "lower" else np.log(base / cur)
    limit = 1 + threshold
    ratio = float(np.exp(np.median(logs)))
    ci = bootstrap_ci(logs, np.median, resamples=n_boot, seed=seed)
    interval = (float(np.exp(ci.low)), float(np.exp(ci.high)))
    shifted = logs - math.log(limit)
    p = wilcoxon_test(shifted).p_value
    verdict, gating = _verdict(ratio, interval, limit)
    if gating and not (p < PAIRED_ALPHA and float(np.median(shifted)) > 0):
        verdict, gating = "slower (not clear)", False
    return BenchmarkDelta(name, arm, unit, better, float(np.median(base)), float(np.median(cur)),
                          int(old.values.size), int(new.values.size), ratio, interval, verdict, gating,
                          statistic="paired", n_pairs=len(keys), p_value=p)


def _arm_delta(name: str, arm: str, unit: str, better: str, old: _Side, new: _Side, threshold: float,
               n_boot: int, seed: int) -> BenchmarkDelta:
    statistic = _statistic(better)
    base_stat = _stat(old.values, statistic) if old.values.size else None
    cur_stat = _stat(new.values, statistic) if new.values.size else None

    def delta(verdict: str, gating: bool, ratio: float | None = None, ci: tuple[float, float] | None = None,
              how: str = statistic) -> BenchmarkDelta:
        return BenchmarkDelta(name, arm, unit, better, base_stat, cur_stat, int(old.values.size),
                              int(new.values.size), ratio, ci, verdict, gating, statistic=how,
                              non_finite=new.bad)

    if old.values.size == 0:
        return delta("no baseline samples", False)
    if new.values.size == 0:  # empty, or every sample NaN / Infinity: nothing was measured
        return delta("no samples now" if new.bad == 0 else "no finite samples now", True)
    if new.bad:
        return delta(f"{new.bad} non-finite sample{'s' if new.bad != 1 else ''} now", True)
    pairs = _paired(old, new, better)
    if pairs is not None:
        return _paired_delta(name, arm, unit, better, pairs, old, new, threshold, n_boot, seed)
    num, den = (new.values, old.values) if better == "lower" else (old.values, new.values)
    if min(old.values.size, new.values.size) < MIN_SAMPLES:
        s_num, s_den = _stat(num, statistic), _stat(den, statistic)
        shown = s_num / s_den if s_den != 0 else (math.inf if s_num != 0 else None)
        return delta("not enough samples", False, shown)
    found = _worse_ratio_ci(num, den, statistic, n_boot, seed)
    if found is None:
        return delta("no change (both 0)", False)
    ratio, ci = found
    verdict, gating = _verdict(ratio, ci, 1 + threshold)
    if math.isinf(ratio):
        verdict = "dropped to zero" if better == "higher" else verdict
    return delta(verdict, gating, ratio, ci)


def _compare_benchmarks(
    baseline: dict[str, Any], current: dict[str, Any], threshold: float, n_boot: int, seed: int, report: GateReport
) -> None:
    base = {b["name"]: b for b in baseline.get("benchmarks") or []}
    for bench in current.get("benchmarks") or []:
        old = base.get(bench["name"])
        if old is None:
            continue
        better = bench.get("better", old.get("better", "lower"))
        unit = bench.get("unit", "")
        cur_arms = {a["name"]: a for a in bench.get("arms", [])}
        for arm in bench.get("arms", []):
            old_arm = next((a for a in old.get("arms", []) if a["name"] == arm["name"]), None)
            if old_arm is None:
                continue
            report.benchmarks.append(_arm_delta(bench["name"], arm["name"], unit, better, _side(old_arm),
                                                _side(arm), threshold, n_boot, seed))
        for old_arm in old.get("arms", []):
            if old_arm["name"] in cur_arms:
                continue
            side = _side(old_arm)
            # an arm that the baseline measured and the current run does not hold: nothing was measured
            report.benchmarks.append(BenchmarkDelta(
                bench["name"], old_arm["name"], unit, better,
                _stat(side.values, _statistic(better)) if side.values.size else None, None,
                int(side.values.size), 0, None, None, "missing now", bool(side.values.size),
                statistic=_statistic(better)))
    cur_names = {b["name"] for b in current.get("benchmarks") or []}
    report.missing_benchmarks = [n for n in base if n not in cur_names]
    report.missing_benchmarks_gating = [n for n in report.missing_benchmarks
                                        if any(_side(a).values.size for a in base[n].get("arms", []))]


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
    """A figure as a person reads it: 1,234 · 12.3 · 3.05 · 0.0123 (two decimals from 1 to 10, so a
    rate of 3.05 req/s is not shown as 3 and 2.20 not as 2.2)."""
    if x is None:
        return "-"
    if math.isinf(x):
        return "inf"
    a = abs(x)
    return f"{x:,.0f}" if a >= 1000 else f"{x:.1f}" if a >= 10 else f"{x:.2f}" if a >= 1 else f"{x:.3g}"


def _fmt_ratio(x: float | None) -> str:
    if x is None:
        return "-"
    return "inf" if math.isinf(x) else f"{x:.3f}x"


def _fmt_ci(ci: tuple[float, float] | None) -> str:
    if ci is None:
        return "-"
    return "[" + ", ".join("inf" if math.isinf(v) else f"{v:.3f}" for v in ci) + "]"


def _how(b: BenchmarkDelta) -> str:
    if b.statistic == "paired":
        p = "-" if b.p_value is None else f"{b.p_value:.2g}"
        return f"paired, {b.n_pairs} pairs, p {p}"
    return f"{b.statistic}, {b.n_baseline}/{b.n_current}"


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
    worse = [b for b in report.regressions if b.ratio is not None]
    if worse:
        n = len(worse)
        reasons.append(f"{n} benchmark regression{'s' if n != 1 else ''}")
    if len(worse) < len(report.regressions):
        n = len(report.regressions) - len(worse)
        reasons.append(f"{n} benchmark arm{'s' if n != 1 else ''} that measured nothing now")
    if report.missing_benchmarks_gating:
        n = len(report.missing_benchmarks_gating)
        reasons.append(f"{n} benchmark{'s' if n != 1 else ''} of the baseline missing now")
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
        lines.append("Benchmarks, current vs baseline (ratio > 1 is worse): latencies compare medians, rates the "
                     "means of their time")
        lines.append("windows, paired arms (a replay's turns) the median per-pair ratio; bootstrap 95% CI. An arm gates "
                     "when the CI's low end")
        lines.append(f"is above {1 + report.threshold:.2f} (paired: and the signed-rank test agrees; unpaired: at least "
                     f"{MIN_SAMPLES} samples a side), or when it measured nothing now:")
        rows = [["benchmark", "arm", "baseline", "current", "ratio", "95% CI", "how (n base/current)", "verdict"]]
        for b in report.benchmarks:
            unit = f" {b.unit}" if b.unit else ""
            rows.append([b.benchmark, b.arm, _fmt_num(b.baseline_median) + unit, _fmt_num(b.current_median) + unit,
                         _fmt_ratio(b.ratio), _fmt_ci(b.ci95), _how(b),
                         b.verdict.upper() if b.gating else b.verdict])
        lines.extend(_table(rows, {2, 3, 4}))
    if report.missing_benchmarks:
        lines.append("")
        gating = set(report.missing_benchmarks_gating)
        lines.append("Benchmarks in the baseline but not in the current run: "
                     + ", ".join(f"{n} (gating)" if n in gating else f"{n} (no samples in the baseline)"
                                 for n in report.missing_benchmarks))
    if not (report.newly_failing or report.flaky or report.should_failing or report.still_failing
            or report.newly_passing or report.missing or report.lost_verdicts or report.lost_flaky
            or report.benchmarks):
        lines.append("")
        lines.append("No check changed state; no benchmark in common.")
    return "\n".join(lines)
