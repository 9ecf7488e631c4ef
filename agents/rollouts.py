"""Count an agent's tool calls, turns and tokens from the logs it writes.

Three formats, detected per file:

``codex-rollout``  Codex session files ``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``: lines
    ``{timestamp, type, payload}``. A tool call is a ``response_item`` whose ``payload.type`` is
    ``function_call`` (name: ``payload.name``), ``local_shell_call`` (name: ``local_shell``) or
    ``custom_tool_call`` (name: ``payload.name``, e.g. ``apply_patch``); their ``*_output`` records
    are results, not calls. Duplicates by ``call_id`` are counted once. Turns: ``turn_context``
    records (one per turn). Tokens: ``info.total_token_usage`` of the last ``event_msg`` of type
    ``token_count`` (cumulative within a session). Model: ``turn_context.payload.model``.
    Files of the older layout without the envelope (bare response items) are read the same way.
``codex-exec``  the stdout of ``codex exec --json``: thread/turn/item events. A tool call is an
    ``item.completed`` whose item type is one of ``EXEC_TOOL_ITEM_TYPES`` (command_execution,
    file_change, mcp_tool_call, web_search; ``mcp_tool_call`` is named ``mcp:SERVER/TOOL``), counted
    once per item id. Not counted: agent_message, reasoning, todo_list (plan updates), error. Turns:
    ``turn.started`` events. Tokens: the sum of ``turn.completed.usage``. This stream shows fewer
    kinds of call than the rollout (e.g. no ``update_plan``), so compare like with like.
``claude-stream``  the stdout of Claude Code ``-p --output-format stream-json``: a tool call is a
    ``tool_use`` block in an ``assistant`` message's content, deduplicated by the block's ``id``
    (the same message is repeated once per content block). Turns: ``num_turns`` of the ``result``
    record, else the number of distinct assistant message ids. Tokens: the ``result`` record's
    ``usage``, else the last usage of each distinct assistant message, summed.

Token fields are normalised to the OpenAI meaning: ``input_tokens`` includes cached input;
``cached_input_tokens`` is the cached part (Anthropic: input + cache creation + cache read, and the
cache read).
"""

from __future__ import annotations

import csv
import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "ROLLOUT_TOOL_TYPES",
    "EXEC_TOOL_ITEM_TYPES",
    "FORMAT_PRIORITY",
    "RolloutSummary",
    "TaskUsage",
    "Usage",
    "read_jsonl",
    "detect_format",
    "parse_records",
    "parse_file",
    "summarize_files",
    "summarize_task_dir",
    "load_run_dir",
    "never_started",
    "write_usage_csv",
    "usage_rows",
]

ROLLOUT_TOOL_TYPES = ("function_call", "local_shell_call", "custom_tool_call")
EXEC_TOOL_ITEM_TYPES = ("command_execution", "file_change", "mcp_tool_call", "web_search")
#: when a task folder holds several formats (a rollout and the same run's exec stdout), the first one
#: present in this order is used, so no call is counted twice
FORMAT_PRIORITY = ("codex-rollout", "codex-exec", "claude-stream")

_ROLLOUT_ENVELOPES = {"session_meta", "response_item", "event_msg", "turn_context", "compacted"}
_LEGACY_ITEM_TYPES = {
    "message",
    "reasoning",
    "function_call",
    "function_call_output",
    "local_shell_call",
    "custom_tool_call",
    "custom_tool_call_output",
}
_CLAUDE_TYPES = {"system", "assistant", "user", "result"}


#: input (cached included), cached input, output tokens; None where a log has no such figure
_Tokens = tuple[int | None, int | None, int | None]


@dataclass(frozen=True, slots=True, kw_only=True)
class Usage:
    """Tool calls, turns and tokens of one format's logs (the part a file and a task both have)."""

    format: str
    tool_calls: int
    by_tool: dict[str, int] = field(default_factory=dict)
    turns: int = 0
    input_tokens: int | None = None
    cached_input_tokens: int | None = None
    output_tokens: int | None = None
    model: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RolloutSummary(Usage):
    """What one log file says. Token fields are None when the file has none."""

    session_id: str | None = None
    path: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskUsage(Usage):
    """One task's row of the per-task table (the sum over its log files of one format)."""

    task_id: str
    profile: str
    files: tuple[str, ...] = ()


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """JSON objects of a JSONL file; blank lines, non-JSON lines and non-objects are skipped."""
    out: list[dict[str, Any]] = []
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            line = line.strip()
            if not line:
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(obj, dict):
                out.append(obj)
    return out


def detect_format(records: Iterable[dict[str, Any]]) -> str:
    """ "codex-rollout", "codex-exec", "claude-stream" or "unknown" (first record that tells)."""
    for rec in records:
        kind = rec.get("type")
        if not isinstance(kind, str):
            continue
        if kind in _ROLLOUT_ENVELOPES and "payload" in rec:
            return "codex-rollout"
        if kind.startswith(("thread.", "turn.", "item.")):
            return "codex-exec"
        if kind in _CLAUDE_TYPES and ("message" in rec or "session_id" in rec or "subtype" in rec):
            return "claude-stream"
        if kind in _LEGACY_ITEM_TYPES:
            return "codex-rollout"
    return "unknown"


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _add(total: int | None, value: Any) -> int | None:
    v = _int(value)
    if v is None:
        return total
    return v if total is None else total + v


def _add_tokens(total: _Tokens, more: _Tokens) -> _Tokens:
    """Field by field sum; a field stays None only where neither side has it."""
    return (_add(total[0], more[0]), _add(total[1], more[1]), _add(total[2], more[2]))


def _openai_tokens(u: dict[str, Any]) -> _Tokens:
    return (_int(u.get("input_tokens")), _int(u.get("cached_input_tokens")), _int(u.get("output_tokens")))


def _anthropic_tokens(u: dict[str, Any]) -> _Tokens:
    raw = _int(u.get("input_tokens"))
    read = _int(u.get("cache_read_input_tokens"))
    created = _int(u.get("cache_creation_input_tokens"))
    parts = [v for v in (raw, read, created) if v is not None]
    return (sum(parts) if parts else None, read, _int(u.get("output_tokens")))


@dataclass(slots=True)
class _Tally:
    """What a parser has read of one file so far; ``summary`` is the file's RolloutSummary."""

    by_tool: Counter[str] = field(default_factory=Counter)
    seen: set[str] = field(default_factory=set)
    turns: int = 0
    tokens: _Tokens = (None, None, None)
    model: str | None = None
    session_id: str | None = None

    def call(self, call_id: Any, name: str) -> None:
        """Count a tool call by name, once per string id (a call without one always counts)."""
        if isinstance(call_id, str):
            if call_id in self.seen:
                return
            self.seen.add(call_id)
        self.by_tool[name] += 1

    def summary(self, fmt: str, path: str | None) -> RolloutSummary:
        inp, cached, out = self.tokens
        return RolloutSummary(
            format=fmt,
            tool_calls=sum(self.by_tool.values()),
            by_tool=dict(self.by_tool),
            turns=self.turns,
            input_tokens=inp,
            cached_input_tokens=cached,
            output_tokens=out,
            model=self.model,
            session_id=self.session_id,
            path=path,
        )


def _parse_codex_rollout(records: Sequence[dict[str, Any]], path: str | None) -> RolloutSummary:
    tally = _Tally()
    for rec in records:
        kind = rec.get("type")
        payload = rec.get("payload")
        if kind in _LEGACY_ITEM_TYPES and payload is None:  # older layout: bare response items
            kind, payload = "response_item", rec
        if not isinstance(payload, dict):
            continue
        if kind == "session_meta":
            tally.session_id = payload.get("id", tally.session_id)
        elif kind == "turn_context":
            tally.turns += 1
            tally.model = payload.get("model", tally.model)
        elif kind == "event_msg" and payload.get("type") == "token_count":
            info = payload.get("info")
            if isinstance(info, dict) and isinstance(info.get("total_token_usage"), dict):
                tally.tokens = _openai_tokens(info["total_token_usage"])  # cumulative: the last one
        elif kind == "response_item" and (ptype := payload.get("type")) in ROLLOUT_TOOL_TYPES:
            name = "local_shell" if ptype == "local_shell_call" else str(payload.get("name") or ptype)
            tally.call(payload.get("call_id") or payload.get("id"), name)
    return tally.summary("codex-rollout", path)


def _exec_tool_name(item: dict[str, Any]) -> str:
    kind = str(item.get("type") or item.get("item_type"))
    if kind == "mcp_tool_call":
        return f"mcp:{item.get('server', '?')}/{item.get('tool', '?')}"
    return kind


def _parse_codex_exec(records: Sequence[dict[str, Any]], path: str | None) -> RolloutSummary:
    tally = _Tally()
    for rec in records:
        kind = rec.get("type")
        if kind == "thread.started":
            tally.session_id = rec.get("thread_id", tally.session_id)
        elif kind == "turn.started":
            tally.turns += 1
        elif kind == "turn.completed" and isinstance(rec.get("usage"), dict):
            tally.tokens = _add_tokens(tally.tokens, _openai_tokens(rec["usage"]))
        elif kind == "item.completed" and isinstance(item := rec.get("item"), dict):
            if (item.get("type") or item.get("item_type")) in EXEC_TOOL_ITEM_TYPES:
                tally.call(item.get("id"), _exec_tool_name(item))
    return tally.summary("codex-exec", path)


def _parse_claude_stream(records: Sequence[dict[str, Any]], path: str | None) -> RolloutSummary:
    tally = _Tally()
    message_usage: dict[str, dict[str, Any]] = {}
    result: dict[str, Any] | None = None
    for rec in records:
        kind = rec.get("type")
        tally.session_id = rec.get("session_id", tally.session_id)
        if kind == "system" and rec.get("subtype") == "init":
            tally.model = rec.get("model", tally.model)
        elif kind == "result":
            result = rec
        elif kind == "assistant" and isinstance(msg := rec.get("message"), dict):
            tally.model = msg.get("model", tally.model)
            mid = msg.get("id")
            if isinstance(mid, str):
                usage = msg.get("usage")
                message_usage[mid] = usage if isinstance(usage, dict) else message_usage.get(mid, {})
            for block in msg.get("content") or []:
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    tally.call(block.get("id"), str(block.get("name") or "tool_use"))
    if result is not None and isinstance(result.get("usage"), dict):
        tally.tokens = _anthropic_tokens(result["usage"])
    else:
        for u in message_usage.values():
            tally.tokens = _add_tokens(tally.tokens, _anthropic_tokens(u))
    turns = _int(result.get("num_turns")) if result is not None else None
    tally.turns = turns if turns is not None else len(message_usage)
    return tally.summary("claude-stream", path)


_PARSERS = {
    "codex-rollout": _parse_codex_rollout,
    "codex-exec": _parse_codex_exec,
    "claude-stream": _parse_claude_stream,
}


def parse_records(
    records: Sequence[dict[str, Any]], fmt: str | None = None, path: str | None = None
) -> RolloutSummary:
    """Summarise parsed JSONL records; ``fmt`` None detects the format."""
    fmt = fmt or detect_format(records)
    parser = _PARSERS.get(fmt)
    if parser is None:
        return RolloutSummary(format="unknown", tool_calls=0, path=path)
    return parser(records, path)


def parse_file(path: str | Path, fmt: str | None = None) -> RolloutSummary:
    """Summarise one JSONL log file (format detected unless given)."""
    return parse_records(read_jsonl(path), fmt, str(path))


def summarize_files(task_id: str, profile: str, paths: Iterable[str | Path]) -> TaskUsage:
    """Sum the files of the highest-priority format present (see FORMAT_PRIORITY)."""
    summaries = [parse_file(p) for p in sorted(map(str, paths))]
    known = [s for s in summaries if s.format != "unknown"]
    if not known:
        return TaskUsage(task_id=task_id, profile=profile, tool_calls=0, format="unknown")
    fmt = min((s.format for s in known), key=FORMAT_PRIORITY.index)
    chosen = [s for s in known if s.format == fmt]
    by_tool: Counter[str] = Counter()
    tokens: _Tokens = (None, None, None)
    for s in chosen:
        by_tool.update(s.by_tool)
        tokens = _add_tokens(tokens, (s.input_tokens, s.cached_input_tokens, s.output_tokens))
    models = [s.model for s in chosen if s.model]
    return TaskUsage(
        task_id=task_id,
        profile=profile,
        tool_calls=sum(s.tool_calls for s in chosen),
        by_tool=dict(sorted(by_tool.items())),
        turns=sum(s.turns for s in chosen),
        input_tokens=tokens[0],
        cached_input_tokens=tokens[1],
        output_tokens=tokens[2],
        format=fmt,
        model=models[-1] if models else None,
        files=tuple(s.path or "" for s in chosen),
    )


def _task_meta(task_dir: Path) -> dict[str, Any]:
    meta = task_dir / "task.json"
    if meta.is_file():
        try:
            data = json.loads(meta.read_text(encoding="utf-8"))
            if isinstance(data, dict):
                return data
        except (OSError, json.JSONDecodeError):
            pass
    return {}


def _task_id_of(task_dir: Path) -> str:
    return str(_task_meta(task_dir).get("task_id") or task_dir.name)


def summarize_task_dir(
    task_dir: str | Path, profile: str | None = None, task_id: str | None = None
) -> TaskUsage:
    """One task folder: every ``*.jsonl`` below it. Task id: ``task.json``'s task_id, else the name."""
    d = Path(task_dir)
    return summarize_files(task_id or _task_id_of(d), profile or d.parent.name, sorted(d.rglob("*.jsonl")))


def never_started(meta: dict[str, Any]) -> bool:
    """Whether a run's ``task.json`` says its agent never ran: an error before it (a working copy that
    could not be made, e.g. a missing ``base_commit``; an agent command that is not there), so no exit
    status and no time-out; or ``"failed": true`` (every attempt of the Ray driver failed)."""
    if meta.get("failed") is True:
        return True
    return bool(meta.get("error")) and meta.get("returncode") is None and not meta.get("timed_out")


def load_run_dir(profile_dir: str | Path, profile: str | None = None) -> list[TaskUsage]:
    """Per-task usage of a profile folder ``RUN/PROFILE/``: one sub-folder per task; a ``*.jsonl``
    file directly in the folder counts as a task named by its stem. Sorted by task id. A task
    folder whose run never started (``never_started``: nothing was measured) is left out: a
    comparison lists it as unpaired, never as zero calls."""
    root = Path(profile_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"not a folder: {root}")
    name = profile or root.name
    tasks = [
        summarize_task_dir(sub, name)
        for sub in sorted(root.iterdir())
        if sub.is_dir() and not never_started(_task_meta(sub))
    ]
    tasks += [summarize_files(f.stem, name, [f]) for f in sorted(root.glob("*.jsonl"))]
    return sorted(tasks, key=lambda t: t.task_id)


def usage_rows(usages: Iterable[TaskUsage]) -> list[dict[str, Any]]:
    """Flat rows of the per-task table (``tools`` as ``name=count;...``)."""
    return [
        {
            "task_id": u.task_id,
            "profile": u.profile,
            "tool_calls": u.tool_calls,
            "turns": u.turns,
            "input_tokens": u.input_tokens,
            "cached_input_tokens": u.cached_input_tokens,
            "output_tokens": u.output_tokens,
            "format": u.format,
            "model": u.model,
            "tools": ";".join(f"{k}={v}" for k, v in sorted(u.by_tool.items())),
        }
        for u in usages
    ]


def write_usage_csv(usages: Iterable[TaskUsage], path: str | Path) -> Path:
    """Write the per-task table as CSV (readable back by ``harnesscheck.stats.compare.load_counts``)."""
    rows = usage_rows(usages)
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fields = [
        "task_id",
        "profile",
        "tool_calls",
        "turns",
        "input_tokens",
        "cached_input_tokens",
        "output_tokens",
        "format",
        "model",
        "tools",
    ]
    with open(out, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=fields)
        w.writeheader()
        for r in rows:
            w.writerow({k: "" if r[k] is None else r[k] for k in fields})
    return out
