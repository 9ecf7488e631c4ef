#!/usr/bin/env python3
"""A stand-in for `codex exec` on the toy task set: fixes the bug and writes a Codex rollout.

Called the way the driver calls Codex (`toy_agent.py exec --json -m MODEL PROMPT`, extra flags
ignored), in the task's working copy, with CODEX_HOME and HARNESSCHECK_TASK_ID set. It:
- resolves MODEL the way Codex resolves a catalog id (longest known slug that prefixes it, else one
  namespace segment stripped, refused if a "/" remains): `gpt-5.5` and `openai/gpt-5.5` get the
  catalog profile, `openai/openai/gpt-5.5` the fallback one;
- works like an agent: reads and searches files, updates a plan, patches the file, runs the tests;
  the catalog profile looks around more, so it makes more tool calls than the fallback profile;
- records every step in $CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<uuid>.jsonl, lines
  {timestamp, type, payload} as Codex does, and with --json prints thread/turn/item events.
No network, no model: the fixes are known per task id.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

CATALOG_SLUGS = ("gpt-5.5", "gpt-5", "gpt-5-codex", "o3", "o4-mini")

# task id -> (file, text before, text after, a word to search for)
FIXES = {
    "harnesscheck__toycalc-1": ("calc.py", "    return a - b", "    return a + b", "def add"),
    "harnesscheck__toycalc-2": ("calc.py", "    return a**b", "    return a * b", "def mul"),
    "harnesscheck__toycalc-3": (
        "calc.py",
        "    return sum(values) / len(values)",
        "    if not values:\n        return 0.0\n    return sum(values) / len(values)",
        "def mean",
    ),
}


def resolve_profile(model: str) -> str:
    """'catalog' or 'fallback', after API_FACTS.md's Codex model catalog rules."""

    def match(mid: str) -> bool:
        return any(mid.startswith(slug) for slug in CATALOG_SLUGS)

    if match(model):
        return "catalog"
    if "/" in model:
        rest = model.split("/", 1)[1]
        if "/" not in rest and match(rest):
            return "catalog"
    return "fallback"


class Recorder:
    def __init__(self, codex_home: Path, model: str, cwd: Path, print_events: bool) -> None:
        now = dt.datetime.now(dt.UTC)
        self.session_id = str(uuid.uuid4())
        folder = codex_home / "sessions" / now.strftime("%Y/%m/%d")
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / f"rollout-{now.strftime('%Y-%m-%dT%H-%M-%S')}-{self.session_id}.jsonl"
        self.fh = open(self.path, "w", encoding="utf-8")
        self.print_events = print_events
        self.calls = 0
        self.items = 0
        self.tokens = {
            "input_tokens": 0,
            "cached_input_tokens": 0,
            "output_tokens": 0,
            "reasoning_output_tokens": 0,
            "total_tokens": 0,
        }
        self.line(
            "session_meta",
            {
                "id": self.session_id,
                "timestamp": now.isoformat(),
                "cwd": str(cwd),
                "originator": "harnesscheck_toy_agent",
                "cli_version": "0.0.0-toy",
                "model_provider": os.environ.get("HARNESSCHECK_PROVIDER", "harnesscheck"),
            },
        )
        self.event({"type": "thread.started", "thread_id": self.session_id})

    def line(self, kind: str, payload: dict[str, Any]) -> None:
        ts = dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        self.fh.write(json.dumps({"timestamp": ts, "type": kind, "payload": payload}) + "\n")
        self.fh.flush()

    def event(self, ev: dict[str, Any]) -> None:
        if self.print_events:
            sys.stdout.write(json.dumps(ev) + "\n")
            sys.stdout.flush()

    def usage(self, prompt_len: int, out_len: int) -> None:
        last = {
            "input_tokens": prompt_len,
            "cached_input_tokens": max(0, prompt_len - 400),
            "output_tokens": out_len,
            "reasoning_output_tokens": out_len // 2,
            "total_tokens": prompt_len + out_len,
        }
        for k, v in last.items():
            self.tokens[k] += v
        self.line(
            "event_msg",
            {
                "type": "token_count",
                "info": {
                    "total_token_usage": dict(self.tokens),
                    "last_token_usage": last,
                    "model_context_window": 258400,
                },
                "rate_limits": None,
            },
        )

    def call(self, kind: str, name: str, args: Any, output: str, exec_item: dict[str, Any]) -> None:
        self.calls += 1
        call_id = f"call_{self.session_id[:8]}_{self.calls}"
        if kind == "function_call":
            self.line(
                "response_item",
                {"type": "function_call", "name": name, "arguments": json.dumps(args), "call_id": call_id},
            )
            self.line(
                "response_item",
                {
                    "type": "function_call_output",
                    "call_id": call_id,
                    "output": json.dumps({"output": output, "metadata": {"exit_code": 0}}),
                },
            )
        elif kind == "custom_tool_call":
            self.line(
                "response_item",
                {
                    "type": "custom_tool_call",
                    "status": "completed",
                    "call_id": call_id,
                    "name": name,
                    "input": args,
                },
            )
            self.line(
                "response_item", {"type": "custom_tool_call_output", "call_id": call_id, "output": output}
            )
        else:
            self.line(
                "response_item",
                {
                    "type": "local_shell_call",
                    "call_id": call_id,
                    "status": "completed",
                    "action": {"type": "exec", "command": args},
                },
            )
            self.line("response_item", {"type": "function_call_output", "call_id": call_id, "output": output})
        self.usage(2000 + 300 * self.calls, 60)
        self.items += 1
        self.event({"type": "item.completed", "item": {"id": f"item_{self.items}", **exec_item}})

    def close(self, message: str) -> None:
        self.line("event_msg", {"type": "agent_message", "message": message})
        self.line(
            "response_item",
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": message}]},
        )
        self.line("event_msg", {"type": "task_complete", "last_agent_message": message})
        self.items += 1
        self.event(
            {
                "type": "item.completed",
                "item": {"id": f"item_{self.items}", "type": "agent_message", "text": message},
            }
        )
        self.event(
            {
                "type": "turn.completed",
                "usage": {
                    k: self.tokens[k] for k in ("input_tokens", "cached_input_tokens", "output_tokens")
                },
            }
        )
        self.fh.close()


def shell(rec: Recorder, cwd: Path, argv: list[str], *, local: bool = False) -> str:
    res = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False)
    out = res.stdout + res.stderr
    item = {
        "type": "command_execution",
        "command": " ".join(argv),
        "aggregated_output": out,
        "exit_code": res.returncode,
        "status": "completed" if res.returncode == 0 else "failed",
    }
    if local:
        rec.call("local_shell_call", "local_shell", argv, out, item)
    else:
        rec.call("function_call", "shell", {"command": argv, "workdir": str(cwd)}, out, item)
    return out


def read(rec: Recorder, cwd: Path, name: str, first: int = 1, last: int = 200) -> str:
    lines = (cwd / name).read_text().splitlines()[first - 1 : last]
    out = "\n".join(lines) + "\n"
    argv = ["sed", "-n", f"{first},{last}p", name]
    rec.call(
        "function_call",
        "shell",
        {"command": argv, "workdir": str(cwd)},
        out,
        {
            "type": "command_execution",
            "command": " ".join(argv),
            "aggregated_output": out,
            "exit_code": 0,
            "status": "completed",
        },
    )
    return out


def grep(rec: Recorder, cwd: Path, word: str) -> str:
    hits = [
        f"{p.name}:{i}:{line}"
        for p in sorted(cwd.glob("*.py"))
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if word in line
    ]
    out = "\n".join(hits) + "\n"
    argv = ["rg", "-n", word, "."]
    rec.call(
        "function_call",
        "shell",
        {"command": argv, "workdir": str(cwd)},
        out,
        {
            "type": "command_execution",
            "command": " ".join(argv),
            "aggregated_output": out,
            "exit_code": 0 if hits else 1,
            "status": "completed",
        },
    )
    return out


def apply_patch(rec: Recorder, cwd: Path, name: str, before: str, after: str) -> bool:
    path = cwd / name
    text = path.read_text()
    ok = before in text
    if ok:
        path.write_text(text.replace(before, after, 1))
    minus = "\n".join("-" + x for x in before.splitlines())
    plus = "\n".join("+" + x for x in after.splitlines())
    patch = f"*** Begin Patch\n*** Update File: {name}\n@@\n{minus}\n{plus}\n*** End Patch\n"
    out = f"Success. Updated the following files:\nM {name}\n" if ok else "Failed to find expected lines"
    rec.call(
        "custom_tool_call",
        "apply_patch",
        patch,
        out,
        {
            "type": "file_change",
            "changes": [{"path": str(path), "kind": "update"}],
            "status": "completed" if ok else "failed",
        },
    )
    return ok


def plan(rec: Recorder, steps: list[tuple[str, str]]) -> None:
    rec.call(
        "function_call",
        "update_plan",
        {"plan": [{"step": s, "status": st} for s, st in steps]},
        "Plan updated",
        {"type": "todo_list", "items": [{"text": s, "completed": st == "completed"} for s, st in steps]},
    )


def main(argv: list[str]) -> int:
    model, prompt, as_json = "gpt-5.5", "", False
    args = [a for a in argv if a != "exec"]
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("-m", "--model") and i + 1 < len(args):
            model = args[i + 1]
            i += 2
            continue
        if a == "--json":
            as_json = True
        elif a in ("-c", "--config", "-C", "--cd", "-s", "--sandbox") and i + 1 < len(args):
            i += 1
        elif not a.startswith("-"):
            prompt = a
        i += 1
    cwd = Path.cwd()
    codex_home = Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex")
    task_id = os.environ.get("HARNESSCHECK_TASK_ID", "")
    profile = resolve_profile(model)
    rec = Recorder(codex_home, model, cwd, as_json)
    rec.event({"type": "turn.started"})
    rec.line(
        "turn_context",
        {
            "cwd": str(cwd),
            "approval_policy": "never",
            "sandbox_policy": {"type": "danger-full-access"},
            "model": model,
            **({"effort": "medium", "summary": "auto"} if profile == "catalog" else {}),
        },
    )
    rec.line(
        "response_item",
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": prompt}]},
    )
    rec.line("event_msg", {"type": "user_message", "message": prompt, "images": []})
    fix = FIXES.get(task_id)
    if fix is None:
        rec.close(f"I do not know task {task_id!r}.")
        return 1
    name, before, after, word = fix
    tests = ["python", "-m", "unittest", "-q", "check_calc"]
    if profile == "catalog":
        # looks around first, plans, patches, runs the tests, reviews the diff
        grep(rec, cwd, word)
        read(rec, cwd, name)
        read(rec, cwd, "check_calc.py")
        plan(rec, [("Reproduce", "completed"), ("Fix", "in_progress"), ("Run tests", "pending")])
        read(rec, cwd, "README.md")
        ok = apply_patch(rec, cwd, name, before, after)
        shell(rec, cwd, [sys.executable, "-S", *tests[1:]], local=True)
        shell(rec, cwd, ["git", "diff", "--stat"])
        if task_id.endswith("-3"):  # the empty-input case gets one more look
            grep(rec, cwd, "mean([])")
        plan(rec, [("Reproduce", "completed"), ("Fix", "completed"), ("Run tests", "completed")])
    else:
        # the fallback profile: reads, patches, runs the tests
        read(rec, cwd, name)
        ok = apply_patch(rec, cwd, name, before, after)
        shell(rec, cwd, [sys.executable, "-S", *tests[1:]])
    rec.close(f"Fixed {name} ({profile} profile)." if ok else "Could not apply the fix.")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
