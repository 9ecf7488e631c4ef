"""Trim real client captures into the small fixtures the unit tests read (run by hand).

    python tests/clients/make_fixtures.py OUT_DIR_OF_harnesscheck_clients PROFILE_OUT_DIR

Keeps what the checks and the profile diff read: method, url, status, error, SSE frames (big
`response.created` / `response.completed` payloads cut), the request body with tool schemas
reduced to {type, name, tools} and Claude Code's / OpenClaw's system prompt cut.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).parent / "fixtures"


def _tools(tools):
    return [{k: (_tools(v) if k == "tools" else v) for k, v in t.items() if k in ("type", "name", "tools")}
            for t in tools or [] if isinstance(t, dict)]


def trim_record(rec: dict, keep_instructions: bool) -> dict:
    t = rec["transcript"]
    body = t.get("request_body")
    if isinstance(body, dict):
        body = dict(body)
        if "tools" in body:
            body["tools"] = _tools(body["tools"])
        if isinstance(body.get("system"), (list, str)):
            body["system"] = "[cut]"
        if isinstance(body.get("input"), list) and not keep_instructions:
            body["input"] = [({**i, "content": "[cut]"} if isinstance(i, dict) and i.get("role") == "developer" else i)
                             for i in body["input"]]
        body.pop("client_metadata", None)
    frames = []
    for f in t.get("frames") or []:
        data = f.get("data") or ""
        if f.get("event") in ("response.created", "response.in_progress", "response.completed") and len(data) > 400:
            d = json.loads(data)
            d["response"] = {k: v for k, v in d["response"].items() if k not in ("tools", "instructions", "output")}
            data = json.dumps(d)
        frames.append({"kind": f.get("kind"), "event": f.get("event"), "data": data})
    keep = {k: t.get(k) for k in ("method", "url", "status", "error", "timings")}
    return {"exchange": rec.get("exchange"), "api": rec.get("api"),
            "transcript": {**keep, "request_body": body, "frames": frames, "body": t.get("body") if not frames else None}}


def trim(src: Path, dst: Path, keep_instructions: bool = False) -> None:
    lines = src.read_text().splitlines()
    out = [lines[0]] + [json.dumps(trim_record(json.loads(ln), keep_instructions)) for ln in lines[1:] if ln.strip()]
    dst.write_text("\n".join(out) + "\n")


if __name__ == "__main__":
    clients, prof = Path(sys.argv[1]), Path(sys.argv[2])
    HERE.mkdir(exist_ok=True)
    for name in ("claude-code", "codex", "openclaw"):
        for turn in ("text", "tool"):
            trim(clients / name / turn / "capture.jsonl", HERE / f"{name}-{turn}.capture.jsonl")
    for i in (0, 1):
        trim(prof / f"model{i}" / "text" / "capture.jsonl", HERE / f"profile{i}-first.capture.jsonl", True)
        trim(prof / f"model{i}" / "long-output" / "capture.jsonl", HERE / f"profile{i}-long.capture.jsonl")
        shutil.copy(prof / f"model{i}" / "text" / "stdout.txt", HERE / f"profile{i}-stdout.txt")
