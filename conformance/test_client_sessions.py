"""The real clients' own recorded tool sessions, replayed turn by turn (issue 30).

Each check replays one session of ``harnesscheck.scenarios.client_sessions`` (captured from the real
client against the reference server: Claude Code; Codex under the gpt-5.5 catalog profile and under
the fallback profile; OpenClaw over Messages, Responses and Chat) on its recorded history: every request
is sent as the client sent it (its own history, tools and headers; only the model id rewritten), so the
endpoint's answers never decide which request comes next (issue 40), and every answer is judged:

- ``<ID>`` accepted: the endpoint answers each request the client sends (a 2xx; the real APIs take
  them). A refusal for the endpoint's own limits (context length) is inconclusive.
- ``<ID>:grammar`` answered in the API's grammar: each streamed answer, validated by the API's grammar
  (``grammar.validate_for``), breaks no MUST rule (the stream checks judge the SHOULD ones).
- ``<ID>:roundtrip`` what the endpoint answered can come back in the client's next request: each answer
  read as the client reads it (every tool call with an id to send back, input that parses), and, as an
  extra where the answer had the recorded structure (the same tool calls), the client's next request
  carrying it (conformance/client_replay.py puts the live answer's ids, arguments, reasoning and
  signatures where the recorded answer's were) is accepted: a refusal of it is a round-trip failure when
  the same request with the recorded answer is accepted; a client that re-writes arguments it cannot
  parse fails it too. An answer of another structure (another tool than the client's session called)
  leaves that extra unsent, with a note: never the reason a check is not exercised.

The sessions are independent: the first of these checks replays them all at once (a thread and a
Session each); each check then records its own session's exchanges and verdict.
"""

from __future__ import annotations

import copy
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from harnesscheck.protocol import apis
from harnesscheck.conformance import catalog, client_replay, grammar
from harnesscheck.conformance.grammar.findings import Finding
from harnesscheck.conformance.options import QUICK_REPLAY_BUDGET
from harnesscheck.conformance.session import Session
from harnesscheck.conformance.verdict import (CheckFailed, Inconclusive, fail, refused_for_config,
                                               timed_out)
from harnesscheck.protocol.wire.transcript import Transcript
from harnesscheck.scenarios import client_sessions

# session (scenarios/clients/<name>.json) -> its check
SESSION_CHECKS = {"claude-code": "AN-CLIENT-001", "openclaw-anthropic": "AN-CLIENT-002",
                  "codex-gpt-5.5": "RS-CLIENT-001", "codex-fallback": "RS-CLIENT-002",
                  "openclaw-responses": "RS-CLIENT-003", "openclaw-chat": "CH-CLIENT-001"}
# request headers the kit sets itself (the API's own, the key): never the recorded ones
OWN_HEADERS = frozenset({"content-type", "accept", "x-api-key", "authorization"})


def _params() -> list[Any]:
    return [pytest.param(name, marks=pytest.mark.check(check_id), id=check_id)
            for name, check_id in SESSION_CHECKS.items()]


# the output-limit fields a recorded request may carry (the API's own, and Chat's newer name for it)
LIMIT_FIELDS = ("max_completion_tokens",)


def _as_recorded(hc: Session, api: str, x: dict[str, Any]) -> dict[str, Any]:
    """The recorded request with only the model id rewritten; under --quick its output limit bounded at
    QUICK_REPLAY_BUDGET (a slow model's answer to a 32,000-token limit runs for minutes), kept above a
    thinking budget it carries so the request stays valid."""
    body = {**copy.deepcopy(x["body"]), "model": hc.endpoint.model}
    if not hc.endpoint.quick:
        return body
    thinking = body.get("thinking")
    floor = thinking.get("budget_tokens", 0) if isinstance(thinking, dict) else 0
    bound = (floor if isinstance(floor, int) else 0) + QUICK_REPLAY_BUDGET
    fields = [f for f in (apis.get(api).MAX_TOKENS_FIELD, *LIMIT_FIELDS) if f in body] or \
        [apis.get(api).MAX_TOKENS_FIELD]
    for name in fields:
        limit = body.get(name)
        body[name] = min(limit, bound) if isinstance(limit, int) and not isinstance(limit, bool) else bound
    return body


def _send(hc: Session, api: str, x: dict[str, Any], body: dict[str, Any], label: str) -> Transcript:
    headers = {k: v for k, v in (x.get("headers") or {}).items() if k.lower() not in OWN_HEADERS}
    return hc.post(api, x.get("path") or apis.get(api).PATH, body, stream=bool(body.get("stream")),
                   headers=headers, label=label)


def _refused(t: Transcript, where: str) -> str | None:
    """Why the exchange is no answer (None for a 2xx); timeouts and limits refusals are inconclusive."""
    if t.error and timed_out(t):
        raise Inconclusive(f"{where}: timed out: {t.error}", cause="timeout")
    if t.error and t.status is None:
        return f"{t.error_kind or 'error'}: {t.error}"
    if not t.ok:
        config = refused_for_config(t)
        if config:
            raise Inconclusive(f"{where}: the endpoint refused it for its own limits (HTTP {t.status}): "
                               f"{config[:300]}", cause="endpoint-config")
        return f"HTTP {t.status}: {t.text_body()[:300]}"
    return None


def _grammar(api: str, t: Transcript, body: dict[str, Any], check_id: str, where: str) -> None:
    if not t.frames:
        return
    broken = [f for f in grammar.validate_for(api, t, body)
              if not f.informational and f.rule in catalog.RULES and catalog.RULES[f.rule].level == catalog.MUST]
    if broken:
        f = broken[0]
        # the frame the failure names travels as the finding's (results.json finding.frame_index, the excerpt),
        # and the rule broken beside the session's own (the other checks failing on it speak of this client)
        named = Finding(f"{check_id}:grammar", f.frame_index, f"{f.rule}: {f.message}", f.observed, f.expected)
        raise CheckFailed(f"{where}: the answer breaks {f.rule} at frame #{f.frame_index}: {f.message}"
                          + (f" (and {len(broken) - 1} more)" if len(broken) > 1 else ""), finding=named,
                          findings=[f], transcript=t, rule=f"{check_id}:grammar")


@pytest.mark.parametrize("name", _params())
def test_client_session(hc: Session, name: str) -> None:
    doc = client_sessions.get(name)
    if doc["api"] not in hc.endpoint.apis:
        pytest.skip(f"{doc['api']} is not among the APIs checked")
    if hc.endpoint.quick:
        hc.note(f"--quick: each request went with its output limit bounded at {QUICK_REPLAY_BUDGET} tokens")
    done = _replayed(hc).get(name)
    if done is None:  # not fetched with the others (a stalled endpoint): replay it here
        replay(hc, doc, SESSION_CHECKS[name])
        return
    error, exchanges, paths = done
    for label, transcript in exchanges:
        hc.attach(label, transcript)
    hc.saw(*paths)
    if error is not None:
        raise error


# hc -> {session: (what its replay raised, its exchanges, the paths it saw)}: the sessions are independent,
# so the first of these checks replays them all at once, a thread and a Session each; each check then
# records its own session's exchanges and verdict. (Keyed by the Session object, which lives for the run.)
_REPLAYED: list[tuple[Session, dict[str, tuple[BaseException | None, list[tuple[str, Transcript]], set[str]]]]] = []


def _replayed(hc: Session) -> dict[str, tuple[BaseException | None, list[tuple[str, Transcript]], set[str]]]:
    for owner, replayed in _REPLAYED:
        if owner is hc:
            return replayed
    results: dict[str, tuple[BaseException | None, list[tuple[str, Transcript]], set[str]]] = {}
    _REPLAYED[:] = [(hc, results)]  # one run's sessions at a time
    if hc.stalled:
        return results
    docs = [d for d in client_sessions.load_all() if d["name"] in SESSION_CHECKS and d["api"] in hc.endpoint.apis]

    def one(doc: dict[str, Any]) -> None:
        own = Session(hc.endpoint)
        error: BaseException | None = None
        try:
            replay(own, doc, SESSION_CHECKS[doc["name"]])
        except BaseException as raised:  # noqa: BLE001 - the check re-raises it as its own verdict
            error = raised
        results[doc["name"]] = (error, list(own.attached), set(own.attached.paths))
        if own.stall:  # one of its streams went silent (the whole endpoint, or this request only)
            stalls[doc["name"]] = own

    stalls: dict[str, Session] = {}
    # Each API's grammar module is imported here, in the main thread: imported in the threads, pytest's
    # assertion rewriter (it rewrites every module of a plugin's distribution) parses two at once, and
    # CPython 3.11's AST constructor is not thread-safe ("SystemError: AST constructor recursion depth
    # mismatch", a kit error on RS-CLIENT-002 in 2 of 82 fault-matrix rows after a change of the code).
    for d in docs:
        grammar.module_for(d["api"])
    with ThreadPoolExecutor(max(1, len(docs)), thread_name_prefix="hc-client-session") as pool:
        for job in [pool.submit(one, d) for d in docs]:
            job.result()
    # The run's stall is the one its current check reports (else the first session's, in check order), not
    # whichever thread noticed first: results.json's run.stall and the first stalled check name one request.
    order = sorted(stalls, key=lambda name: (SESSION_CHECKS[name] != hc.check_id, list(SESSION_CHECKS).index(name)))
    if order and not hc.stall:  # said of the check whose session stalled
        hc.stall = {**(stalls[order[0]].stall or {}), "check": SESSION_CHECKS[order[0]]}
    if order and not hc.stalled:
        hc.stalled = next((stalls[name].stalled for name in order if stalls[name].stalled), None)
    return results


def replay(hc: Session, doc: dict[str, Any], check_id: str, *, grammar_rules: bool = True) -> None:
    """Replay one recorded session on its recorded history and judge it (module doc); ``grammar_rules``
    False leaves the answers' grammar unjudged (the kit's own tests reach the round trip under a fault the
    grammar sees first)."""
    api, label = doc["api"], f"{doc['label']} {doc['client_version']}"
    exchanges = doc["exchanges"]
    differs: list[str] = []  # answers of another structure: their round trip is not exercised
    for i, x in enumerate(exchanges):
        where = f"{label} ({doc['name']}) request {i + 1} of {len(exchanges)}"
        recorded = _as_recorded(hc, api, x)
        t = _send(hc, api, x, recorded, where)  # as the client sent it: the endpoint never picks the next request
        why = _refused(t, where)
        if why:
            fail(f"{where}: the client's request was refused: {why}", transcript=t)
        if grammar_rules:
            _grammar(api, t, recorded, check_id, where)
        live = apis.get(api).final_answer(t) if t.frames else t.json_body()
        _readable(api, live, t, where, check_id)
        if i + 1 == len(exchanges):
            break
        m, why, kind = client_replay.mapping(api, client_replay.recorded_answer(api, x.get("answer") or []), live)
        if kind == client_replay.BROKEN:
            fail(f"{where}: {why}", transcript=t, rule=f"{check_id}:roundtrip")
        if m is None:
            differs.append(f"request {i + 1}: {why}")
            continue
        _follow(hc, api, exchanges[i + 1], m, f"{label} ({doc['name']}) request {i + 2} of {len(exchanges)}",
                check_id)
    if differs:
        hc.note(f"round trip of the endpoint's own answer not sent where it took another path ({'; '.join(differs)}); "
                "every recorded request was sent and judged")


def _readable(api: str, live: Any, t: Transcript, where: str, check_id: str) -> None:
    """The answer read as the client reads it: every tool call with an id it can send back and input that
    parses (``client_replay.mapping`` of the answer onto itself); else ``<ID>:roundtrip`` fails."""
    _, why, kind = client_replay.mapping(api, live, live)
    if kind == client_replay.BROKEN:
        fail(f"{where}: {why}", transcript=t, rule=f"{check_id}:roundtrip")


def _follow(hc: Session, api: str, x: dict[str, Any], m: client_replay.Mapping, where: str, check_id: str) -> None:
    """Follow the endpoint (an extra where its answer had the recorded structure): the client's next request
    carrying the live answer's values in the client's form must be accepted (``<ID>:roundtrip``); a refusal
    fails only when the same request as recorded is accepted."""
    recorded = _as_recorded(hc, api, x)
    cannot = client_replay.uncarried(recorded, m)
    if cannot:
        fail(f"{where}: {cannot}", rule=f"{check_id}:roundtrip")
    body = client_replay.substitute(recorded, m)
    t = _send(hc, api, x, body, f"{where}, carrying the endpoint's answer")
    why = _refused(t, where)
    if why:
        again = _send(hc, api, x, recorded, f"{where}, as recorded")
        if _refused(again, f"{where}, as recorded") is None:
            fail(f"{where}: the client's request carrying the endpoint's own answer (call ids "
                 f"{', '.join(m.live_call_ids) or 'none'}) was refused ({why}); the same request with the "
                 "recorded answer was accepted", transcript=t, rule=f"{check_id}:roundtrip")
        return  # refused either way: the recorded request's own verdict says so
    hc.saw(catalog.CLIENT_ROUNDTRIP)
