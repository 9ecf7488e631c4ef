"""The real clients' own traffic, captured as request-shape fixtures (issue 30).

``SESSIONS`` names one full tool session per client configuration: Claude Code (Messages), Codex under
the gpt-5.5 catalog profile and under the fallback profile ``openai/openai/gpt-5.5`` (Responses), and
OpenClaw over each of its APIs (anthropic-messages, openai-responses, openai-completions). Each is one
run of the client with a prompt that has the scripted reference model call the client's shell tool
twice and then answer (three model requests: the history grows by a call and its result each time,
and every answer, reasoning and tool call included, comes back in the next request in the client's
own form).

``capture_session(spec, inst, endpoint, work)`` runs it through the capture proxy (``turns.run_turn``);
``fixture_from_capture(records, spec, version)`` makes the fixture that ships in
``scenarios/clients/`` (read by ``harnesscheck.scenarios.client_sessions``, replayed by
conformance/test_client_sessions.py):

- only the model requests, in order, each with its path (query string kept: ``?beta=true``), the
  headers a replay sends again (no credentials, no transport or volatile client headers) and its JSON
  body; and the server's answer as the list of its SSE data events (or its JSON body);
- secrets: the proxy already redacts credential headers and their values wherever they appear; the
  fixture also drops every header named like a credential or a session, replaces the throwaway run
  folders (the clients' cwd and HOME, in their system prompts) with ``/work`` and the capturing user's
  home with ``/home/user``, every UUID the client made up (session, thread, installation ids, in
  headers and bodies) with a fixed one, and ``metadata.user_id`` / ``prompt_cache_key`` with a name;
- trimmed: a string longer than ``MAX_STRING`` characters (system prompts, tool descriptions) is cut
  to that length with a marker, except strings the server answered (they must match in the replay's
  round trip); the shape, every key and every type, stays the client's.

``refresh(out, runs)`` re-captures every session with the installed clients (``harnesscheck clients
--refresh-fixtures``) and writes the fixtures; ``stale(folder)`` lists the shipped fixtures older than
the installed client (tests/clients/test_fixtures_fresh.py).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harnesscheck.agents.clients import DUMMY_KEY, get_client
from harnesscheck.agents.clients.install import Install
from harnesscheck.scenarios import client_sessions

MAX_STRING = 160  # characters kept of a long string the client wrote (system prompt, tool description)
WORK = "/work"  # what the throwaway run folder becomes in a fixture
COMMAND = "echo harnesscheck-$((6*7))"
PROMPT = "Use the {tool} tool to run `{command}` 2 times, one call at a time, then say what it printed."
DEFAULT_MODEL = "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4"
FAST = ("--decode-ms", "0", "--ttft-base-ms", "0", "--prefill-us-per-token", "0")
# headers a replay never sends again: credentials, transport, and what the client makes up per run
DROP_HEADERS = re.compile(r"^(host|content-length|content-encoding|accept-encoding|connection|user-agent|"
                          r"x-stainless-.*|authorization|x-api-key|api-key|cookie|proxy-.*|.*token.*|.*secret.*|"
                          r".*session.*|x-client-request-id|x-request-id|traceparent|baggage|sentry-trace)$", re.I)


@dataclass(frozen=True, slots=True)
class SessionSpec:
    name: str  # the fixture's name (scenarios/clients/<name>.json)
    client: str  # claude-code, codex, openclaw
    api: str | None  # the client's wire API (None: its default)
    model: str  # the model id the client asks for (for Codex it picks the catalog profile)
    profile: str = ""  # what the model id means to the client ("gpt-5.5 catalog profile", ...)


SESSIONS = (
    SessionSpec("claude-code", "claude-code", None, DEFAULT_MODEL),
    SessionSpec("codex-gpt-5.5", "codex", None, "gpt-5.5", "gpt-5.5 catalog profile"),
    SessionSpec("codex-fallback", "codex", None, "openai/openai/gpt-5.5", "fallback metadata (not in the catalog)"),
    SessionSpec("openclaw-anthropic", "openclaw", "anthropic", DEFAULT_MODEL),
    SessionSpec("openclaw-responses", "openclaw", "responses", DEFAULT_MODEL),
    SessionSpec("openclaw-chat", "openclaw", "chat", DEFAULT_MODEL),
)


def spec(name: str) -> SessionSpec:
    for s in SESSIONS:
        if s.name == name:
            return s
    raise KeyError(f"unknown session {name!r} (known: {', '.join(s.name for s in SESSIONS)})")


def capture_session(session: SessionSpec, inst: Install, endpoint: str, work: Path, *,
                    timeout: float = 300.0) -> Any:
    """Run the session's client once through the capture proxy (a TurnResult; its capture in ``work``)."""
    from harnesscheck.agents.clients import turns

    client = get_client(session.client, session.api)
    prompt = PROMPT.format(tool=client.tool, command=COMMAND)
    return turns.run_turn(client, inst, endpoint, session.model, work, turn="tool", prompt=prompt,
                          api_key=DUMMY_KEY, timeout=timeout)


# -- capture -> fixture ----------------------------------------------------------------------------

def _events(t: dict[str, Any]) -> list[Any]:
    """A recorded answer: its SSE data events (JSON, or "[DONE]"), else its JSON body as one item."""
    from harnesscheck.agents.clients import turns

    out: list[Any] = []
    for f in t.get("frames") or []:
        if turns.frame_type(f) == "[DONE]":
            out.append("[DONE]")
            continue
        data = turns._frame_json(f)
        if data is not None:
            out.append(data)
    if out:
        return out
    body = t.get("body")
    text = body.get("text") if isinstance(body, dict) else body
    try:
        return [json.loads(text)] if isinstance(text, str) and text else []
    except ValueError:
        return [text]


def _answer_strings(events: list[Any]) -> set[str]:
    """Every string value of the server's answers (ids, texts, signatures, arguments): kept whole."""
    return set(client_sessions.strings(events))


_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_TMP = re.compile(r"/tmp/[A-Za-z0-9._-]+")  # a throwaway folder of the run (the clients' cwd and HOME)
_ROOT_HOME = re.compile(r"(?<![\w/.-])/root\b")  # the capturing user's home
RUN_KEYS = ("user_id", "prompt_cache_key", "session_id", "conversation_id")  # made up per run


class _Sanitizer:
    """Redacts and trims one session's strings the same way throughout (module doc)."""

    def __init__(self, keep: set[str], work: str | None) -> None:
        self.keep = keep  # the server's answer strings: never changed
        self.work = work
        self.ids: dict[str, str] = {}

    def _id(self, match: re.Match[str]) -> str:
        return self.ids.setdefault(match.group(0), f"00000000-0000-4000-8000-{len(self.ids) + 1:012d}")

    def text(self, value: str, *, trim: bool = True) -> str:
        if value in self.keep:
            return value
        if self.work:
            value = value.replace(self.work, WORK)
        value = _ROOT_HOME.sub("/home/user", _TMP.sub(WORK, value))
        value = _UUID.sub(self._id, value)
        if trim and len(value) > MAX_STRING:
            return value[:MAX_STRING] + client_sessions.TRIM_MARK
        return value

    def __call__(self, value: Any, *, trim: bool = True) -> Any:
        if isinstance(value, str):
            return self.text(value, trim=trim)
        if isinstance(value, dict):
            return {k: (f"harnesscheck-{k.replace('_', '-')}" if k in RUN_KEYS and isinstance(v, str)
                        else self(v, trim=trim)) for k, v in value.items()}
        if isinstance(value, list):
            return [self(v, trim=trim) for v in value]
        return value


RESPONSE_KEPT = ("id", "object", "status", "model", "output", "usage", "error", "incomplete_details")


def _lean_answer(events: list[Any]) -> list[Any]:
    """A recorded answer without what a Responses stream echoes of the request (tools, instructions, ...):
    each event's ``response`` keeps only what the answer itself says (RESPONSE_KEPT)."""
    out = []
    for e in events:
        if isinstance(e, dict) and isinstance(e.get("response"), dict):
            e = {**e, "response": {k: v for k, v in e["response"].items() if k in RESPONSE_KEPT}}
        out.append(e)
    return out


def fixture_from_capture(records: list[dict[str, Any]], session: SessionSpec, version: str, *,
                         work: str | None = None) -> dict[str, Any]:
    """The fixture document of one captured session (module doc). ``work``: the run folder to replace."""
    from harnesscheck.agents.clients import turns

    models = [t for t in records if turns.is_model_request(t)]
    answers = [_lean_answer(_events(t)) for t in models]
    clean = _Sanitizer(_answer_strings(answers), work)
    exchanges = []
    for t, events in zip(models, answers):
        headers = {k.lower(): clean(v, trim=False) for k, v in (t.get("request_headers") or {}).items()
                   if not DROP_HEADERS.match(k) and "[REDACTED]" not in str(v)}
        exchanges.append({"method": "POST", "path": t.get("url"), "headers": headers,
                          "body": clean(t.get("request_body")), "status": t.get("status"),
                          "answer": clean(events)})
    client = get_client(session.client, session.api)
    return {"schema": client_sessions.SCHEMA, "version": client_sessions.VERSION, "name": session.name,
            "client": session.client, "label": client.label.split(" (")[0], "client_version": version,
            "api": client.api, "model": session.model, "profile": session.profile,
            "captured": time.strftime("%Y-%m-%d", time.gmtime()),
            "notes": f"strings over {MAX_STRING} characters cut ({client_sessions.TRIM_MARK.strip()}); the run "
                     f"folder written as {WORK}; per-run ids fixed; credential and volatile headers dropped",
            "exchanges": client_sessions.compress(exchanges)}


def check_fixture(doc: dict[str, Any]) -> list[str]:
    """What makes a captured session unfit to ship: fewer than three model requests, a refused one, no
    tool call answered and sent back (the round trip), a credential left in it."""
    problems = []
    exchanges = doc.get("exchanges") or []
    if len(exchanges) < 3:
        problems.append(f"{len(exchanges)} model request(s); a tool session has at least 3")
    problems += [f"request {i}: HTTP {x.get('status')}" for i, x in enumerate(exchanges) if x.get("status") != 200]
    text = json.dumps(doc)
    if DUMMY_KEY in text:
        problems.append("the API key is in the fixture")
    return problems


# -- refresh and staleness -------------------------------------------------------------------------------

def refresh(out: Path, *, names: tuple[str, ...] = (), work: Path | None = None, timeout: float = 300.0,
            progress: Callable[[str], None] | None = None) -> dict[str, str]:
    """Capture every session (or ``names``) with the installed clients against a fresh reference server and
    write the fixtures into ``out``; returns {name: what happened} (written, skipped: why, or refused: why)."""
    import tempfile

    from harnesscheck.agents.clients import install, turns
    from harnesscheck.reference_server.launch import ServerProcess

    chosen = [s for s in SESSIONS if not names or s.name in names]
    models = sorted({s.model for s in chosen})
    report: dict[str, str] = {}
    base = work or Path(tempfile.mkdtemp(prefix="hc-fixtures-"))
    args = [*FAST, *(a for m in models for a in ("--model-id", m))]
    with ServerProcess(args) as server:
        for session in chosen:
            client = get_client(session.client, session.api)
            inst = install.installed(client.install_name)
            why = "not installed" if inst is None else (inst.skip or install.runnable(client.install_name, inst))
            if why or inst is None:
                report[session.name] = f"skipped: {why}"
                continue
            folder = base / session.name
            result = capture_session(session, inst, server.url, folder, timeout=timeout)
            doc = fixture_from_capture(turns.load_records(result.capture), session, inst.version,
                                       work=str(folder.resolve()))
            problems = check_fixture(doc) + ([] if result.ok else [f"the client's turn failed: {result.error[:200]}"])
            if problems:
                report[session.name] = "refused: " + "; ".join(problems)
            else:
                client_sessions.write(doc, out)
                report[session.name] = f"written ({len(doc['exchanges'])} requests, {inst.version})"
            if progress:
                progress(f"{session.name}: {report[session.name]}")
    return report


def stale(folder: Path | None = None) -> list[tuple[str, str, str]]:
    """(fixture, shipped client version, installed version) for each shipped fixture whose client is
    installed in another version; clients not installed are left out."""
    from harnesscheck.agents.clients import install

    out = []
    for doc in client_sessions.load_all(folder):
        client = get_client(doc["client"], None)
        inst = install.installed(client.install_name)
        if inst is not None and inst.version and inst.version != doc["client_version"]:
            out.append((doc["name"], doc["client_version"], inst.version))
    return out
