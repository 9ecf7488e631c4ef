"""`report --format md` and `compare --format md` (issue 45): a Markdown summary to paste into an issue or a PR,
with the table per API, the MUST and SHOULD failures with rule and frame, the per-client lines in full;
whatever the endpoint wrote is escaped, so it can neither break a table nor add a link, an image or a tag."""

from __future__ import annotations

import json
import re
from pathlib import Path

from harnesscheck.cli.main import main
from harnesscheck.reports.markdown import escape, to_markdown
from tests.reports import factory


def _table(md: str, heading: str) -> list[list[str]]:
    """The rows (cells split on unescaped |) of the table under `heading`."""
    part = next(b for b in md[md.index(heading):].split("\n\n") if b.startswith("|"))
    return [[c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]] for line in part.splitlines()[2:]]


def test_the_summary_has_the_table_per_api_the_failures_with_rule_and_frame_and_the_clients() -> None:
    doc = factory.results()
    doc["checks"][0]["clients"] = {"Claude Code 2.1.197": "would break", "Codex 0.130.0 (gpt-5.5 catalog profile)":
                                   "no measured impact", "OpenClaw 2026.9.6": "unaffected"}
    md = to_markdown(doc, report_link="https://ci.example/run/7/report.html")
    assert md.startswith("## harnesscheck: scripted/qwen3-coder at http://127.0.0.1:8123\n\n❌ **1 MUST check failed")
    apis = _table(md, "| API |")
    assert apis[0] == ["anthropic", "2", "1", "0", "0", "0", "1", "3"]
    assert apis[-1][0] == "**total**" and apis[-1][-1] == "8"
    (must,) = _table(md, "### MUST failures (1)")
    assert must == ["`AN-STREAM-001`", "anthropic", "`content_block_delta index must equal the open block's index`",
                    "#7", "AN-STREAM-001 fail"]
    (should,) = _table(md, "### SHOULD failures (1; shown, never fail the run)")
    assert should[:4] == ["`CH-TOOL-002`", "chat", "`id once per index`", "#3"]
    (error,) = _table(md, "### Kit errors (1;")
    assert error[0] == "`MD-ROUTE-001`" and error[3] == "–"
    assert "- **Claude Code 2.1.197**: would break (`AN-STREAM-001`)\n" in md
    assert "- **Codex 0.130.0 (gpt-5.5 catalog profile)**: no measured impact (`AN-STREAM-001`)\n" in md
    assert "| `preamble` | stable | 30 |" in md
    assert md.rstrip().endswith("Full report: https://ci.example/run/7/report.html (the wire log of every case, "
                                "at its failing frame).")


def test_what_the_endpoint_wrote_is_escaped() -> None:
    doc = factory.results()
    doc["checks"][0]["message"] = 'HTTP 500: a | b\n<img src=x onerror=alert(1)> ![p](http://t/p.png) [c](javascript:x)'
    doc["checks"][0]["finding"]["rule"] = "R|`x`"
    md = to_markdown(doc)
    (must,) = _table(md, "### MUST failures (1)")
    assert len(must) == 5  # the | in the message did not add a cell
    assert must[4] == (r"HTTP 500: a \| b \<img src=x onerror=alert(1)\> \!\[p\](http://t/p.png) "
                       r"\[c\](javascript:x)")
    assert must[2] == r"R\|\`x\`"
    assert not re.search(r"(?<!\\)<img", md) and not re.search(r"(?<!\\)\]\(javascript", md)
    assert escape("x" * 400).endswith("x…") and len(escape("x" * 400)) == 300


def test_report_format_md_prints_or_writes_the_summary(tmp_path: Path, capsys) -> None:
    (tmp_path / "results.json").write_text(json.dumps(factory.results()))
    assert main(["report", str(tmp_path), "--format", "md"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("## harnesscheck:") and "### MUST failures (1)" in printed
    assert not (tmp_path / "report.html").exists() and not Path("report.html").exists()
    out = tmp_path / "summary.md"
    assert main(["report", str(tmp_path), "--format", "md", "--out", str(out), "--link", "report.html"]) == 0
    assert out.read_text() == printed.rstrip("\n") + "\n\nFull report: report.html (the wire log of every case, " \
        "at its failing frame).\n"
    assert "Full report: report.html" in out.read_text() and "### SHOULD failures" in out.read_text()
    assert main(["report", str(tmp_path), "--link", "x"]) == 2  # --link is for the Markdown


def test_compare_format_md_prints_the_comparison_as_markdown(tmp_path: Path, capsys) -> None:
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    a.write_text("task_id,tool_calls\n" + "".join(f"t{i},{10 + i}\n" for i in range(8)))
    b.write_text("task_id,tool_calls\n" + "".join(f"t{i},{7 + i}\n" for i in range(8)))
    assert main(["compare", str(a), str(b), "--label-a", "gpt-5.5", "--label-b", "fallback", "--format", "md"]) == 0
    md = capsys.readouterr().out
    assert md.startswith("# gpt-5.5 vs fallback\n\n| Profile | Total tool calls | Mean per task |\n|---|---:|---:|\n")
    assert "| Difference (B - A) | -24 | -3.0 |" in md and "- Wins/losses/ties: 8/0/0" in md
    assert main(["compare", str(a), str(b), "--format", "md", "--json"]) == 2
