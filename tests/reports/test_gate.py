import copy
import json
import math

import numpy as np
import pytest

from harnesscheck.reports.gate import MIN_SAMPLES, bootstrap_ratio_ci, format_gate, gate, read_flaky_file

from harnesscheck.cli.main import main
from tests.reports import factory


@pytest.fixture
def baseline():
    return factory.clean(factory.results())


def _set(doc, cid, api, outcome):
    for c in doc["checks"]:
        if (c["id"], c["api"]) == (cid, api):
            c["outcome"] = outcome
            return doc
    raise KeyError(cid)


def test_clean_against_clean_passes(baseline):
    report = gate(baseline, copy.deepcopy(baseline))
    assert report.passed and not report.newly_failing and not report.regressions
    assert format_gate(report).startswith("harnesscheck gate: PASS")


def test_newly_failing_must_check_trips_and_is_named_exactly(baseline):
    current = _set(copy.deepcopy(baseline), "AN-STREAM-001", "anthropic", "fail")
    _set(current, "MD-ROUTE-001", "any", "error")
    report = gate(baseline, current)
    assert not report.passed
    assert [c.key for c in report.newly_failing] == ["AN-STREAM-001 [anthropic]", "MD-ROUTE-001 [any]"]
    text = format_gate(report)
    assert "FAIL: 2 MUST checks newly failing" in text
    assert "AN-STREAM-001  [anthropic]  MUST  pass -> fail" in text
    assert "MD-ROUTE-001   [any]        MUST  pass -> error" in text


def test_skip_or_inconclusive_to_fail_is_newly_failing(baseline):
    base = _set(copy.deepcopy(baseline), "RS-SEQ-001", "responses", "skip")
    current = _set(copy.deepcopy(baseline), "RS-SEQ-001", "responses", "fail")
    assert [c.key for c in gate(base, current).newly_failing] == ["RS-SEQ-001 [responses]"]


def test_should_failure_does_not_gate(baseline):
    current = _set(copy.deepcopy(baseline), "CH-TOOL-002", "chat", "fail")
    report = gate(baseline, current)
    assert report.passed
    assert [c.key for c in report.should_failing] == ["CH-TOOL-002 [chat]"]
    assert "Newly failing SHOULD checks (not gating)" in format_gate(report)


@pytest.mark.parametrize("how", ["arg", "arg-with-api", "in-results"])
def test_flaky_check_is_shown_but_does_not_gate(baseline, how):
    current = _set(copy.deepcopy(baseline), "AN-STREAM-001", "anthropic", "fail")
    flaky = []
    if how == "arg":
        flaky = ["AN-STREAM-001"]
    elif how == "arg-with-api":
        flaky = ["AN-STREAM-001:anthropic"]
    else:
        current["checks"][0]["flaky"] = True
    report = gate(baseline, current, flaky=flaky)
    assert report.passed and not report.newly_failing
    assert [c.key for c in report.flaky] == ["AN-STREAM-001 [anthropic]"]
    text = format_gate(report)
    assert "Flaky checks failing (shown, not gating) (1):" in text and "AN-STREAM-001" in text


def test_still_failing_newly_passing_missing_and_new(baseline):
    base = _set(copy.deepcopy(baseline), "AN-STREAM-002", "anthropic", "fail")
    _set(base, "AN-USAGE-001", "anthropic", "fail")
    current = _set(copy.deepcopy(baseline), "AN-STREAM-002", "anthropic", "fail")
    current["checks"] = [c for c in current["checks"] if c["id"] != "CH-TOOL-001"]
    current["checks"].append(factory.check("AN-NEW-001", "anthropic", "fail"))
    report = gate(base, current)
    assert [c.key for c in report.still_failing] == ["AN-STREAM-002 [anthropic]"]
    assert [c.key for c in report.newly_passing] == ["AN-USAGE-001 [anthropic]"]
    assert [c.key for c in report.missing] == ["CH-TOOL-001 [chat]"]
    assert [c.key for c in report.newly_failing] == ["AN-NEW-001 [anthropic]"]  # not in baseline: gates
    assert "absent -> fail" in format_gate(report)


def test_benchmark_slowed_by_half_trips(baseline):
    current = copy.deepcopy(baseline)
    current["benchmarks"] = [factory.benchmark(scale=1.5, seed=7)]
    report = gate(baseline, current)
    assert not report.passed
    assert {(b.benchmark, b.arm) for b in report.regressions} == {
        ("preamble", "stable"), ("preamble", "header"), ("preamble", "stripped")}
    for b in report.regressions:
        assert 1.4 < b.ratio < 1.6 and b.ci95[0] > 1.1
    assert "REGRESSION" in format_gate(report)


def test_benchmark_noise_does_not_trip(baseline):
    for seed in (3, 11, 29):
        current = copy.deepcopy(baseline)
        current["benchmarks"] = [factory.benchmark(seed=seed)]
        report = gate(baseline, current)
        assert report.passed, format_gate(report)
        assert all(b.verdict in ("no clear change", "slower (within threshold)", "faster") for b in report.benchmarks)


def test_slower_within_threshold_or_unclear_does_not_trip(baseline):
    current = copy.deepcopy(baseline)
    current["benchmarks"] = [factory.benchmark(scale=1.05, seed=5)]
    report = gate(baseline, current)
    assert report.passed
    # a big but noisy slowdown: the ratio is past the threshold, the CI is not
    noisy_base, noisy_cur = copy.deepcopy(baseline), copy.deepcopy(baseline)
    noisy_base["benchmarks"] = [{"name": "n", "unit": "ms", "arms": [factory.bench_arm("a", factory.samples(100, n=6, spread=0.6, seed=1))]}]
    noisy_cur["benchmarks"] = [{"name": "n", "unit": "ms", "arms": [factory.bench_arm("a", factory.samples(125, n=6, spread=0.6, seed=2))]}]
    report = gate(noisy_base, noisy_cur)
    assert report.passed and report.benchmarks[0].verdict in ("slower (not clear)", "no clear change")


def test_higher_is_better_benchmarks_invert_the_ratio(baseline):
    base, cur = copy.deepcopy(baseline), copy.deepcopy(baseline)
    base["benchmarks"] = [{"name": "tps", "unit": "tok/s", "better": "higher",
                           "arms": [factory.bench_arm("a", factory.samples(100, seed=1))]}]
    cur["benchmarks"] = [{"name": "tps", "unit": "tok/s", "better": "higher",
                          "arms": [factory.bench_arm("a", factory.samples(60, seed=2))]}]
    assert not gate(base, cur).passed
    assert gate(cur, base).passed


def test_bootstrap_ratio_ci_is_seeded_and_covers_the_ratio():
    rng = np.random.default_rng(0)
    a, b = 200 + rng.normal(0, 5, 40), 100 + rng.normal(0, 3, 40)
    lo, hi = bootstrap_ratio_ci(a, b, seed=1)
    assert (lo, hi) == bootstrap_ratio_ci(a, b, seed=1)
    assert lo < np.median(a) / np.median(b) < hi and 1.9 < lo and hi < 2.1


def test_flaky_file(tmp_path):
    f = tmp_path / "flaky.txt"
    f.write_text("# known flaky\nAN-STREAM-001\n\nCH-TOOL-001:chat  # timing\n")
    assert read_flaky_file(f) == {"AN-STREAM-001", "CH-TOOL-001:chat"}


# ---- the command ---------------------------------------------------------------------------

def _write(path, doc):
    path.write_text(json.dumps(doc))
    return str(path)


def test_gate_json_prints_the_verdict_to_stdout(tmp_path, baseline, capsys):
    """--json prints the verdict as JSON (as every command's --json does), not the table."""
    b = _write(tmp_path / "baseline.json", baseline)
    bad = _set(copy.deepcopy(baseline), "AN-STREAM-001", "anthropic", "fail")
    assert main(["gate", "--baseline", b, "--current", _write(tmp_path / "bad.json", bad), "--json"]) == 1
    verdict = json.loads(capsys.readouterr().out)
    assert verdict["passed"] is False and verdict["newly_failing_ids"] == ["AN-STREAM-001 [anthropic]"]


def test_gate_command_exit_codes_json_and_update_baseline(tmp_path, baseline, capsys):
    b = _write(tmp_path / "baseline.json", baseline)
    bad = _set(copy.deepcopy(baseline), "AN-STREAM-001", "anthropic", "fail")
    bad["run"]["id"] = "bad-run"
    c_bad = _write(tmp_path / "bad.json", bad)
    out_json = tmp_path / "gate.json"

    assert main(["gate", "--baseline", b, "--current", c_bad, "--out", str(tmp_path), "--update-baseline"]) == 1
    verdict = json.loads(out_json.read_text())
    assert verdict["passed"] is False and verdict["newly_failing_ids"] == ["AN-STREAM-001 [anthropic]"]
    assert json.loads((tmp_path / "baseline.json").read_text())["run"]["id"] != "bad-run"  # not updated
    assert "baseline NOT updated" in capsys.readouterr().out

    flaky = tmp_path / "flaky.txt"
    flaky.write_text("AN-STREAM-001\n")
    assert main(["gate", "--baseline", b, "--current", c_bad, "--flaky-file", str(flaky)]) == 0

    good = copy.deepcopy(baseline)
    good["run"]["id"] = "good-run"
    c_good = _write(tmp_path / "good.json", good)
    assert main(["gate", "--baseline", b, "--current", c_good, "--update-baseline"]) == 0
    assert json.loads((tmp_path / "baseline.json").read_text())["run"]["id"] == "good-run"

    assert main(["gate", "--baseline", b, "--current", c_bad, "--update-baseline", "--force"]) == 1
    assert json.loads((tmp_path / "baseline.json").read_text())["run"]["id"] == "bad-run"


def test_gate_command_input_errors(tmp_path, baseline, capsys):
    c = _write(tmp_path / "c.json", baseline)
    missing = tmp_path / "nope" / "baseline.json"
    assert main(["gate", "--baseline", str(missing), "--current", c]) == 2
    assert "baseline not found" in capsys.readouterr().err
    assert main(["gate", "--baseline", str(missing), "--current", c, "--update-baseline"]) == 0
    assert missing.exists()
    broken = tmp_path / "broken.json"
    broken.write_text("[]")
    assert main(["gate", "--baseline", str(missing), "--current", str(broken)]) == 2
    assert main(["gate", "--baseline", c, "--current", c, "--threshold", "-1"]) == 2
    assert main(["gate", "--baseline", c, "--current", c, "--force"]) == 2
    with pytest.raises(SystemExit) as info:
        main(["gate", "--current", c])
    assert info.value.code == 2


def _bench(name, arms, better="lower", unit="ms"):
    return {"name": name, "unit": unit, "better": better,
            "arms": [factory.bench_arm(n, xs) if xs and all(map(math.isfinite, xs)) else {"name": n, "samples": xs}
                     for n, xs in arms.items()]}


def _pair(baseline, base_bench, cur_bench):
    base, cur = copy.deepcopy(baseline), copy.deepcopy(baseline)
    base["benchmarks"], cur["benchmarks"] = [base_bench], [cur_bench]
    return gate(base, cur)


def test_a_latency_up_from_zero_is_the_worst_regression_and_both_zero_no_change(baseline):
    # issue 43 item 2: a median of 0 used to read "undefined (median 0)" and never gate
    report = _pair(baseline, _bench("z", {"a": [0.0] * 4}), _bench("z", {"a": [5.0, 6.0, 7.0, 8.0]}))
    (delta,) = report.benchmarks
    assert not report.passed and delta.gating and delta.verdict == "regression"
    assert math.isinf(delta.ratio) and math.isinf(delta.ci95[0])
    report = _pair(baseline, _bench("z", {"a": [0.0] * 4}), _bench("z", {"a": [0.0] * 4}))
    assert report.passed and report.benchmarks[0].verdict == "no change (both 0)"


def test_a_throughput_that_drops_to_zero_fails_the_gate(baseline):
    # issue 43 item 2: for higher-is-better the worst drop, to 0, could never gate (0 in the denominator)
    report = _pair(baseline, _bench("load-rate-throughput", {"r=2": [3.0, 3.0, 4.0, 2.0, 3.0]}, better="higher",
                                    unit="req/s"),
                   _bench("load-rate-throughput", {"r=2": [0.0] * 5}, better="higher", unit="req/s"))
    (delta,) = report.benchmarks
    assert not report.passed and delta.gating and delta.verdict == "dropped to zero"
    text = format_gate(report)
    assert "DROPPED TO ZERO" in text and "inf" in text
    out = report.to_dict()
    json.dumps(out, allow_nan=False)  # the verdict stays strict JSON
    assert out["benchmarks"][0]["ratio"] == "inf"


@pytest.mark.parametrize("current, verdict", [
    ([], "no samples now"),
    ([float("nan")] * 5, "no finite samples now"),
    ([float("inf"), float("nan"), float("-inf"), float("inf")], "no finite samples now"),
    ([10.0, 11.0, 10.5, float("nan"), 10.2], "1 non-finite sample now"),
])
def test_an_empty_or_non_finite_current_arm_fails_the_gate(baseline, current, verdict):
    report = _pair(baseline, _bench("b", {"a": [10.0, 11.0, 10.5, 10.2]}), _bench("b", {"a": current}))
    (delta,) = report.benchmarks
    assert not report.passed and delta.gating and delta.verdict == verdict
    assert verdict.upper() in format_gate(report)
    json.dumps(report.to_dict(), allow_nan=False)


def test_an_empty_baseline_arm_is_shown_and_does_not_gate(baseline):
    report = _pair(baseline, _bench("b", {"a": []}), _bench("b", {"a": [10.0, 11.0, 10.5, 10.2]}))
    assert report.passed and report.benchmarks[0].verdict == "no baseline samples"


def test_a_missing_arm_or_benchmark_fails_the_gate(baseline):
    report = _pair(baseline, _bench("b", {"a": [10.0, 11.0, 10.5, 10.2], "gone": [5.0, 5.1, 5.2, 5.3]}),
                   _bench("b", {"a": [10.0, 11.0, 10.5, 10.2]}))
    assert not report.passed
    assert [(d.arm, d.verdict, d.gating) for d in report.benchmarks] == [
        ("a", "no clear change", False), ("gone", "missing now", True)]
    base, cur = copy.deepcopy(baseline), copy.deepcopy(baseline)
    base["benchmarks"] = [_bench("b", {"a": [10.0, 11.0, 10.5, 10.2]})]
    report = gate(base, cur)
    assert not report.passed and report.missing_benchmarks_gating == ["b"]
    assert "1 benchmark of the baseline missing now" in format_gate(report)


def test_rates_compare_the_means_of_their_windows_with_a_real_interval(baseline):
    # issue 45: 3.05 -> 2.20 req/s printed as "3 -> 2 req/s 1.500x [1.5, 1.5]" (medians of per-window counts)
    rng = np.random.default_rng(4)
    base_w = list(rng.permutation([3.0] * 17 + [4.0] * 2 + [2.0]))  # one sample per 1 s window
    cur_w = list(rng.permutation([2.0] * 16 + [3.0] * 4))
    assert np.mean(base_w) == pytest.approx(3.05) and np.mean(cur_w) == pytest.approx(2.20)
    report = _pair(baseline, _bench("load-rate-throughput", {"r=4": base_w}, better="higher", unit="req/s"),
                   _bench("load-rate-throughput", {"r=4": cur_w}, better="higher", unit="req/s"))
    (delta,) = report.benchmarks
    assert delta.statistic == "mean"
    assert delta.baseline_median == pytest.approx(3.05) and delta.current_median == pytest.approx(2.20)
    assert delta.ratio == pytest.approx(3.05 / 2.20)
    lo, hi = delta.ci95
    assert lo < delta.ratio < hi and hi - lo > 0.05  # an interval, not a point
    text = format_gate(report)
    assert "3.05 req/s" in text and "2.20 req/s" in text and "1.386x" in text


def _one_arm(baseline, base_samples, cur_samples):
    base, cur = copy.deepcopy(baseline), copy.deepcopy(baseline)
    base["benchmarks"] = [{"name": "few", "unit": "ms", "arms": [factory.bench_arm("a", base_samples)]}]
    cur["benchmarks"] = [{"name": "few", "unit": "ms", "arms": [factory.bench_arm("a", cur_samples)]}]
    return gate(base, cur)


@pytest.mark.parametrize("base_samples, cur_samples", [
    ([100], [120]),
    ([100, 101], [120, 121]),
    ([100, 101, 102], [120, 121, 122]),
    ([100, 101, 102, 103, 104], [150, 151, 152]),  # one side short is enough to refuse
])
def test_too_few_samples_are_not_judged(baseline, base_samples, cur_samples):
    report = _one_arm(baseline, base_samples, cur_samples)
    (delta,) = report.benchmarks
    assert report.passed and not report.regressions
    assert delta.verdict == "not enough samples" and not delta.gating
    assert delta.ci95 is None  # no interval is claimed
    assert delta.ratio == pytest.approx(np.median(cur_samples) / np.median(base_samples))
    assert "not enough samples" in format_gate(report)


def test_minimum_samples_is_where_a_rank_test_can_first_reach_the_level():
    # Two samples of n, completely separated: the exact one-sided rank-test p is 1 / C(2n, n) (one of
    # the C(2n, n) equally likely splits). A 95% interval's lower bound stands for one-sided 0.025.
    # n = 3: 1/20 = 0.05 (cannot reach it); n = 4: 1/70 ~ 0.014 (can).
    assert MIN_SAMPLES == 4
    assert 1 / math.comb(2 * (MIN_SAMPLES - 1), MIN_SAMPLES - 1) > 0.025 > 1 / math.comb(2 * MIN_SAMPLES, MIN_SAMPLES)


def test_four_clearly_separated_samples_a_side_can_gate(baseline):
    report = _one_arm(baseline, [100, 101, 102, 103], [150, 151, 152, 153])
    (delta,) = report.benchmarks
    assert delta.verdict == "regression" and delta.gating and not report.passed


@pytest.mark.parametrize("bench", ["preamble", "dispatch", "history", "overlap"])
def test_bench_warns_when_sessions_is_below_the_minimum(bench, capsys):
    import argparse

    from harnesscheck.cli.commands import bench as bench_cmd

    parser = argparse.ArgumentParser()
    bench_cmd.add_arguments(parser)
    assert parser.parse_args([bench, "--sessions", str(MIN_SAMPLES - 1)]).sessions == MIN_SAMPLES - 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"warning: --sessions {MIN_SAMPLES - 1} is below {MIN_SAMPLES}")
    assert parser.parse_args([bench, "--sessions", str(MIN_SAMPLES)]).sessions == MIN_SAMPLES
    assert parser.parse_args([bench]).sessions >= MIN_SAMPLES  # the defaults need no warning
    assert capsys.readouterr().err == ""


# ---- issue 35: no verdict is not a pass --------------------------------------------------------

def test_checks_that_passed_and_have_no_verdict_now_gate_and_are_named(baseline):
    """A stalled endpoint: every check inconclusive ("stalled"). The gate fails and names each one."""
    current = copy.deepcopy(baseline)
    for c in current["checks"]:
        c |= {"outcome": "inconclusive", "cause": "stalled", "message": "no frame for 30 s after frame 2"}
    report = gate(baseline, current)
    assert not report.passed and not report.newly_failing and not report.fewer_checks
    assert [c.key for c in report.lost_verdicts] == [
        f"{c['id']} [{c['api']}]" for c in baseline["checks"] if c["outcome"] == "pass"]
    text = format_gate(report)
    assert text.startswith(f"harnesscheck gate: FAIL: {len(baseline['checks'])} checks that passed in the baseline "
                           "without a verdict now")
    assert "Passed in the baseline, no verdict now (gating)" in text
    assert "AN-STREAM-001  [anthropic]  MUST    pass -> inconclusive  stalled: no frame for 30 s" in text
    assert report.to_dict()["lost_verdict_ids"][0] == "AN-STREAM-001 [anthropic]"


@pytest.mark.parametrize("now", ["skip", "inconclusive"])
def test_a_should_check_losing_its_verdict_gates_too_unless_flaky(baseline, now):
    current = _set(copy.deepcopy(baseline), "CH-TOOL-002", "chat", now)
    assert [c.key for c in gate(baseline, current).lost_verdicts] == ["CH-TOOL-002 [chat]"]
    report = gate(baseline, current, flaky=["CH-TOOL-002"])
    assert report.passed and [c.key for c in report.lost_flaky] == ["CH-TOOL-002 [chat]"]
    assert "Flaky checks without a verdict now (shown, not gating) (1):" in format_gate(report)


def test_no_verdict_before_and_after_is_no_change(baseline):
    base = _set(copy.deepcopy(baseline), "RS-SEQ-001", "responses", "skip")
    current = _set(copy.deepcopy(base), "RS-SEQ-001", "responses", "inconclusive")
    assert gate(base, current).passed


def test_a_run_with_fewer_checks_fails_and_names_the_missing(baseline):
    """71 of 75 checks missing in the issue; here all but the first."""
    current = copy.deepcopy(baseline)
    current["checks"] = current["checks"][:1]
    report = gate(baseline, current)
    assert not report.passed and report.fewer_checks
    assert (report.baseline_checks, report.current_checks) == (len(baseline["checks"]), 1)
    missing = [f"{c['id']} [{c['api']}]" for c in baseline["checks"][1:]]
    assert [c.key for c in report.missing] == missing
    text = format_gate(report)
    assert f"1 checks in the current run, {len(baseline['checks'])} in the baseline" in text
    assert "Missing from the current run (gating: fewer checks than the baseline)" in text
    assert all(key.split(" ")[0] in text for key in missing)


def test_a_failing_baseline_check_missing_now_still_gates_on_the_count(baseline):
    base = _set(copy.deepcopy(baseline), "CH-TOOL-001", "chat", "fail")
    current = copy.deepcopy(base)
    current["checks"] = [c for c in current["checks"] if c["id"] != "CH-TOOL-001"]
    report = gate(base, current)
    assert report.lost_verdicts == [] and report.fewer_checks and not report.passed


def test_gate_command_fails_a_stalled_run_against_a_clean_baseline(tmp_path, baseline, capsys):
    current = copy.deepcopy(baseline)
    for c in current["checks"]:
        c |= {"outcome": "inconclusive", "cause": "stalled"}
    b, c = _write(tmp_path / "b.json", baseline), _write(tmp_path / "c.json", current)
    assert main(["gate", "--baseline", b, "--current", c]) == 1
    out = capsys.readouterr().out
    assert "without a verdict now" in out and "No check changed state" not in out


def test_a_bench_load_whose_every_request_failed_fails_the_gate(baseline, tmp_path, capsys):
    # issue 43 item 2: "Successful requests: 0 / Failed requests: 27367" against a healthy baseline said PASS
    from harnesscheck.replay.benchmarks.load import Sample, sweep_benchmarks

    def doc(ok: bool) -> dict:
        samples = [Sample(start_s=i * 0.1, ok=ok, error=None if ok else "HTTP 500",
                          ttft_ms=40.0 + i % 7 if ok else None, e2el_ms=200.0 + i % 11,
                          itl_ms=[5.0] * 9 if ok else [], output_tokens=10 if ok else 0)
                   for i in range(60)]
        out = copy.deepcopy(baseline)
        out["benchmarks"] = sweep_benchmarks({"concurrency": [(4, samples, 6.0)]}, {}, timing="unknown", slo_ms={},
                                             duration_s=6.0)
        return out

    healthy, failed = doc(True), doc(False)
    report = gate(healthy, failed)
    verdicts = {(b.benchmark, b.verdict) for b in report.benchmarks}
    assert not report.passed and all(b.gating for b in report.benchmarks), verdicts
    assert ("load-concurrency-ttft", "no samples now") in verdicts
    assert ("load-concurrency-throughput", "dropped to zero") in verdicts
    (tmp_path / "healthy.json").write_text(json.dumps(healthy))
    (tmp_path / "failed.json").write_text(json.dumps(failed))
    assert main(["gate", "--baseline", str(tmp_path / "healthy.json"), "--current", str(tmp_path / "failed.json")]) == 1
    out = capsys.readouterr().out
    assert "harnesscheck gate: FAIL:" in out and "that measured nothing now" in out and "DROPPED TO ZERO" in out


def test_a_sample_too_large_for_a_float_counts_as_non_finite(baseline):
    report = _pair(baseline, _bench("b", {"a": [10.0, 11.0, 10.5, 10.2]}),
                   {"name": "b", "unit": "ms", "arms": [{"name": "a", "samples": [10.0, 11.0, 10**400, 10.2]}]})
    assert not report.passed and report.benchmarks[0].verdict == "1 non-finite sample now"
