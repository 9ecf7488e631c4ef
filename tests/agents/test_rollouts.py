"""Tool-call counting from Codex rollouts, `codex exec --json` streams and Claude Code stream-json."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harnesscheck.agents.rollouts import (
    detect_format,
    load_run_dir,
    parse_file,
    read_jsonl,
    summarize_task_dir,
    write_usage_csv,
)

FIXTURES = Path(__file__).parent / "fixtures"


#: fixture -> (format, calls by tool, turns, (input, cached input, output) tokens, model)
FORMATS = {
    # shell x3 (the replayed call_7Yq6 once), update_plan, apply_patch (custom), local_shell;
    # the *_output records are not calls
    "codex_rollout.jsonl": (
        "codex-rollout",
        {"shell": 3, "update_plan": 1, "apply_patch": 1, "local_shell": 1},
        1,
        (38544, 27008, 1190),
        "gpt-5.5",
    ),
    # item.completed of command_execution x2 (a failed command is still a call), file_change,
    # mcp_tool_call, web_search; not reasoning, todo_list, agent_message, nor item.started
    "codex_exec.jsonl": (
        "codex-exec",
        {"command_execution": 2, "file_change": 1, "mcp:docs/search": 1, "web_search": 1},
        2,
        (25763, 24948, 142),
        None,
    ),
    # input normalised to include cache creation and reads: 22 + 6470 + 59968
    "claude_stream.jsonl": (
        "claude-stream",
        {"Read": 1, "Grep": 1, "Edit": 1, "Bash": 1},
        5,
        (66460, 59968, 543),
        "claude-sonnet-4-5",
    ),
}


@pytest.mark.parametrize("fixture", FORMATS)
def test_format_counts(fixture: str) -> None:
    fmt, by_tool, turns, tokens, model = FORMATS[fixture]
    s = parse_file(FIXTURES / fixture)
    assert s.format == fmt
    assert s.by_tool == by_tool
    assert s.tool_calls == sum(by_tool.values())
    assert s.turns == turns
    assert (s.input_tokens, s.cached_input_tokens, s.output_tokens) == tokens
    assert s.model == model


def test_codex_rollout_session_id() -> None:
    assert parse_file(FIXTURES / "codex_rollout.jsonl").session_id == "0199e0a1-7c3b-7d10-9a1e-2f4c8b6d5e01"


def test_codex_rollout_legacy_layout(tmp_path: Path) -> None:
    lines = [
        {"id": "abc", "timestamp": "2025-06-01T00:00:00Z", "instructions": None},
        {"record_type": "state"},
        {"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c1"},
        {"type": "function_call_output", "call_id": "c1", "output": "x"},
        {"type": "local_shell_call", "call_id": "c2", "status": "completed", "action": {}},
    ]
    p = tmp_path / "rollout-old.jsonl"
    p.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    s = parse_file(p)
    assert s.format == "codex-rollout"
    assert s.by_tool == {"shell": 1, "local_shell": 1}


def test_claude_without_result_record(tmp_path: Path) -> None:
    lines = (FIXTURES / "claude_stream.jsonl").read_text().splitlines()[:-1]
    p = tmp_path / "cut.jsonl"
    p.write_text("\n".join(lines) + "\n")
    s = parse_file(p)
    assert s.tool_calls == 4
    assert s.turns == 4  # distinct assistant message ids
    # last usage of each distinct message: u1 once + u2 three times
    assert s.output_tokens == 3 + 3 * 180


def test_detect_and_garbage(tmp_path: Path) -> None:
    p = tmp_path / "x.jsonl"
    p.write_text('not json\n\n[1,2]\n{"hello": 1}\n')
    assert read_jsonl(p) == [{"hello": 1}]
    assert detect_format(read_jsonl(p)) == "unknown"
    assert parse_file(p).tool_calls == 0


def test_task_dir_prefers_rollout_over_exec_stdout(tmp_path: Path) -> None:
    task = tmp_path / "gpt-5.5" / "toy__calc-1"
    (task / "sessions" / "2026" / "11" / "03").mkdir(parents=True)
    shutil.copy(
        FIXTURES / "codex_rollout.jsonl", task / "sessions" / "2026" / "11" / "03" / "rollout-a.jsonl"
    )
    shutil.copy(FIXTURES / "codex_exec.jsonl", task / "agent-stdout.jsonl")
    u = summarize_task_dir(task)
    assert (u.task_id, u.profile, u.format, u.tool_calls) == ("toy__calc-1", "gpt-5.5", "codex-rollout", 6)
    assert len(u.files) == 1


def test_run_dir_and_csv(tmp_path: Path) -> None:
    prof = tmp_path / "run" / "fallback"
    for i, fx in enumerate(["codex_rollout.jsonl", "claude_stream.jsonl"]):
        d = prof / f"task-{i}"
        d.mkdir(parents=True)
        shutil.copy(FIXTURES / fx, d / fx)
    (prof / "task-1" / "task.json").write_text(json.dumps({"task_id": "renamed"}))
    shutil.copy(FIXTURES / "codex_exec.jsonl", prof / "loose.jsonl")
    usages = load_run_dir(prof)
    assert [(u.task_id, u.tool_calls) for u in usages] == [("loose", 5), ("renamed", 4), ("task-0", 6)]
    assert {u.profile for u in usages} == {"fallback"}
    out = write_usage_csv(usages, tmp_path / "usage.csv")
    text = out.read_text()
    assert text.splitlines()[0].startswith("task_id,profile,tool_calls,turns")
    assert "apply_patch=1;local_shell=1;shell=3;update_plan=1" in text
