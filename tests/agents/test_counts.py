"""The article's two tables out of the compare pipeline (`agents.counts`: per-task counts read from CSVs
and from run folders of rollouts, compared, written; the `compare` command), from CSVs and from
synthetic rollouts. The pure comparison (`stats.compare`) is tested in tests/stats/test_compare.py."""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

import pytest

from harnesscheck.agents.counts import compare_sources, load_counts, write_comparison
from harnesscheck.cli.commands import compare as compare_cmd

FIXTURES = Path(__file__).parent / "fixtures"
RUN1 = (FIXTURES / "article_run1_gpt-5.5.csv", FIXTURES / "article_run1_fallback.csv")
RUN2 = (FIXTURES / "article_run2_gpt-5.5.csv", FIXTURES / "article_run2_alias.csv")


def _cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    compare_cmd.add_arguments(parser)
    return compare_cmd.run(parser.parse_args(argv))


def test_run1_csv_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _cli([str(RUN1[0]), str(RUN1[1]), "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    for text in (
        "gpt-5.5 profile",
        "Fallback profile",
        "2,087",
        "1,048",
        "-1,039",
        "41.7",
        "21.0",
        "-20.8",
        "50/0/0",
        "p < 0.001",
    ):
        assert text in printed, text
    data = json.loads((tmp_path / "comparison.json").read_text())
    assert data["a"] == "gpt-5.5 profile" and data["b"] == "Fallback profile"
    assert data["n_tasks"] == 50
    assert data["totals"] == {"a": 2087, "b": 1048}
    assert data["difference"]["total"] == -1039
    assert round(data["means"]["a"], 1) == 41.7 and round(data["means"]["b"], 1) == 21.0
    assert (data["wins"], data["losses"], data["ties"]) == (50, 0, 0)
    assert data["p_permutation"] < 0.001
    assert data["p_wilcoxon"] < 0.001
    lo, hi = data["ci95_mean_diff"]
    assert lo < -20.78 < hi < 0
    assert len(data["per_task"]) == 50 and set(data["per_task"][0]) == {"task_id", "a", "b", "difference"}
    md = (tmp_path / "comparison.md").read_text()
    assert "| gpt-5.5 profile | 2,087 | 41.7 |" in md
    assert "| Difference (B - A) | -1,039 | -20.8 |" in md
    png = (tmp_path / "paired_differences.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000


def test_run2_csv_table(tmp_path: Path) -> None:
    comp = compare_sources(*RUN2)
    assert (comp.total_a, comp.total_b, comp.diff_total) == (2081, 2205, 124)
    assert f"{comp.mean_a:.1f}/{comp.mean_b:.1f}/{comp.diff_mean:+.1f}" == "41.6/44.1/+2.5"
    assert (comp.wlt.wins, comp.wlt.losses, comp.wlt.ties) == (20, 28, 2)
    assert comp.permutation.method == "monte-carlo"
    assert 0.05 < comp.permutation.p_value < 0.4  # the article: p about 0.22
    assert comp.permutation.p_value == pytest.approx(0.22, abs=0.03)
    assert comp.wilcoxon.p_value > 0.05
    assert comp.ci_mean_diff.low < 0 < comp.ci_mean_diff.high
    assert "| Difference (B - A) | +124 | +2.5 |" in comp.to_markdown()


def _write_rollout(path: Path, model: str, n_calls: int) -> None:
    """A minimal Codex rollout with n_calls tool calls (shell, apply_patch, local shell), each answered."""
    path.parent.mkdir(parents=True, exist_ok=True)
    recs: list[dict] = [
        {"timestamp": "2026-11-03T10:00:00.000Z", "type": "session_meta", "payload": {"id": path.stem}},
        {"timestamp": "2026-11-03T10:00:00.001Z", "type": "turn_context", "payload": {"model": model}},
    ]
    for i in range(n_calls):
        cid = f"call_{i}"
        if i % 5 == 3:
            call = {
                "type": "custom_tool_call",
                "name": "apply_patch",
                "input": "*** Begin Patch",
                "call_id": cid,
            }
            out = {"type": "custom_tool_call_output", "call_id": cid, "output": "ok"}
        elif i % 7 == 6:
            call = {
                "type": "local_shell_call",
                "call_id": cid,
                "status": "completed",
                "action": {"type": "exec"},
            }
            out = {"type": "function_call_output", "call_id": cid, "output": "ok"}
        else:
            call = {"type": "function_call", "name": "shell", "arguments": "{}", "call_id": cid}
            out = {"type": "function_call_output", "call_id": cid, "output": "ok"}
        recs += [
            {"timestamp": "t", "type": "response_item", "payload": call},
            {"timestamp": "t", "type": "response_item", "payload": out},
        ]
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))


def _csv_counts(path: Path) -> dict[str, int]:
    with open(path, newline="") as fh:
        return {r["task_id"]: int(r["tool_calls"]) for r in csv.DictReader(fh)}


@pytest.mark.parametrize("run", [RUN1, RUN2], ids=["run1", "run2"])
def test_same_tables_from_synthetic_rollouts(tmp_path: Path, run: tuple[Path, Path]) -> None:
    for profile, (src, model) in {
        "gpt-5.5": (run[0], "gpt-5.5"),
        "other": (run[1], "openai/openai/gpt-5.5"),
    }.items():
        for task_id, n in _csv_counts(src).items():
            _write_rollout(
                tmp_path / "run" / profile / task_id / "sessions" / f"rollout-{task_id}.jsonl", model, n
            )
    from_csv = compare_sources(*run)
    from_rollouts = compare_sources(tmp_path / "run" / "gpt-5.5", tmp_path / "run" / "other")
    assert from_rollouts.pairs == from_csv.pairs
    assert from_rollouts.wlt == from_csv.wlt
    assert from_rollouts.permutation == from_csv.permutation
    counts, label, usages = load_counts(tmp_path / "run" / "other")
    assert label == "other" and usages is not None and usages[0].model == "openai/openai/gpt-5.5"
    paths = write_comparison(from_rollouts, tmp_path / "out", usages_a=usages, usages_b=usages)
    assert paths["tasks_a"].read_text().startswith("task_id,profile,tool_calls")


def test_cli_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("id,count\n1,2\n")
    assert _cli([str(bad), str(RUN1[1])]) == 2
    assert _cli([str(tmp_path / "missing"), str(RUN1[1])]) == 2
    assert "error" in capsys.readouterr().err


def test_cli_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert _cli([str(RUN2[0]), str(RUN2[1]), "--json", "--label-a", "native", "--label-b", "alias"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["a"], data["b"], data["totals"]) == ("native", "alias", {"a": 2081, "b": 2205})


def test_cli_prints_the_exact_wilcoxon_p(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # d = B - A = [1, 1, 1, 1, 1]: five tied ranks, so the exact two-sided p is 2/2^5 = 0.0625 for both tests
    # (only all-plus and all-minus are as extreme); it must print as such, not rounded to 0.062.
    for name, base in (("a.csv", 10), ("b.csv", 11)):
        rows = "".join(f"t{i},{base + i}\n" for i in range(5))
        (tmp_path / name).write_text("task_id,tool_calls\n" + rows)
    assert _cli([str(tmp_path / "a.csv"), str(tmp_path / "b.csv")]) == 0
    printed = capsys.readouterr().out
    assert "Wilcoxon signed-rank (exact): p = 0.0625" in printed
    assert "Permutation test (two-sided, exact, 32 sign assignments): p = 0.0625" in printed
