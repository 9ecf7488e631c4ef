"""Import and export of other tools' trace formats: AIPerf ``multi_turn`` and Mooncake.

AIPerf ``multi_turn`` JSONL (AIPerf's ``MultiTurn`` / ``SingleTurn`` models): one line per
conversation, ``{"session_id": ..., "turns": [{"text": ..., "delay": ms} | {"texts": [...],
"timestamp": ms}, ...]}``; lines with the same ``session_id`` add turns to one conversation; a turn
has ``timestamp`` (ms, fixed schedule) or ``delay`` (ms after the previous turn), not both. AIPerf
carries the model's answers itself, so an imported turn k > 0 is a delta ``append: [$answer,
{user text}]`` with no recorded response: replay uses the endpoint's answers for history.
What AIPerf can hold, and so what survives a round trip: session ids, the user text of each turn,
``timestamp``/``delay``.

Mooncake traces (and the session extension AIPerf and Dynamo read): one line per request,
``{"timestamp": ms, "input_length": N, "output_length": M, "hash_ids": [...]}``, plus optional
``session_id`` and ``delay`` (ms after the previous turn of the session). Prompts are synthesised:
each hash id is a block of ``block_size`` words drawn from a fixed vocabulary by a generator seeded
with the id (the last block cut so the prompt has ``input_length`` words), so requests sharing
hash ids share a text prefix. Export of a trace that did not come from Mooncake counts the
prompt's words (``\\w+`` or one punctuation mark each) and numbers its blocks by a hash chain, so
identical prefixes get identical ids. Round trip: timestamp, session, delay, input_length,
output_length and hash_ids.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .trace import ANSWER, DEFAULT_PATHS, Timing, Trace, TraceTurn, expand_session, history_key, is_answer_marker

__all__ = [
    "export_aiperf",
    "export_mooncake",
    "import_aiperf",
    "import_mooncake",
    "synth_prompt",
    "request_text",
]

DEFAULT_BLOCK_SIZE = 512
_VOCAB = (
    "the of and to in is for that on with as by this from be are at it or an was which not can more "
    "data model time system value state code file line test build cache token server client stream "
    "request answer result error check block prefix turn session tool call read write run list map "
    "key node path port user agent input output batch queue event frame delta shape score rate load"
).split()


def _lines(source: str | Path | Iterable[str]) -> list[tuple[int, dict[str, Any]]]:
    if isinstance(source, Path) or (isinstance(source, str) and "\n" not in source and Path(source).exists()):
        text = Path(source).read_text(encoding="utf-8").splitlines()
    elif isinstance(source, str):
        text = source.splitlines()
    else:
        text = list(source)
    out = []
    for n, ln in enumerate(text, 1):
        if not ln.strip():
            continue
        try:
            d = json.loads(ln)
        except ValueError as exc:
            raise ValueError(f"line {n}: not JSON: {exc}") from exc
        if not isinstance(d, dict):
            raise ValueError(f"line {n}: expected a JSON object")
        out.append((n, d))
    return out


def _request(api: str, model: str, messages: list[dict[str, Any]], max_tokens: int | None) -> dict[str, Any]:
    if api == "anthropic":
        return {"model": model, "max_tokens": max_tokens or 1024, "messages": messages, "stream": True}
    if api == "responses":
        body: dict[str, Any] = {"model": model, "input": messages, "stream": True}
        if max_tokens:
            body["max_output_tokens"] = max(max_tokens, 16)  # OpenAI's minimum for Responses
        return body
    body = {"model": model, "messages": messages, "stream": True, "stream_options": {"include_usage": True}}
    if max_tokens:
        body["max_tokens"] = max_tokens
    return body


# -- text of a turn ----------------------------------------------------------------------------

def _entry_text(entry: Any) -> str:
    if not isinstance(entry, dict):
        return ""
    content = entry.get("content", entry.get("output"))
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content or ():
        if isinstance(block, dict):
            if isinstance(block.get("text"), str):
                parts.append(block["text"])
            elif block.get("type") == "tool_result":
                parts.append(_entry_text(block))
    return "\n".join(p for p in parts if p)


def _is_model_entry(api: str, e: Any) -> bool:
    if not isinstance(e, dict):
        return False
    if e.get("role") == "assistant":
        return True
    return api == "responses" and e.get("type") in ("reasoning", "function_call")


def turn_text(turn: TraceTurn, full: dict[str, Any] | None = None) -> str:
    """The new client text a turn adds (user text, tool results), for formats that hold only text."""
    if turn.delta is not None:
        entries = [e for e in turn.delta.get("append") or () if not is_answer_marker(e)]
    else:
        hist = (turn.request or full or {}).get(history_key(turn.api))
        if isinstance(hist, str):
            return hist
        hist = hist or []
        if turn.turn > 0:
            last_model = max((i for i, e in enumerate(hist) if _is_model_entry(turn.api, e)), default=-1)
            hist = hist[last_model + 1:]
        entries = [e for e in hist if not (isinstance(e, dict) and e.get("role") in ("system", "developer"))]
    return "\n".join(t for t in (_entry_text(e) for e in entries if not _is_model_entry(turn.api, e)) if t)


def request_text(api: str, body: dict[str, Any]) -> str:
    """All the prompt text of a request (system, tools, history), for token counting."""
    parts: list[str] = []
    for key in ("system", "instructions"):
        v = body.get(key)
        if isinstance(v, str):
            parts.append(v)
        elif isinstance(v, list):
            parts += [b.get("text", "") for b in v if isinstance(b, dict)]
    if body.get("tools"):
        parts.append(json.dumps(body["tools"], sort_keys=True))
    hist = body.get(history_key(api))
    if isinstance(hist, str):
        parts.append(hist)
    else:
        for e in hist or ():
            parts.append(_entry_text(e) or json.dumps(e, sort_keys=True))
    return "\n".join(parts)


# -- AIPerf ---------------------------------------------------------------------------------

def _aiperf_text(t: dict[str, Any], where: str) -> str:
    if isinstance(t.get("text"), str):
        return t["text"]
    texts = t.get("texts")
    if isinstance(texts, list):
        out: list[str] = []
        for x in texts:
            if isinstance(x, str):
                out.append(x)
            elif isinstance(x, dict):
                out += [str(c) for c in x.get("contents") or x.get("content") or []]
        return "\n\n".join(out)
    raise ValueError(f"{where}: a turn needs 'text' or 'texts' (images and audio are not replayed)")


def import_aiperf(source: str | Path | Iterable[str], *, api: str = "chat", model: str = "") -> Trace:
    sessions: dict[str, list[dict[str, Any]]] = {}
    for n, d in _lines(source):
        turns = d.get("turns")
        if not isinstance(turns, list) or not turns:
            raise ValueError(f"line {n}: 'turns' must be a non-empty list")
        sid = str(d.get("session_id") or f"aiperf-{n}")
        for k, t in enumerate(turns):
            if not isinstance(t, dict):
                raise ValueError(f"line {n} turn {k}: expected an object")
            if t.get("timestamp") and t.get("delay"):
                raise ValueError(f"line {n} turn {k}: 'timestamp' and 'delay' cannot be set together")
            sessions.setdefault(sid, []).append({**t, "_text": _aiperf_text(t, f"line {n} turn {k}")})
    out: list[TraceTurn] = []
    for sid, turns in sessions.items():
        for k, t in enumerate(turns):
            msg = {"role": "user", "content": t["_text"]}
            timing = Timing(at_ms=t.get("timestamp"), think_ms=float(t.get("delay") or 0))
            tt = TraceTurn(session=sid, turn=k, api=api, path=DEFAULT_PATHS[api], timing=timing,
                           synthetic={"format": "aiperf", **({"role": t["role"]} if t.get("role") else {})})
            if k == 0:
                tt.request = _request(api, model, [msg], t.get("max_tokens"))
            else:
                tt.delta = {"base": "previous", "append": [dict(ANSWER), msg]}
            out.append(tt)
    return Trace.build(out, source="aiperf")


def export_aiperf(trace: Trace) -> str:
    lines = []
    for s in trace.sessions:
        fulls = _safe_expand(s.turns)
        turns = []
        for t, full in zip(s.turns, fulls, strict=True):
            d: dict[str, Any] = {"text": turn_text(t, full)}
            if t.timing.at_ms is not None:
                d["timestamp"] = _int(t.timing.at_ms)
            elif t.timing.think_ms + t.timing.tool_ms > 0:
                d["delay"] = _int(t.timing.think_ms + t.timing.tool_ms)
            role = (t.synthetic or {}).get("role")
            if role:
                d["role"] = role
            turns.append(d)
        lines.append(json.dumps({"session_id": s.id, "turns": turns}, ensure_ascii=False))
    return "\n".join(lines) + ("\n" if lines else "")


def _int(v: float) -> int | float:
    return int(v) if float(v).is_integer() else v


def _safe_expand(turns: list[TraceTurn]) -> list[dict[str, Any]]:
    answers = {t.turn: (t.response if t.response is not None else []) for t in turns}
    return expand_session(turns, answers)


# -- Mooncake -------------------------------------------------------------------------------

def _block_words(hash_id: int, n: int) -> list[str]:
    rng = random.Random(f"harnesscheck-block-{hash_id}")
    return [rng.choice(_VOCAB) for _ in range(n)]


def synth_prompt(input_length: int, hash_ids: list[int], block_size: int = DEFAULT_BLOCK_SIZE) -> str:
    """A prompt of ``input_length`` words; block i is seeded by ``hash_ids[i]`` (shared ids, shared prefix)."""
    words: list[str] = []
    for i, h in enumerate(hash_ids):
        need = min(block_size, input_length - len(words))
        if need <= 0:
            break
        words += _block_words(int(h), need)
    if len(words) < input_length:  # more tokens than blocks: pad with a block of its own
        words += _block_words(-len(hash_ids) - 1, input_length - len(words))
    return " ".join(words)


def import_mooncake(source: str | Path | Iterable[str], *, api: str = "chat", model: str = "",
                    block_size: int = DEFAULT_BLOCK_SIZE) -> Trace:
    out: list[TraceTurn] = []
    counts: dict[str, int] = {}
    for n, d in _lines(source):
        if "input_length" not in d and "text_input" not in d:
            raise ValueError(f"line {n}: needs 'input_length' (with 'hash_ids') or 'text_input'")
        if "input_length" in d and not isinstance(d.get("hash_ids"), list):
            raise ValueError(f"line {n}: 'hash_ids' (a list of integers) is required with 'input_length'")
        given = "session_id" in d
        sid = str(d["session_id"]) if given else f"m{n}"
        k = counts.get(sid, 0)
        counts[sid] = k + 1
        out_len = d.get("output_length")
        if "text_input" in d:
            prompt = str(d["text_input"])
            synthetic: dict[str, Any] = {"format": "mooncake", "text_input": True}
        else:
            prompt = synth_prompt(int(d["input_length"]), [int(h) for h in d["hash_ids"]], block_size)
            synthetic = {"format": "mooncake", "input_length": int(d["input_length"]),
                         "hash_ids": [int(h) for h in d["hash_ids"]], "block_size": block_size}
        if out_len is not None:
            synthetic["output_length"] = int(out_len)
        if given:
            synthetic["session_id"] = True
        timing = Timing(at_ms=d.get("timestamp"), think_ms=float(d.get("delay") or 0))
        out.append(TraceTurn(session=sid, turn=k, api=api, path=DEFAULT_PATHS[api], timing=timing,
                             request=_request(api, model, [{"role": "user", "content": prompt}], out_len),
                             synthetic=synthetic))
    return Trace.build(out, source="mooncake", meta={"block_size": block_size})


_TOKEN = re.compile(r"\w+|[^\w\s]")


def _hash_blocks(text: str, block_size: int, ids: dict[str, int]) -> tuple[int, list[int]]:
    tokens = _TOKEN.findall(text)
    out: list[int] = []
    prev = ""
    for i in range(0, len(tokens), block_size):
        h = hashlib.sha256((prev + "\x00" + " ".join(tokens[i:i + block_size])).encode()).hexdigest()
        prev = h
        out.append(ids.setdefault(h, len(ids)))
    return len(tokens), out


def export_mooncake(trace: Trace, *, block_size: int = DEFAULT_BLOCK_SIZE) -> str:
    ids: dict[str, int] = {}
    rows: list[tuple[float, int, dict[str, Any]]] = []
    seq = 0
    for s in trace.sessions:
        fulls = _safe_expand(s.turns)
        multi = len(s.turns) > 1
        for t, full in zip(s.turns, fulls, strict=True):
            syn = t.synthetic or {}
            d: dict[str, Any] = {}
            if multi or syn.get("session_id"):
                d["session_id"] = s.id
            if t.timing.at_ms is not None:
                d["timestamp"] = _int(t.timing.at_ms)
            if "input_length" in syn and "hash_ids" in syn:
                d["input_length"], d["hash_ids"] = syn["input_length"], list(syn["hash_ids"])
            elif syn.get("text_input"):
                d["text_input"] = request_text(t.api, full)
            else:
                d["input_length"], d["hash_ids"] = _hash_blocks(request_text(t.api, full), block_size, ids)
            out_len = syn.get("output_length", (t.meta or {}).get("output_tokens"))
            if out_len is None:
                out_len = full.get("max_tokens") or full.get("max_output_tokens")
            if out_len is not None:
                d["output_length"] = int(out_len)
            if t.timing.think_ms + t.timing.tool_ms > 0:
                d["delay"] = _int(t.timing.think_ms + t.timing.tool_ms)
            rows.append((seq, 0, d))
            seq += 1
    return "".join(json.dumps(d) + "\n" for _, _, d in rows)
