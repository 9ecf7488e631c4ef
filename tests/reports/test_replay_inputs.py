"""A replay's folder (`harnesscheck replay --out DIR`: results.json of schema harnesscheck.replay and
turns.csv) is read by `report` and `gate` as the other results documents are: its per-turn TTFT,
inter-token, end and tool-ready times as benchmarks, an arm per API (issue 33: the gate said the
folder had no results.json). A replay against a slower server fails the gate."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest

from harnesscheck.cli.main import main
from harnesscheck.replay.trace import save
from harnesscheck.replay.workloads import build
from harnesscheck.reports.merge import load_merged, replay_results
from harnesscheck.reports.schema import ResultsError


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("trace") / "agent.jsonl"
    # 12 turns: a slowdown on every turn stays clear when one baseline turn is slow on a loaded machine (with 6,
    # one such turn left p 0.062 for a 5.65x slower TTFT, and the gate said "not clear")
    save(build("agent-coding", sessions=4, turns=3, prompt_tokens=400, api="chat", think_ms=0, tool_ms=0,
               max_tokens=64), path)
    return path


def _replay(trace: Path, url: str, out: Path) -> Path:
    assert main(["replay", str(trace), "--endpoint", url, "--time-scale", "0", "--no-progress", "--out",
                 str(out)]) == 0
    return out


def test_report_and_gate_read_replay_folders(trace, server_factory, tmp_path, capsys) -> None:
    usual = server_factory("--decode-ms", "1", "--ttft-base-ms", "40", "--prefill-us-per-token", "0", fast=False)
    slowed = server_factory("--decode-ms", "1", "--ttft-base-ms", "400", "--prefill-us-per-token", "0", fast=False)
    base = _replay(trace, usual, tmp_path / "base")
    doc = load_merged([base])
    names = [b["name"] for b in doc["benchmarks"]]
    assert names == ["replay-ttft", "replay-itl", "replay-end", "replay-tool-ready"]
    ttft = doc["benchmarks"][0]
    assert [a["name"] for a in ttft["arms"]] == ["chat"] and len(ttft["arms"][0]["samples"]) == 12
    assert all(40 <= x for x in ttft["arms"][0]["samples"]) and doc["run"]["apis"] == ["chat"]
    capsys.readouterr()

    assert main(["report", str(base), "--out", str(tmp_path / "report.html"), "--quiet"]) == 0
    html = (tmp_path / "report.html").read_text()
    assert 'id="b-replay-ttft"' in html and "time to first token per turn" in html

    assert main(["gate", "--baseline", str(base), "--current", str(base)]) == 0
    slow = _replay(trace, slowed, tmp_path / "slow")
    capsys.readouterr()
    assert main(["gate", "--baseline", str(base), "--current", str(slow), "--threshold", "0.25"]) == 1
    out = capsys.readouterr().out
    assert "replay-ttft" in out and "REGRESSION" in out


def _doc() -> dict:
    return {"schema": "harnesscheck.replay", "version": 1,
            "summary": {"endpoint": "http://x", "model": "m", "mode": "fixed", "started_at": 1.7e9},
            "turns": [{"api": "anthropic", "ok": True, "ttft_ms": 10.0 + n, "end_ms": 50.0} for n in range(5)]}


@pytest.mark.parametrize(("change", "why"), [
    (lambda d: d.update(version=7), "unsupported replay results version 7"),
    (lambda d: d.update(turns={}), '"turns" list'),
    (lambda d: d["turns"].append("turn"), "$.turns[5]: a turn record is an object"),
    (lambda d: d["turns"][1].update(ttft_ms="fast"), "$.turns[1].ttft_ms: a number of ms"),
])
def test_a_broken_replay_document_is_refused_in_one_line(change, why, tmp_path, capsys) -> None:
    doc = _doc()
    assert [b["name"] for b in replay_results(doc, run_id="r", started_at="2026-01-01T00:00:00Z")[
        "benchmarks"]] == ["replay-ttft", "replay-end"]
    change(doc)
    with pytest.raises(ResultsError, match=__import__("re").escape(why)):
        replay_results(copy.deepcopy(doc), run_id="r", started_at="2026-01-01T00:00:00Z")
    (tmp_path / "results.json").write_text(json.dumps(doc))
    assert main(["gate", "--baseline", str(tmp_path), "--current", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and why in err and "results.json" in err


def _turns(ttfts: dict[tuple[str, int], float]) -> dict:
    return {"schema": "harnesscheck.replay", "version": 1,
            "summary": {"endpoint": "http://x", "model": "m", "mode": "fixed", "started_at": 1.7e9},
            "turns": [{"session": s, "turn": t, "api": "chat", "ok": True, "ttft_ms": x}
                      for (s, t), x in ttfts.items()]}


# Two sessions of six turns whose prompts grow: the TTFT of a turn depends on the turn far more than on
# the run, as in an agent's replay.
_BASE = {("s1", t): x for t, x in enumerate([40.0, 90.0, 180.0, 350.0, 700.0, 1400.0])} | \
        {("s2", t): x for t, x in enumerate([55.0, 120.0, 240.0, 480.0, 950.0, 1900.0])}
# issue 45's measurement: 12 of 12 turns 1.09x to 2.13x slower
_SLOWER = [2.13, 1.95, 1.8, 1.7, 1.6, 1.5, 1.45, 1.35, 1.25, 1.2, 1.15, 1.09]


def _gate_replays(base: dict, cur: dict, **kw):
    from harnesscheck.reports.gate import gate

    return gate(replay_results(base, run_id="b", started_at="2026-01-01T00:00:00Z"),
                replay_results(cur, run_id="c", started_at="2026-01-02T00:00:00Z"), **kw)


def test_a_replay_slower_on_every_turn_fails_the_gate_paired_by_session_and_turn() -> None:
    ordered = sorted(_BASE, key=_BASE.get)
    slower = {k: _BASE[k] * r for k, r in zip(ordered, _SLOWER)}  # the smallest turns slowed the most
    report = _gate_replays(_turns(_BASE), _turns(dict(reversed(list(slower.items())))))  # another order
    (delta,) = report.benchmarks
    assert delta.verdict == "regression" and not report.passed, delta  # was "slower (not clear)"
    assert delta.statistic == "paired" and delta.n_pairs == 12
    assert 1.3 < delta.ratio < 1.6 and delta.ci95[0] > 1.1 and delta.p_value < 0.01
    # every turn 1.5x slower
    report = _gate_replays(_turns(_BASE), _turns({k: x * 1.5 for k, x in _BASE.items()}))
    assert report.benchmarks[0].verdict == "regression" and not report.passed


def test_a_replay_within_noise_passes_and_unmatched_turns_are_not_paired() -> None:
    rng = np.random.default_rng(1)
    noisy = {k: x * float(rng.uniform(0.95, 1.05)) for k, x in _BASE.items()}
    report = _gate_replays(_turns(_BASE), _turns(noisy))
    assert report.passed and report.benchmarks[0].statistic == "paired"
    # other sessions (another trace): nothing to pair, the arms are compared as two samples
    renamed = {(f"x{s}", t): x * 1.5 for (s, t), x in _BASE.items()}
    assert _gate_replays(_turns(_BASE), _turns(renamed)).benchmarks[0].statistic == "median"


def test_a_replay_against_a_server_one_and_a_half_times_slower_fails_the_gate(server_factory, tmp_path,
                                                                             capsys) -> None:
    # issue 45's "done when": every turn 1.5x slower (the first token's base and per-token prefill time alike)
    trace = tmp_path / "agent.jsonl"
    save(build("agent-coding", sessions=2, turns=6, prompt_tokens=300, api="chat", think_ms=0, tool_ms=0,
               max_tokens=16), trace)
    usual = server_factory("--decode-ms", "1", "--ttft-base-ms", "120", "--prefill-us-per-token", "200", fast=False)
    slower = server_factory("--decode-ms", "1", "--ttft-base-ms", "180", "--prefill-us-per-token", "300", fast=False)
    base = _replay(trace, usual, tmp_path / "base")
    slow = _replay(trace, slower, tmp_path / "slow")
    capsys.readouterr()
    assert main(["gate", "--baseline", str(base), "--current", str(slow), "--out", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    verdict = json.loads((tmp_path / "gate.json").read_text())
    ttft = next(b for b in verdict["benchmarks"] if b["benchmark"] == "replay-ttft")
    assert ttft["statistic"] == "paired" and ttft["n_pairs"] == 12 and ttft["gating"], out
    assert 1.3 < ttft["ratio"] < 1.7 and ttft["ci95"][0] > 1.1, ttft
    assert "paired, 12 pairs" in out and "REGRESSION" in out
