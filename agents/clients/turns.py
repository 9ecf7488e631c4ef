"""Run a real client for one turn through the capture proxy, and judge the capture.

``run_turn(client, inst, endpoint, model, work, prompt)`` starts a ``ProxyThread`` in front of the
endpoint (capture file ``<work>/capture.jsonl``, ``work`` made absolute), writes the client's
throwaway config in a private temporary folder (mode 0700, removed after the turn; the API key goes
through the client's environment, never into a file), runs the client's one-shot command in its own
process group with a time limit (the group is ended when the client exits, past the limit, or by
the guard process of ``agents.procgroup`` if the kit dies) and returns a ``TurnResult`` with the
client's own output (the key scrubbed) and the verdicts of ``capture_checks``:

- ``CL-ANSWERED``: every request the client made was answered without error: HTTP status < 400
  (except the WebSocket refusal, ``GET /v1/responses`` 426/405/404, which is a transport probe),
  no proxy/upstream error (a client hanging up after the stream's terminal event is none), no
  error frame in a stream (data ``type`` ``error`` / ``response.failed``, or an ``error`` object);
- ``CL-FINAL-TEXT``: the client exited 0, reported no error, and printed a final text;
- ``CL-TOOL-RUN`` (tool turns): the server's answer called the client's shell tool, and a later
  request carries the result of that call (non-empty, not an error): the client parsed the
  call, ran it and sent the output back. Whether the asked command's own output (``marker``)
  came back is reported beside it; the scripted reference model picks the command from the last
  user text, which OpenClaw replaces with its internal context, so there it runs ``echo ok``. A turn
  that names its tool (``kinds.TurnSpec.tool``) needs a call of that tool;
- ``CL-EFFECT`` (turns that change a file, ``kinds.TurnSpec.effect``): the file holds the new text
  after the turn (an edit the client only said it made is none);
- ``CL-IMAGE`` (``kinds.TurnSpec.image``): a tool result the client sent back carries an image block.

The turns each client runs are ``kinds.turns_for(client)``; ``run_client`` runs them.

Frames are judged by what the clients and SDKs dispatch on for completion: the data's ``type``
(``frame_type``). The SSE event name is read only where the data is not JSON: a stream without
``event:`` lines is as complete, and as erroneous, as one with them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harnesscheck.agents.clients import DUMMY_KEY, Client
from harnesscheck.agents.clients.install import Install
from harnesscheck.agents.clients.kinds import TEXT_PROMPT, TOOL_COMMAND, TOOL_MARKER, Effect, TurnSpec
from harnesscheck.agents.procgroup import guard
from harnesscheck.protocol import apis
from harnesscheck.protocol.wire.redact import redact_text

__all__ = ["TEXT_PROMPT", "TOOL_COMMAND", "TOOL_MARKER", "TurnCheck", "TurnResult", "capture_checks", "run_client",
           "run_turn", "turns_for"]
WS_PROBE_STATUSES = (404, 405, 426)
DEFAULT_TURN_TIMEOUT = 180.0


@dataclass
class TurnCheck:
    """One thing a client turn is judged on (CL-ANSWERED, CL-FINAL-TEXT, CL-TOOL-RUN): not a catalog
    check (conformance.catalog.Check), a verdict on the client's run."""

    id: str
    ok: bool
    detail: str = ""


@dataclass
class TurnResult:
    client: str
    label: str
    version: str
    api: str
    turn: str
    prompt: str
    model: str = ""  # the model id the client asked for
    tool: str = ""  # the tool the turn exercises ("" for a text turn)
    ok: bool = False
    rc: int | None = None
    seconds: float = 0.0
    timed_out: bool = False
    final_text: str = ""
    error: str = ""
    stdout_tail: str = ""
    stderr_tail: str = ""
    capture: str = ""
    requests: list[dict[str, Any]] = field(default_factory=list)
    checks: list[TurnCheck] = field(default_factory=list)
    first_post_s: float | None = None  # process start -> first POST of a model request
    ws_probes: int = 0
    marker_seen: bool | None = None
    skip: str = ""
    kit_error: str = ""  # the client could not be run at all (no verdict on the endpoint): why

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# -- reading a capture ------------------------------------------------------------------------

def load_records(path: str | Path) -> list[dict[str, Any]]:
    lines = [ln for ln in Path(path).read_text(encoding="utf-8").splitlines() if ln.strip()]
    return [json.loads(ln)["transcript"] for ln in lines[1:]]


def _frame_json(frame: dict[str, Any]) -> Any:
    if "json" in frame and frame["json"] is not None:
        return frame["json"]
    data = frame.get("data")
    if not isinstance(data, str) or not data or data.strip() == "[DONE]":
        return None
    try:
        return json.loads(data)
    except ValueError:
        return None


def is_model_request(t: dict[str, Any]) -> bool:
    """A POST to one of the APIs' model routes (``api_of``)."""
    return t.get("method") == "POST" and api_of(t) is not None


def is_ws_probe(t: dict[str, Any]) -> bool:
    path = (t.get("url") or "").split("?", 1)[0].rstrip("/")
    return t.get("method") == "GET" and path.endswith("/responses")


def frame_type(frame: dict[str, Any]) -> str | None:
    """What a frame is: the data's ``type``; ``"[DONE]"`` for the end marker; the SSE event name only
    where the data is not JSON (e.g. ``event: message_stop`` with empty data); None for JSON data
    without a string ``type`` (a Chat chunk)."""
    data = frame.get("data")
    if isinstance(data, str) and data.strip() == "[DONE]":
        return "[DONE]"
    d = _frame_json(frame)
    if d is None:
        return frame.get("event")
    typ = d.get("type") if isinstance(d, dict) else None
    return typ if isinstance(typ, str) else None


def stream_errors(t: dict[str, Any]) -> list[str]:
    """Error frames of a stream: data ``type`` ``error`` / ``response.failed``, or JSON data whose
    ``error`` is set and that has no ``type`` (how Chat streams report one; the OpenAI SDK raises on it)."""
    out = []
    for f in t.get("frames") or []:
        typ = frame_type(f)
        d = _frame_json(f)
        if typ in ("error", "response.failed") or (typ is None and isinstance(d, dict) and d.get("error")):
            out.append(f"{typ or 'error'}: {(f.get('data') or '')[:300]}")
    return out


def stream_complete(t: dict[str, Any]) -> bool:
    """The stream reached its terminal frame (the client may hang up right after it), by frame type: the
    API's ``ANSWER_ENDS`` (a request of no known API takes them all): a [DONE] does not end a Responses
    stream for Codex or the SDK, and response.failed is no answer."""
    api = api_of(t)
    ends = api.ANSWER_ENDS if api else tuple(x for m in apis.APIS.values() for x in m.ANSWER_ENDS)
    return any(frame_type(f) in ends for f in t.get("frames") or [])


def _same_id(a: str, b: str) -> bool:
    """Call ids match (a call without an id matches nothing); OpenClaw (Chat) strips non-alphanumerics
    from ids it sends back (call_9e6d -> call9e6d)."""
    return bool(b) and (a == b or re.sub(r"[^A-Za-z0-9]", "", a) == re.sub(r"[^A-Za-z0-9]", "", b))


def _hung_up(error: str) -> bool:
    return any(s in error for s in ("closing transport", "ConnectionReset", "Connection reset", "BrokenPipe"))


def api_of(t: dict[str, Any]) -> Any:
    """The API module (``protocol.apis``) of a request, by its route ("/messages", "/responses",
    "/chat/completions", with or without the /v1 the clients put before it); None for any other."""
    return apis.for_path(t.get("url") or "")


def answer_of(t: dict[str, Any]) -> dict[str, Any] | None:
    """The server's answer to a model request: its stream folded by the API's own ``accumulate`` (the
    frames' data; Chat's end marker as "[DONE]"), else the JSON body of a non-streamed answer."""
    api = api_of(t)
    if api is None:
        return None
    snap = None
    for f in t.get("frames") or []:
        event = "[DONE]" if frame_type(f) == "[DONE]" else _frame_json(f)
        if event is not None:
            snap = api.accumulate(event, snap)
    if snap is not None:
        return snap
    body = t.get("body")
    if isinstance(body, dict):  # Transcript.to_dict: {"b64", "text"}
        body = body.get("text")
    try:
        answer = json.loads(body) if isinstance(body, str) else None
    except ValueError:
        return None
    return answer if isinstance(answer, dict) else None


def tool_calls(t: dict[str, Any]) -> list[dict[str, str]]:
    """Tool calls the server's answer made: [{id, name, arguments}] in stream order, as the API module
    reads them (``apis.get(api).tool_calls``) from the folded stream or the non-streamed answer."""
    answer = answer_of(t)
    if answer is None:
        return []
    try:
        calls = api_of(t).tool_calls(answer)
    except (LookupError, TypeError):  # a non-streamed answer of the wrong shape: no call the client saw
        return []
    return [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in calls]


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, dict) and content.get("type") in IMAGE_TYPES:
        return "[image]"
    if isinstance(content, list):
        return "\n".join(_text_of(c.get("text") if isinstance(c, dict) and "text" in c else
                                  c if isinstance(c, dict) and c.get("type") in IMAGE_TYPES else
                                  c.get("output") if isinstance(c, dict) else c) for c in content)
    if isinstance(content, dict):
        return _text_of(content.get("text") or content.get("output") or "")
    return "" if content is None else str(content)


IMAGE_TYPES = ("image", "input_image", "image_url")  # an image block of a tool result (Messages, Responses, Chat)


def tool_results(body: Any) -> list[dict[str, Any]]:
    """Tool results a request carries: [{id, text, is_error}] (all three APIs); an image block reads as
    "[image]" in ``text``."""
    out: list[dict[str, Any]] = []
    if not isinstance(body, dict):
        return out
    for m in body.get("messages") or []:
        if not isinstance(m, dict):
            continue
        if m.get("role") == "tool":
            out.append({"id": str(m.get("tool_call_id")), "text": _text_of(m.get("content")), "is_error": False})
        content = m.get("content")
        if isinstance(content, list):
            for b in content:
                if isinstance(b, dict) and b.get("type") == "tool_result":
                    out.append({"id": str(b.get("tool_use_id")), "text": _text_of(b.get("content")),
                                "is_error": bool(b.get("is_error"))})
    items = body.get("input")
    if isinstance(items, list):
        for it in items:
            if isinstance(it, dict) and it.get("type") in ("function_call_output", "custom_tool_call_output"):
                out.append({"id": str(it.get("call_id")), "text": _text_of(it.get("output")), "is_error": False})
    return out


def request_summary(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"method": t.get("method"), "url": t.get("url"), "status": t.get("status"),
             "error": t.get("error"), "stream_errors": stream_errors(t)[:3], "tool_calls": tool_calls(t)}
            for t in records]


def capture_checks(records: list[dict[str, Any]], *, tool_turn: bool, rc: int | None, final_text: str,
                   client_error: str = "", marker: str = TOOL_MARKER, tool: str = "", image: bool = False,
                   effect: tuple[Effect, str | None] | None = None) -> tuple[list[TurnCheck], bool | None]:
    """The verdicts on one turn's capture and the client's result; and whether the marker came back.
    ``tool``: the call CL-TOOL-RUN needs is of this tool (any tool when empty); ``image``: judge CL-IMAGE;
    ``effect``: the file the turn had to change and what it held afterwards (None: not found), judged as
    CL-EFFECT."""
    checks: list[TurnCheck] = []
    bad = []
    models = [t for t in records if is_model_request(t)]
    for t in records:
        where = f"{t.get('method')} {t.get('url')}"
        if is_ws_probe(t) and t.get("status") in WS_PROBE_STATUSES:
            continue
        if t.get("error") and not (_hung_up(t["error"]) and stream_complete(t)):
            bad.append(f"{where}: {t['error']}")
        elif t.get("status") is None or t["status"] >= 400:
            text = (t.get("body") or {}).get("text") if isinstance(t.get("body"), dict) else t.get("body")
            bad.append(f"{where}: HTTP {t.get('status')} {str(text or '')[:200]}")
        else:
            bad += [f"{where}: {e}" for e in stream_errors(t)]
    if not models:
        bad.append("the client sent no model request")
    checks.append(TurnCheck("CL-ANSWERED", not bad, "; ".join(bad[:5]) or f"{len(records)} request(s), "
                            f"{len(models)} model request(s), all answered"))
    text_ok = rc == 0 and not client_error and bool(final_text.strip())
    checks.append(TurnCheck("CL-FINAL-TEXT", text_ok, f"final text {final_text.strip()[:120]!r}" if text_ok
                            else (client_error[:500] or f"exit {rc}, final text {final_text.strip()[:120]!r}")))
    marker_seen: bool | None = None
    said = ""
    if tool_turn:
        calls = [(i, c) for i, t in enumerate(models) for c in tool_calls(t)]
        others = [c["name"] for _, c in calls if tool and c["name"] != tool]
        calls = [(i, c) for i, c in calls if not tool or c["name"] == tool]
        ran, sent = [], []  # the calls' non-error results; every result the client sent back for them
        for i, call in calls:
            for later in models[i + 1:]:
                for res in tool_results(later.get("request_body")):
                    if _same_id(res["id"], call["id"]):
                        sent.append(res)
                        if res["text"].strip() and not res["is_error"]:
                            ran.append((call, res))
        said = next((r["text"].strip() for r in sent if r["text"].strip()), "")  # the client's own words
        texts = [r["text"] for _, r in ran]
        marker_seen = any(marker in x for x in texts) or marker in final_text
        if not calls:
            detail = (f"the server's answers made no call of {tool}" + (f" (calls: {', '.join(others)})"
                                                                         if others else "")
                      if tool else "the server's answers made no tool call")
        elif not ran:
            detail = (f"{len(calls)} tool call(s) ({', '.join(c['name'] for _, c in calls)}) but no later request "
                      "carries a non-error result for them" + (f" (the client sent back: {said[:200]!r})"
                                                               if said else ""))
        else:
            call, res = ran[0]
            detail = (f"{call['name']} {call['arguments'][:120]} -> result {res['text'].strip()[:160]!r}; "
                      f"asked command's output {'seen' if marker_seen else 'not seen'}")
        checks.append(TurnCheck("CL-TOOL-RUN", bool(ran), detail))
        if image:
            images = [r for _, r in ran if "[image]" in r["text"]]
            checks.append(TurnCheck("CL-IMAGE", bool(images), "the tool result sent back carries an image block"
                                    if images else "no tool result sent back carries an image block"))
    if effect is not None:
        want, found = effect
        done = found is not None and want.text in found
        result = f"; the tool result: {said[:200]!r}" if tool_turn and said else ""
        checks.append(TurnCheck("CL-EFFECT", done, f"{want.name} holds {want.text!r}" if done else
                                f"{want.name} " + ("not found" if found is None else
                                                   f"holds {found.strip()[:120]!r}, not {want.text!r}") + result))
    return checks, marker_seen


# -- running a client -------------------------------------------------------------------------

def _run(cmd: list[str], env: dict[str, str], cwd: Path, timeout: float) -> tuple[int | None, str, str, bool]:
    """Run a client's command in its own process group, watched by this process's guard: the group is
    ended as a whole when the client exits (what it left running), on time-out, on an interruption,
    and by the guard should this process die first."""
    base = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "TERM", "TMPDIR", "SSL_CERT_FILE")}
    proc = subprocess.Popen(cmd, env={**base, **env}, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    watcher = guard()
    watcher.watch_group(proc.pid)
    try:
        try:
            out, err = proc.communicate(timeout=timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            _kill(proc.pid)
            out, err = proc.communicate()
            timed_out = True
        except BaseException:  # interrupted (Ctrl-C, SIGTERM): the client runs in its own session, stop it too
            _end_group(proc)  # ended before its private home is removed (run_turn), not while it still writes
            raise
        _end_group(proc)  # whatever the client left running in its group
        return (None if timed_out else proc.returncode), out, err, timed_out
    finally:
        watcher.forget_group(proc.pid)


def _kill(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


GROUP_END_S = 5.0  # how long a killed client's group may take to be gone


def _end_group(proc: subprocess.Popen) -> None:
    """SIGKILL the client's process group, then wait until none of it is left (the leader reaped, the
    rest gone; at most GROUP_END_S): a process still dying (node finishing a write) must not write into
    a folder being removed (issue 43: the private home stayed behind after an interrupted turn)."""
    _kill(proc.pid)
    deadline = time.monotonic() + GROUP_END_S
    try:
        proc.wait(timeout=GROUP_END_S)
    except subprocess.TimeoutExpired:
        return
    while time.monotonic() < deadline:
        try:
            os.killpg(proc.pid, 0)
        except (ProcessLookupError, PermissionError):
            return
        time.sleep(0.01)


def _find_effect(effect: Effect, cwd: Path, home: Path) -> str | None:
    """The text of the file ``effect`` names: in the working folder, else anywhere under the home (the
    first found); None when there is none."""
    for path in [cwd / effect.name, *sorted(home.rglob(effect.name))]:
        try:
            if path.is_file():
                return path.read_bytes()[:65536].decode("utf-8", "replace")
        except OSError:
            continue
    return None


def run_turn(client: Client, inst: Install, endpoint: str, model: str, work: Path, *, turn: str, prompt: str,
             api_key: str = DUMMY_KEY, timeout: float = DEFAULT_TURN_TIMEOUT, spec: TurnSpec | None = None
             ) -> TurnResult:
    """One turn (see the module docstring). What the client needs (its HOME, config files) lives in a
    private temporary folder (mode 0700), removed after the turn; the key reaches it through its
    environment only. ``work`` (made absolute first) gets the capture, the command line with the key
    redacted, and the client's stdout and stderr, the key scrubbed from them in every form. ``spec``
    (``kinds.TurnSpec``): the model id to ask for, the files to write into the working folder first
    (``{cwd}`` in the prompt is that folder), the tool the turn must call and what it must leave behind;
    without one, ``turn == "tool"`` makes it a tool turn of any tool."""
    from harnesscheck.replay.capture import ProxyThread, secret_variants

    work = work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    secrets = secret_variants([api_key])
    if spec is not None and spec.model:
        model = spec.model
    tool = spec.tool if spec is not None else ""
    res = TurnResult(client.name, client.label, inst.version, client.api, turn, prompt, model=model, tool=tool)
    found: str | None = None
    cap = work / "capture.jsonl"
    private = Path(tempfile.mkdtemp(prefix=f"harnesscheck-{client.name}-"))  # mode 0700
    watcher = guard()
    watcher.remove_on_exit(private)
    try:
        with ProxyThread(upstream=endpoint, out=cap) as proxy:
            prep = client.prepare(inst, private, proxy.url, model, api_key)
            if spec is not None:
                for name, data in spec.files.items():
                    (prep.cwd / name).write_bytes(data)
                prompt = res.prompt = prompt.replace("{cwd}", str(prep.cwd))
            cmd = client.command(inst, prep, prompt, model)
            env = {k: ("[REDACTED]" if v == api_key else redact_text(v, secrets)) for k, v in prep.env.items()}
            (work / "command.json").write_text(json.dumps({"cmd": [redact_text(c, secrets) for c in cmd],
                                                           "env": env}, indent=1))
            # the client's own temporary files (Claude Code's shell snapshots, ...) go with its home; Node's
            # compile cache (compiled code, nothing of the run's) stays beside the installs, warm
            (private / "tmp").mkdir()
            run_env = {"TMPDIR": str(private / "tmp"),
                       "NODE_COMPILE_CACHE": str(inst.prefix.parent / "node-compile-cache"), **prep.env}
            t0 = time.time()
            rc, out, err, timed_out = _run(cmd, run_env, prep.cwd, timeout)
            res.seconds = round(time.time() - t0, 3)
            if spec is not None and spec.effect is not None:
                found = _find_effect(spec.effect, prep.cwd, prep.home)
    except OSError as exc:  # the client could not be started (or its config written): the kit's side
        res.kit_error = res.error = redact_text(f"could not run {client.label}: {exc}", secrets)
        return res
    finally:
        for _ in range(3):  # a write that was under way when the group ended can land once more
            shutil.rmtree(private, ignore_errors=True)
            if not private.exists():
                break
            time.sleep(0.1)
        watcher.forget_folder(private)
    out, err = redact_text(out, secrets), redact_text(err, secrets)
    (work / "stdout.txt").write_text(out)
    (work / "stderr.txt").write_text(err)
    res.rc, res.timed_out, res.capture = rc, timed_out, str(cap)
    res.stdout_tail, res.stderr_tail = out[-3000:], err[-3000:]
    parsed = client.parse(out, err, rc if rc is not None else -9)
    res.final_text = parsed.final_text
    res.error = ("timed out after %.0f s; " % timeout if timed_out else "") + (parsed.error if parsed.is_error else "")
    records = load_records(cap)
    res.requests = request_summary(records)
    res.ws_probes = sum(1 for t in records if is_ws_probe(t))
    posts = [t for t in records if is_model_request(t)]
    if posts:
        res.first_post_s = round(posts[0]["timings"]["started_at"] - t0, 3)
    marker = (spec.marker or TOOL_MARKER) if spec is not None else TOOL_MARKER
    res.checks, res.marker_seen = capture_checks(
        records, tool_turn=bool(tool) if spec is not None else turn == "tool", rc=rc, final_text=parsed.final_text,
        client_error=res.error, marker=marker, tool=tool, image=spec is not None and spec.image,
        effect=(spec.effect, found) if spec is not None and spec.effect is not None else None)
    res.ok = all(c.ok for c in res.checks)
    return res


def turns_for(client: Client) -> list[tuple[str, str]]:
    """The text and shell turns alone, as (name, prompt): the first two of ``kinds.turns_for``."""
    return [("text", TEXT_PROMPT), ("tool", client.tool_prompt(TOOL_COMMAND))]


def run_client(client: Client, inst: Install, endpoint: str, model: str, out: Path, *, api_key: str = DUMMY_KEY,
               timeout: float = DEFAULT_TURN_TIMEOUT, turns: list[tuple[str, str]] | None = None,
               specs: list[TurnSpec] | tuple[TurnSpec, ...] | None = None) -> list[TurnResult]:
    """A client's turns, in order: ``specs`` (``kinds.TurnSpec``), else ``turns`` ((name, prompt) pairs), else
    its text and shell turns (``turns_for``). Captures under ``out/<client>[-<api>]/<turn>/``."""
    tag = client.name + ("" if client.api == client.apis[0] else f"-{client.api}")
    if specs is not None:
        return [run_turn(client, inst, endpoint, model, out / tag / t.name, turn=t.name, prompt=t.prompt,
                         api_key=api_key, timeout=timeout, spec=t) for t in specs]
    return [run_turn(client, inst, endpoint, model, out / tag / turn, turn=turn, prompt=prompt, api_key=api_key,
                     timeout=timeout) for turn, prompt in turns or turns_for(client)]
