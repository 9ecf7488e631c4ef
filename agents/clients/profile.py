"""Codex catalog profiles: what Codex's model catalog changes in the request before it is sent.

``capture_profile(inst, endpoint, model, work)`` runs Codex twice under one model id through the
capture proxy: a text turn ("Say ok"), whose first request is the profile, and a tool turn whose
command prints ~229 KB (``seq 1 40000``), whose next request shows what the tool-output truncation
policy let through. ``profile_of(body)`` reads a first request: base instructions (the first
``developer`` item of ``input``, or ``instructions``: length and ``#`` headings), the tool list,
``reasoning``, ``text.verbosity``, ``parallel_tool_calls``, ``include``. ``diff(a, b)`` lists
every field that differs. A model id that Codex resolved to fallback metadata is flagged from its
own warning ("Model metadata for `ID` not found. Defaulting to fallback metadata").
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

LONG_COMMAND = "seq 1 40000"
LONG_OUTPUT_BYTES = sum(len(str(i)) + 1 for i in range(1, 40001))  # 228,894
FALLBACK_RE = re.compile(r"Model metadata for `([^`]*)` not found\. Defaulting to fallback metadata")


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(c.get("text", "") if isinstance(c, dict) else str(c) for c in content)
    return ""


def base_instructions(body: dict[str, Any]) -> str:
    if isinstance(body.get("instructions"), str) and body["instructions"]:
        return body["instructions"]
    for item in body.get("input") or []:
        if isinstance(item, dict) and item.get("role") in ("developer", "system"):
            return _text(item.get("content"))
    return ""


def tool_names(tools: list[Any]) -> list[str]:
    out = []
    for t in tools or []:
        if not isinstance(t, dict):
            continue
        name = t.get("name") or t.get("type")
        if t.get("type") == "namespace":
            out += [f"{name}.{n}" for n in tool_names(t.get("tools") or [])]
        elif t.get("type") not in (None, "function"):
            out.append(f"{name}" if t.get("name") else f"<{t['type']}>")
        else:
            out.append(str(name))
    return out


def profile_of(body: dict[str, Any]) -> dict[str, Any]:
    instr = base_instructions(body)
    return {
        "model": body.get("model"),
        "base_instructions": {"chars": len(instr), "headings": [ln.strip() for ln in instr.splitlines()
                                                                 if re.match(r"^#{1,3} ", ln.strip())][:40],
                              "first_line": instr.strip().splitlines()[0][:160] if instr.strip() else ""},
        "tools": tool_names(body.get("tools") or []),
        "reasoning": body.get("reasoning"),
        "text_verbosity": (body.get("text") or {}).get("verbosity") if isinstance(body.get("text"), dict) else None,
        "text": body.get("text"),
        "parallel_tool_calls": body.get("parallel_tool_calls"),
        "include": body.get("include"),
        "input_items": len(body.get("input") or []),
    }


def truncation_of(records: list[dict[str, Any]]) -> dict[str, Any]:
    """What came back of the long command's output in the request after the tool call."""
    from harnesscheck.agents.clients.turns import is_model_request, tool_results

    for t in [r for r in records if is_model_request(r)][1:]:
        for res in tool_results(t.get("request_body")):
            text = res["text"]
            lines = [ln for ln in text.splitlines() if ln.strip().isdigit()]
            note = [ln for ln in text.splitlines() if re.search(r"truncat|tokens|omitted|Original token count", ln, re.I)]
            return {"command": LONG_COMMAND, "output_bytes": LONG_OUTPUT_BYTES, "returned_chars": len(text),
                    "returned_bytes": len(text.encode()), "numbers_kept": len(lines),
                    "last_number": lines[-1].strip() if lines else None,
                    "notes": [n.strip()[:160] for n in note[:4]],
                    "kept_fraction": round(len(text.encode()) / LONG_OUTPUT_BYTES, 4)}
    return {"command": LONG_COMMAND, "error": "no tool result came back"}


def fallback_of(stdout: str) -> bool:
    return bool(FALLBACK_RE.search(stdout))


def capture_profile(inst: Any, endpoint: str, model: str, work: Path, *, timeout: float = 180.0) -> dict[str, Any]:
    from harnesscheck.agents.clients import get_client, turns

    client = get_client("codex")
    text = turns.run_turn(client, inst, endpoint, model, work / "text", turn="text", prompt=turns.TEXT_PROMPT,
                           timeout=timeout)
    records = turns.load_records(text.capture)
    first = next((r for r in records if turns.is_model_request(r)), None)
    if first is None or not isinstance(first.get("request_body"), dict):
        return {"model": model, "error": f"no request captured: {text.error[:300]}", "ok": False}
    prof = profile_of(first["request_body"])
    shell = next((n for n in ("exec_command", "shell_command", "shell", "local_shell") if n in prof["tools"]),
                 client.tool)
    long_turn = turns.run_turn(client, inst, endpoint, model, work / "long-output", turn="tool",
                                prompt=f"Use the {shell} tool to run `{LONG_COMMAND}`.", timeout=timeout)
    prof["truncation"] = truncation_of(turns.load_records(long_turn.capture))
    prof["fallback_metadata"] = fallback_of(text.stdout_tail + (Path(work / "text" / "stdout.txt").read_text()
                                                                if (work / "text" / "stdout.txt").exists() else ""))
    prof["codex_version"] = inst.version
    prof["ok"] = text.ok and long_turn.ok
    prof["first_request"] = str(Path(text.capture))
    return prof


FIELDS = ("fallback_metadata", "base_instructions.chars", "base_instructions.headings", "base_instructions.first_line",
          "tools", "reasoning", "text_verbosity", "parallel_tool_calls", "include", "truncation.returned_bytes",
          "truncation.numbers_kept", "truncation.notes")


def _get(d: dict[str, Any], path: str) -> Any:
    value: Any = d
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def diff(a: dict[str, Any], b: dict[str, Any]) -> list[dict[str, Any]]:
    """Fields that differ between two profiles: [{field, a, b, (only_a, only_b for lists)}]."""
    out = []
    for f in FIELDS:
        va, vb = _get(a, f), _get(b, f)
        if va == vb:
            continue
        row: dict[str, Any] = {"field": f, "a": va, "b": vb}
        if isinstance(va, list) and isinstance(vb, list):
            row["only_a"] = [x for x in va if x not in vb]
            row["only_b"] = [x for x in vb if x not in va]
        out.append(row)
    return out


def render(a: dict[str, Any], b: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    lines = [f"Codex {a.get('codex_version', '')} catalog profile: {a.get('model')!s} vs {b.get('model')!s}"]
    for m in (a, b):
        if m.get("fallback_metadata"):
            lines.append(f"  {m.get('model')}: FALLBACK metadata (Codex: model metadata not found)")
        else:
            lines.append(f"  {m.get('model')}: catalog profile")
    if not rows:
        lines.append("  no difference")
    for r in rows:
        if "only_a" in r:
            lines.append(f"  {r['field']}: only {a.get('model')}: {json.dumps(r['only_a'])}; "
                         f"only {b.get('model')}: {json.dumps(r['only_b'])}")
        else:
            lines.append(f"  {r['field']}: {json.dumps(r['a'])} vs {json.dumps(r['b'])}")
    return "\n".join(lines)
