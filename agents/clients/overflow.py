"""What the real clients do when their session outgrows the context window (issue 30).

``run_case(client, inst, case, work)`` starts a reference server with a small context window
(``--context-window``) and one case's fault, and runs the client once with a prompt that makes the
scripted model call the client's shell tool again and again ("... `seq 1 3000` 40 times"): every
call adds its output to the history, so the prompt grows until the window refuses it. The capture
proxy records every request; ``observe`` reads the capture:

- the model requests in order, each with its history length, its size and status, the prompt total
  the endpoint reported for it, and whether it was refused for its length (any 4xx/5xx on a
  request at least as large as the window);
- compactions: a model request whose history is shorter than the one before it (the client
  replaced its history with a summary); Claude Code asks for the summary in a request of its own,
  found by its wording ("summary" in the last user text);
- the signal the client compacted on: ``usage`` (before any refusal: its context meter, fed by
  the usage the endpoint reported, crossed its threshold), ``refusal`` (after a refusal), or none;
- the client's end: its exit status, final text and error.

Cases (``CASES``): ``correct`` (the API's own refusal), ``detail`` / ``500`` / ``bare-400`` (the
overflow faults), ``zero-input-tokens`` (message_start ``input_tokens: 0``, Anthropic only) and
``current-turn-only`` (usage counts only the new turn's input). ``run_overflow`` runs a list of cases
for each client and returns the table that docs/API_FACTS.md "Context overflow" records;
``harnesscheck clients --overflow`` runs it.

Client settings for a small window: Claude Code takes ``CLAUDE_CODE_AUTO_COMPACT_WINDOW`` (at least
100000 tokens, read from the client), so its usage cases run a window above that; Codex takes
``model_context_window`` and ``model_auto_compact_token_limit`` in config.toml.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harnesscheck.agents.clients import DUMMY_KEY, Client
from harnesscheck.agents.clients.install import Install
from harnesscheck.reference_server.faults import FAULTS

# case -> (reference-server faults, what it plants)
CASES: dict[str, tuple[tuple[str, ...], str]] = {
    "correct": ((), "the API's own refusal (Anthropic 'prompt is too long: N tokens > M maximum'; OpenAI 400 "
                    "code context_length_exceeded)"),
    "detail": (("overflow-detail-shape",), "{'detail': 'Prompt too long: ...'} with status 400"),
    "500": (("overflow-500",), "a 500 in the API's error shape, no overflow marker"),
    "bare-400": (("overflow-bare-400",), "a 400 in the API's error shape without the marker"),
    "stream-error": (("overflow-stream-error",), "HTTP 200, then the API's in-stream error (Anthropic event: error "
                                                 "api_error, Responses response.failed server_error), no marker"),
    "usage-correct": ((), "usage counted right, a window above the client's own compaction threshold"),
    "zero-input-tokens": (("message-start-zero-input-tokens",), "message_start usage.input_tokens 0"),
    "current-turn-only": (("usage-current-turn-only",), "usage counts only the new turn's input"),
    # the client compacts on its own near the window, and its compaction request is itself over the window
    # (Codex, measured): each overflow form again, met by that request
    "compact-detail": (("overflow-detail-shape",), "as detail, the client's own compaction request refused"),
    "compact-500": (("overflow-500",), "as 500, the client's own compaction request refused"),
    "compact-bare-400": (("overflow-bare-400",), "as bare-400, the client's own compaction request refused"),
    "compact-stream-error": (("overflow-stream-error",), "as stream-error, the client's own compaction request "
                                                         "refused"),
}
FORM_CASES = ("correct", "detail", "500", "bare-400", "stream-error")
USAGE_CASES = ("usage-correct", "zero-input-tokens", "current-turn-only")
COMPACT_CASES = ("compact-detail", "compact-500", "compact-bare-400", "compact-stream-error")
COMMAND = "seq 1 3000"  # 13,893 bytes of output per call
REPEATS = 40
FAST = ("--decode-ms", "0", "--ttft-base-ms", "0", "--prefill-us-per-token", "0")
# Claude Code reads CLAUDE_CODE_AUTO_COMPACT_WINDOW as at least 100000 tokens: the usage cases run a window
# above its threshold, the form cases one it reaches long before its own meter would compact.
WINDOWS = {"claude-code": {"form": 60000, "usage": 150000}, "codex": {"form": 56000, "usage": 56000}}


@dataclass
class Request:
    index: int
    entries: int  # history entries (messages / input items)
    chars: int  # request body size
    status: int | None
    error: str = ""  # the refusal's body (excerpt) when refused
    prompt_tokens: int | None = None  # what the endpoint reported (usage prompt total), if answered
    summary: bool = False  # the client asked for a summary of the conversation (a compaction request)


@dataclass
class Observation:
    client: str
    version: str
    case: str
    window: int
    faults: tuple[str, ...]
    seconds: float = 0.0
    rc: int | None = None
    timed_out: bool = False
    final_text: str = ""
    client_error: str = ""
    requests: list[Request] = field(default_factory=list)
    refusals: list[int] = field(default_factory=list)  # request indices refused
    compactions: list[int] = field(default_factory=list)  # request indices where the history shrank
    signal: str | None = None  # usage | refusal | None
    outcome: str = ""  # one line: what the client did

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _history(body: Any) -> list[Any]:
    if not isinstance(body, dict):
        return []
    for key in ("messages", "input"):
        if isinstance(body.get(key), list):
            return body[key]
    return []


def _last_user_text(body: Any) -> str:
    for entry in reversed(_history(body)):
        if isinstance(entry, dict) and entry.get("role") == "user":
            content = entry.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):
                return " ".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
    return ""


def _prompt_total(usage: dict[str, Any]) -> int | None:
    if not usage:
        return None
    if "prompt_tokens" in usage:
        return int(usage.get("prompt_tokens") or 0)
    return sum(int(usage.get(k) or 0) for k in ("input_tokens", "cache_read_input_tokens",
                                                "cache_creation_input_tokens"))


def observe(records: list[dict[str, Any]], window: int) -> tuple[list[Request], list[int], list[int], str | None]:
    """The model requests of a capture, the refused ones, the compactions and the signal (module doc)."""
    from harnesscheck.agents.clients import turns

    out: list[Request] = []
    for t in records:
        if not turns.is_model_request(t):
            continue
        body = t.get("request_body")
        req = Request(index=len(out), entries=len(_history(body)), chars=len(json.dumps(body)),
                      status=t.get("status"))
        req.summary = "summary" in _last_user_text(body).lower()
        if t.get("status") is None or t["status"] >= 400:
            text = (t.get("body") or {}).get("text") if isinstance(t.get("body"), dict) else t.get("body")
            req.error = str(text or t.get("error") or "")[:300]
        else:
            errors = turns.stream_errors(t)
            if errors:
                req.error = errors[0][:300]
            answer = turns.answer_of(t)
            if isinstance(answer, dict) and isinstance(answer.get("response"), dict):  # a Responses stream's fold
                answer = {**answer["response"], "output": answer.get("output")}
            api = turns.api_of(t)
            if answer is not None and api is not None:
                try:
                    req.prompt_tokens = _prompt_total(api.usage(answer))
                except (LookupError, TypeError, ValueError):
                    req.prompt_tokens = None
        out.append(req)
    refused = [r.index for r in out if r.error]
    compacted = [r.index for r in out[1:] if r.entries < out[r.index - 1].entries and not out[r.index - 1].summary
                 or r.summary]
    signal = None
    if compacted:
        signal = "refusal" if refused and refused[0] < compacted[0] else "usage"
    return out, refused, compacted, signal


def outcome_line(obs: Observation) -> str:
    """One line for the table: compacted (on which signal) and finished, or broke (with the client's error)."""
    parts = []
    if obs.compactions:
        parts.append(f"compacted on {obs.signal} (request {obs.compactions[0]})")
    else:
        parts.append("no compaction")
    if obs.refusals:
        parts.append(f"{len(obs.refusals)} refused request(s) (first: #{obs.refusals[0]})")
    ok = obs.rc == 0 and not obs.client_error and not obs.timed_out
    parts.append("finished (exit 0)" if ok else "timed out" if obs.timed_out else
                 f"broke (exit {obs.rc}): {obs.client_error[:200]!r}")
    return "; ".join(parts)


def run_case(client: Client, inst: Install, case: str, work: Path, *, window: int | None = None,
             model: str = "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4", repeats: int = REPEATS,
             timeout: float = 600.0) -> Observation:
    """Run one case (see CASES) for one client; the capture and the client's output are left in ``work``."""
    from harnesscheck.agents.clients import turns
    from harnesscheck.reference_server.launch import ServerProcess
    from harnesscheck.replay.capture import ProxyThread

    faults = CASES[case][0]
    kind = "usage" if case in USAGE_CASES + COMPACT_CASES else "form"
    window = window or WINDOWS.get(client.name, {}).get(kind, 60000)
    work.mkdir(parents=True, exist_ok=True)
    obs = Observation(client.name, inst.version, case, window, faults)
    prompt = f"Use the {client.tool} tool to run `{COMMAND}` {repeats} times, one call at a time."
    args = [*FAST, "--context-window", str(window), "--model-id", model, *(f"--fault={f}" for f in faults)]
    cap = work / "capture.jsonl"
    with ServerProcess(args) as server, ProxyThread(upstream=server.url, out=cap) as proxy:
        prep = client.prepare(inst, work, proxy.url, model, DUMMY_KEY)
        _tune(client, prep, window, kind)
        cmd = client.command(inst, prep, prompt, model)
        t0 = time.time()
        rc, out, err, timed_out = turns._run(cmd, prep.env, prep.cwd, timeout)
        obs.seconds = round(time.time() - t0, 1)
    (work / "stdout.txt").write_text(out)
    (work / "stderr.txt").write_text(err)
    parsed = client.parse(out, err, rc if rc is not None else -9)
    obs.rc, obs.timed_out, obs.final_text = rc, timed_out, parsed.final_text[:300]
    obs.client_error = parsed.error[:600] if parsed.is_error else ""
    obs.requests, obs.refusals, obs.compactions, obs.signal = observe(turns.load_records(cap), window)
    obs.outcome = outcome_line(obs)
    (work / "observation.json").write_text(json.dumps(obs.to_dict(), indent=1))
    return obs


def _tune(client: Client, prep: Any, window: int, kind: str) -> None:
    """Tell the client its window: Claude Code's auto-compact window (usage cases), Codex's config."""
    if client.name == "claude-code" and kind == "usage":
        prep.env["CLAUDE_CODE_AUTO_COMPACT_WINDOW"] = str(max(100000, window - 20000))
    if client.name == "codex":  # the form cases: Codex believes in a window 4x the server's, so the refusal
        # comes before its own compaction; the usage cases: the server's window, compaction at 80%
        believed = window if kind == "usage" else 4 * window
        path = Path(prep.env["CODEX_HOME"]) / "config.toml"
        head = (f"model_context_window = {believed}\n"
                f"model_auto_compact_token_limit = {int(believed * 0.8)}\n")
        path.write_text(head + path.read_text())


DEFAULT_CLIENTS: tuple[tuple[str, str | None], ...] = (("claude-code", None), ("codex", None))
DEFAULT_CASES = (*FORM_CASES, *USAGE_CASES, *COMPACT_CASES)
# the model ids each client runs under: Codex under its gpt-5.5 catalog profile and its fallback profile
MODELS = {"claude-code": ("nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4",),
          "codex": ("gpt-5.5", "openai/openai/gpt-5.5"), "openclaw": ("nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4",)}


def applies(client: Client, case: str) -> bool:
    """Whether a case means something for a client: its faults bend the client's API (the fault's own
    ``apis``: message_start is Anthropic's); only Codex sends a compaction request the window can refuse
    (Claude Code compacts first, measured)."""
    if not all(FAULTS[f].bends(client.api) for f in CASES[case][0]):
        return False
    if case in COMPACT_CASES:
        return client.name == "codex"
    return True


def run_overflow(out: Path, *, clients: tuple[tuple[str, str | None], ...] = DEFAULT_CLIENTS,
                 cases: tuple[str, ...] = DEFAULT_CASES, timeout: float = 600.0,
                 progress: Any = None, first_model_only: bool = False) -> dict[str, Any]:
    """Every case for every installed client, under each of its model ids (MODELS; only the first with
    ``first_model_only``; the cache only: nothing is installed here); the document docs/API_FACTS.md
    records: {"clients": {key: version}, "skipped": {key: why}, "cases": {"key model": {case: observation}}}."""
    from harnesscheck.agents.clients import prepare_clients

    prepared, skipped = prepare_clients(clients, install_missing=False)
    doc: dict[str, Any] = {"clients": {}, "skipped": skipped, "cases": {}}
    for key, client, inst in prepared:
        doc["clients"][key] = inst.version
        for model in MODELS.get(client.name, MODELS["claude-code"])[:1 if first_model_only else None]:
            for case in (c for c in cases if applies(client, c)):
                folder = out / key / model.replace("/", "_") / case
                obs = run_case(client, inst, case, folder, model=model, timeout=timeout)
                doc["cases"].setdefault(f"{key} {model}", {})[case] = obs.to_dict()
                if progress:
                    progress(f"{client.label} {inst.version} ({model}) [{case}] {obs.outcome}")
    return doc
