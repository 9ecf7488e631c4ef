"""The real clients' recorded tool sessions (``scenarios/clients/*.json``): their own requests, turn by
turn, with the answers the reference server gave when they were captured.

One file per client configuration (Claude Code; Codex under the gpt-5.5 catalog profile and under the
fallback profile; OpenClaw over each of its APIs), made by ``harnesscheck clients --refresh-fixtures``
(harnesscheck.agents.clients.fixtures, which says how they are captured, redacted and trimmed) and
replayed by conformance/test_client_sessions.py. A document::

    {"schema": "harnesscheck.client-session", "version": 1, "name": "claude-code",
     "client": "claude-code", "label": "Claude Code", "client_version": "2.1.197", "api": "anthropic",
     "model": "...", "profile": "", "captured": "2026-12-03", "notes": "...",
     "exchanges": [{"method": "POST", "path": "/v1/messages?beta=true", "headers": {...}, "body": {...},
                    "status": 200, "answer": [<SSE data events, or the JSON body>]}, ...]}
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

SCHEMA = "harnesscheck.client-session"
VERSION = 1
FOLDER = Path(__file__).resolve().parent / "clients"
TRIM_MARK = " [...trimmed by harnesscheck]"  # what a string cut in a fixture ends with


def strings(value: Any) -> Iterator[str]:
    """Every string inside a recorded JSON value (a body, an answer's events), depth first."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings(v)


def _check(doc: Any, where: str) -> dict[str, Any]:
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise ValueError(f"{where}: not a client session (schema {doc.get('schema') if isinstance(doc, dict) else doc!r})")
    if doc.get("version") != VERSION:
        raise ValueError(f"{where}: client session version {doc.get('version')!r}, this kit reads {VERSION}")
    for key in ("name", "client", "client_version", "api", "exchanges"):
        if key not in doc:
            raise ValueError(f"{where}: no {key!r}")
    return doc


HISTORY_KEYS = ("messages", "input")  # where a request keeps its conversation (Messages and Chat, Responses)
SAME, KEPT = "$same", "$kept"  # a stored body: keys equal to the request before's; its history entries kept


def _history_key(body: dict[str, Any]) -> str | None:
    return next((k for k in HISTORY_KEYS if isinstance(body.get(k), list)), None)


def compress(exchanges: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The exchanges as stored: each body after the first keeps only what differs from the body before
    (``$same``: the keys it repeats; ``$kept``: how many history entries it repeats before its own)."""
    out, before = [], None
    for x in exchanges:
        body = x.get("body")
        if isinstance(body, dict) and isinstance(before, dict):
            stored: dict[str, Any] = {SAME: [k for k in body if k in before and before[k] == body[k]]}
            key = _history_key(body)
            if key and key in before and isinstance(before[key], list) and key not in stored[SAME]:
                n = 0
                while n < min(len(body[key]), len(before[key])) and body[key][n] == before[key][n]:
                    n += 1
                stored[KEPT] = n
                stored[key] = body[key][n:]
            stored.update({k: v for k, v in body.items() if k not in stored[SAME] and k != key})
            x = {**x, "body": stored}
        out.append(x)
        before = body
    return out


def expand(exchanges: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The stored exchanges with every body whole again (``compress`` undone), key order as sent."""
    out, before = [], None
    for x in exchanges:
        body = x.get("body")
        if isinstance(body, dict) and SAME in body:
            if not isinstance(before, dict):
                raise ValueError("a stored body refers to a request before the first")
            same, kept = body[SAME], body.get(KEPT)
            whole = {k: before[k] for k in same}
            key = _history_key(before)
            if kept is not None and key is not None:
                whole[key] = before[key][:kept] + body.get(key, [])
            whole.update({k: v for k, v in body.items() if k not in (SAME, KEPT, key)})
            body = whole
            x = {**x, "body": body}
        out.append(x)
        before = body
    return out


def load(path: str | Path) -> dict[str, Any]:
    """A stored session with its exchanges' bodies whole (``expand``)."""
    path = Path(path)
    doc = _check(json.loads(path.read_text(encoding="utf-8")), str(path))
    return {**doc, "exchanges": expand(doc["exchanges"])}


def load_all(folder: str | Path | None = None) -> list[dict[str, Any]]:
    """Every session in ``folder`` (default: the shipped ones), by name."""
    return [load(p) for p in sorted(Path(folder or FOLDER).glob("*.json"))]


def get(name: str, folder: str | Path | None = None) -> dict[str, Any]:
    path = Path(folder or FOLDER) / f"{name}.json"
    if not path.exists():
        known = ", ".join(d["name"] for d in load_all(folder))
        raise KeyError(f"unknown client session {name!r} (known: {known})")
    return load(path)


def write(doc: dict[str, Any], folder: str | Path | None = None) -> Path:
    """Write a session (compact JSON, one exchange per line block) as ``<folder>/<name>.json``."""
    folder = Path(folder or FOLDER)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{_check(doc, doc.get('name', '?'))['name']}.json"
    path.write_text(json.dumps(doc, ensure_ascii=False, separators=(",", ":")) + "\n", encoding="utf-8")
    return path
