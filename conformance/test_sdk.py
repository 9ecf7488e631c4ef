"""The official SDKs as oracles: each one's stream helper consumes every scenario's turns without
error (rule ``<ID>``, MUST: an official SDK breaks otherwise) and folds them to the same answer as
the non-streaming call, ids and signatures aside (rule ``<ID>:nonstream``, SHOULD: two separate
answers agree only where the endpoint is deterministic, so a difference counts only when a second
non-streamed answer to the same request repeats the first; an endpoint that samples leaves the
rule unjudged, recorded in the check's coverage as not exercised, never a failure. No sampling
parameter is sent to make it deterministic: Anthropic's API version 2026-10-21 and its SDKs 2.x
refuse temperature, top_p and top_k, and OpenAI's reasoning models refuse temperature). A timeout
is inconclusive; a helper's own
refusal of a legal answer (openai's LengthFinishReasonError on finish_reason length, its Responses helper
on response.incomplete) is no verdict: that turn is sampled again through the levers (issue 35: a call
forced, thinking off; sent as extra_body, marked in the result's levers), and a scenario whose turn still
ended at the limit leaves the check not exercised, saying which levers were tried."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from harnesscheck.protocol import apis
from harnesscheck.conformance import catalog, levers
from harnesscheck.conformance.session import Session
from harnesscheck.conformance.verdict import Inconclusive, fail
from harnesscheck.protocol.wire.redact import redact_text

if TYPE_CHECKING:
    import anthropic
    import openai

SCENARIOS = ["plain_text", "calculator", "interleaved", "parallel_tools"]


def _import_the_sdks() -> None:
    import anthropic  # noqa: F401
    import openai  # noqa: F401


# The two SDKs take about a second to import: in the background from collection on, so the import runs
# while the first checks wait on the endpoint; the oracles below import them where they use them (at
# once, or after the import under way).
threading.Thread(target=_import_the_sdks, name="hc-sdk-import", daemon=True).start()


class _Attempts:
    """What the SDK's own HTTP client sent and got back, in order: ("request", 0) and ("response", status).
    The oracles build their clients as the SDKs' defaults are (DefaultHttpxClient, the default retries): a
    kept-alive connection the server closed between requests is retried as a real client retries it (issue 41:
    with max_retries=0 llama-server's closed connections failed AN-SDK-001 at MUST, which no client sees).
    `retried(at)` reads one call's attempts: each retry is noted, and a retry after the answer had begun
    (its status line came, then the connection dropped) stays a finding."""

    def __init__(self) -> None:
        self.events: list[tuple[str, int]] = []

    def hooks(self) -> dict[str, list[Callable[[Any], None]]]:
        return {"request": [lambda request: self.events.append(("request", 0))],
                "response": [lambda response: self.events.append(("response", response.status_code))]}

    def mark(self) -> int:
        return len(self.events)

    def each_call(self, call: Callable[[dict[str, Any]], Any]) -> Callable[[dict[str, Any]], Any]:
        """`call`, marking where each of its calls starts (a call's retries are its own requests)."""
        def run(params: dict[str, Any]) -> Any:
            self.events.append(("call", 0))
            return call(params)
        return run

    def retried(self, at: int) -> tuple[list[str], list[str]]:
        """(why each retry came: a connection error or a status, the answers dropped mid-way) since `at`."""
        events, why, dropped = self.events[at:], [], []
        for before, now in zip(events, events[1:]):
            if now[0] != "request" or before[0] == "call":
                continue
            if before[0] == "request":
                why.append("a connection error before any answer")
            elif before[1] < 400:
                dropped.append(f"HTTP {before[1]}, then the connection dropped mid-answer")
            else:
                why.append(f"HTTP {before[1]}")
        return why, dropped


class _Watched:
    """The SDK's HTTP transport, watched (issue 40: a stall seen by every reader): the last request's method,
    path and start, and each read of its answer (how many, the SSE frames they held, when the last came),
    so that an SDK timeout tells a stall (an answer that started, then went silent) from a slow endpoint.
    ``http`` is the HTTP package the SDK is built on (httpx, or a fork with its API, as the SDKs' httpx2)."""

    def __init__(self, http: Any, hooks: dict[str, list[Callable[[Any], None]]] | None = None) -> None:
        self.http = http
        self.last: dict[str, Any] = {}
        watched = self

        class Stream(http.SyncByteStream):
            def __init__(self, inner: Any, watch: dict[str, Any]) -> None:
                self.inner, self.watch = inner, watch

            def __iter__(self) -> Any:
                for chunk in self.inner:
                    self.watch["reads"] += 1
                    self.watch["frames"] += chunk.count(b"\n\n")
                    self.watch["at"] = time.monotonic()
                    yield chunk

            def close(self) -> None:
                self.inner.close()

        class Transport(http.BaseTransport):
            def __init__(self) -> None:
                self.inner = http.HTTPTransport()

            def handle_request(self, request: Any) -> Any:
                watch = {"method": request.method, "path": request.url.path, "start": time.monotonic(), "reads": 0,
                         "frames": 0, "at": None}
                watched.last = watch
                response = self.inner.handle_request(request)
                return http.Response(response.status_code, headers=response.headers, extensions=response.extensions,
                                     stream=Stream(response.stream, watch))

            def close(self) -> None:
                self.inner.close()

        self.client = http.Client(transport=Transport(), event_hooks=hooks or {})

    def stall(self, hc: Session, label: str) -> str | None:
        """The last request as a stall (Session.note_silence), when it timed out after it started answering
        and stayed silent for at least half the deadline; None otherwise (only slow)."""
        w, now = self.last, time.monotonic()
        if not w or not w["reads"] or now - w["at"] < hc.endpoint.timeout / 2:
            return None
        return hc.note_silence(label, w["method"], w["path"], frames=w["frames"], reads=w["reads"],
                               after_s=w["at"] - w["start"], silent_s=now - w["at"])


def _http_of(sdk: Any) -> Any:
    """The HTTP package an SDK module is built on (its `_base_client`'s httpx or httpx2)."""
    import importlib

    base = importlib.import_module(f"{sdk.__name__}._base_client")
    return getattr(base, "httpx2", None) or getattr(base, "httpx", None) or httpx


def _anthropic_client(hc: Session, attempts: _Attempts) -> tuple[anthropic.Anthropic, _Watched]:
    import anthropic

    watch = _Watched(_http_of(anthropic), attempts.hooks())
    return anthropic.Anthropic(base_url=hc.endpoint.url, api_key=hc.endpoint.api_key or "harnesscheck",
                               timeout=hc.endpoint.timeout, http_client=watch.client), watch


def _openai_client(hc: Session, attempts: _Attempts) -> tuple[openai.OpenAI, _Watched]:
    import openai

    watch = _Watched(_http_of(openai), attempts.hooks())
    return openai.OpenAI(base_url=hc.endpoint.url.rstrip("/") + "/v1", api_key=hc.endpoint.api_key or "harnesscheck",
                         timeout=hc.endpoint.timeout, http_client=watch.client), watch


def _canonical(arguments: Any) -> str:
    """Arguments compared by value when they are JSON, as text when they are not."""
    if not isinstance(arguments, str):
        return json.dumps(arguments, sort_keys=True)
    try:
        return json.dumps(json.loads(arguments or "{}"), sort_keys=True)
    except ValueError:
        return arguments


def _an_shape(content: list[Any]) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for b in content:
        b = b if isinstance(b, dict) else b.model_dump()
        if b["type"] == "text":
            out.append(("text", b["text"]))
        elif b["type"] == "thinking":
            out.append(("thinking", b["thinking"]))
        elif b["type"] == "tool_use":
            out.append(("tool_use", b["name"], _canonical(b["input"])))
    return out


def _oracle_failure(hc: Session, api: str, scenario: str, turn: int, what: str, rule: str) -> None:
    # `what` quotes the SDK's exception, which quotes the endpoint's answer: a key echoed there stays out
    fail(redact_text(f"{scenario} turn {turn}: {what}", hc.endpoint.secrets),
         transcript=hc.stream(api, scenario, turn=turn), rule=rule)


def _chat_shape(message: Any) -> tuple[Any, ...]:
    calls = tuple((c.function.name, _canonical(c.function.arguments))
                  for c in (message.tool_calls or []))
    return (message.content or "", calls)


def _rs_shape(output: list[Any]) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for item in output:
        item = item if isinstance(item, dict) else item.model_dump()
        if item["type"] == "message":
            out.append(("message", "".join(p.get("text", "") for p in item.get("content", []))))
        elif item["type"] == "function_call":
            out.append(("function_call", item["name"], _canonical(item["arguments"])))
        elif item["type"] == "reasoning":
            out.append(("reasoning", "".join(p.get("text", "") for p in item.get("content") or [])))
    return out


def _brief(shape: Any, limit: int = 160) -> str:
    text = repr(shape)
    return text if len(text) <= limit else text[: limit - 3] + "..."


OVERLOADED = (429, 503, 529)  # rate limited or overloaded: the endpoint's state, not a contract


def _error_event(exc: Exception) -> bool:
    """An error the endpoint sent as an event inside a 200 stream (the SDK raises it as a status error)."""
    response = getattr(exc, "response", None)
    return getattr(response, "status_code", None) == 200


def _with_stream(open_stream: Callable[..., Any], final: str) -> Callable[[dict[str, Any]], Any]:
    def run(params: dict[str, Any]) -> Any:
        with open_stream(**params) as stream:
            return getattr(stream, final)()
    return run


def _responses_stream(open_stream: Callable[..., Any]) -> Callable[[dict[str, Any]], Any]:
    """openai's Responses stream helper, which refuses by design a stream that ends in
    `response.incomplete` (max_output_tokens reached: a legal end, API reference) with "Didn't receive
    a `response.completed` event": that refusal is reported as what it is, not as the endpoint's fault."""
    def run(params: dict[str, Any]) -> Any:
        with open_stream(**params) as stream:
            last = None
            for event in stream:
                last = getattr(event, "type", None)
            try:
                return stream.get_final_response()
            except RuntimeError as exc:
                if last != "response.incomplete":
                    raise
                raise _AtTheLimit("response.incomplete, which the openai Responses stream helper refuses "
                                  "by design: \"Didn't receive a `response.completed` event\"") from exc
    return run


class _AtTheLimit(Exception):
    """The answer ended at the output limit and the SDK's helper refuses that by design (openai's chat
    LengthFinishReasonError, its Responses helper on response.incomplete): no verdict on this try."""


def _changed(body: dict[str, Any], bent: dict[str, Any]) -> dict[str, Any]:
    """The fields `bent` adds to `body` or changes in it."""
    return {k: v for k, v in bent.items() if k not in body or body[k] != v}


def _oracle(hc: Session, api: str, check_id: str, streamed_answer: Callable[[dict[str, Any]], Any],
            created_answer: Callable[[dict[str, Any]], Any], shape: Callable[[Any], Any],
            dump: Callable[[Any], dict[str, Any]], attempts: _Attempts, watch: _Watched) -> None:
    """Each scenario, two turns: the SDK's stream helper and its non-stream call must agree; the
    created answer goes back as history the way the SDK hands it out. A turn whose answer ended at the
    output limit, which a helper refuses by design, is sampled again through the levers (Session.until_taken:
    a call forced, thinking off, ...; the SDK sends them as extra_body, and a later turn keeps the thinking
    switch); a scenario whose turn never ended before the limit is left unjudged, and the check is then
    inconclusive (not exercised, with the levers tried) unless another turn failed."""
    import anthropic
    import openai

    streamed_answer, created_answer = attempts.each_call(streamed_answer), attempts.each_call(created_answer)
    at_limit: list[str] = []
    for scenario_id in SCENARIOS:
        kept: list[levers.Lever] = []
        scenario = hc.scenario(scenario_id)
        body = apis.get(api).first(scenario, hc.endpoint.model, stream=False)
        for turn in range(min(2, len(scenario.turns))):
            base = {k: v for k, v in body.items() if k not in ("stream", "stream_options")}
            sdk = apis.get(api).SDK

            def attempt(base: dict[str, Any] = base, scenario_id: str = scenario_id, turn: int = turn,
                        sdk: str = sdk, kept: list[levers.Lever] = kept) -> tuple[Any, Any, Any] | None:
                # a peer profile's fields (--peer), the thinking switch and words the conversation keeps
                # from its opening try, and the levers on this try, as the SDK sends them
                held = _changed(base, levers.bend(kept, api, base, {catalog.TOOL_USE})[0]) if kept else {}
                extra = {**hc.peer_extra(api, base), **held, **hc.lever_extra(api, {**base, **held})}
                params = {**base, "extra_body": extra} if extra else base
                sent = hc.attached.sent[-1]
                if held:  # sent with the conversation's kept levers: marked with them
                    sent[1] = list(dict.fromkeys([lv.name for lv in kept] + sent[1]))
                pulled, where = sent[1], f"{scenario_id} turn {turn}"
                at = attempts.mark()
                try:
                    streamed, created = streamed_answer(params), created_answer(params)
                    again = created_answer(params) if shape(streamed) != shape(created) else created
                except openai.LengthFinishReasonError:
                    hc.sent_came_back("ended at the output limit (finish_reason length, which the openai "
                                      "chat stream helper refuses by design: LengthFinishReasonError)")
                    return None
                except _AtTheLimit as exc:
                    hc.sent_came_back(f"ended at the output limit ({exc})")
                    return None
                except (anthropic.APITimeoutError, openai.APITimeoutError) as exc:
                    if (stalled := watch.stall(hc, f"{where} (the {sdk} SDK)")):  # silent, not slow
                        raise Inconclusive(f"the endpoint stalled: {stalled}", cause="stalled") from exc
                    raise Inconclusive(f"{where}: the {sdk} SDK timed out after {hc.endpoint.timeout:g} s "
                                       f"({exc})", cause="timeout") from exc
                except (anthropic.APIStatusError, openai.APIStatusError) as exc:
                    status = exc.status_code
                    if pulled and 400 <= status < 500 and status not in (401, 403, 408, 429):
                        hc.sent_came_back(redact_text(f"HTTP {status}: {str(exc.body or exc)[:120]}",
                                                      hc.endpoint.secrets), refused=True)
                        return None  # the endpoint refused a lever: no check judges that refusal
                    if status in OVERLOADED or _error_event(exc):
                        raise Inconclusive(redact_text(f"{where}: the endpoint reported an error (HTTP {status}): "
                                                       f"{exc.body or exc}", hc.endpoint.secrets),
                                           cause="endpoint-error") from exc
                    _oracle_failure(hc, api, scenario_id, turn,
                                    f"the {sdk} SDK failed: {type(exc).__name__}: {exc}", rule=check_id)
                except Exception as exc:  # the SDK's own complaint is the finding
                    _oracle_failure(hc, api, scenario_id, turn,
                                    f"the {sdk} SDK failed: {type(exc).__name__}: {exc}", rule=check_id)
                retries, dropped = attempts.retried(at)
                if dropped:
                    _oracle_failure(hc, api, scenario_id, turn, f"the {sdk} SDK's default client retried an answer "
                                    f"that broke off ({'; '.join(dropped)}): a client without retries fails "
                                    "there", rule=check_id)
                if retries:
                    hc.note(f"{where}: the {sdk} SDK retried as its default client does ({'; '.join(retries)})")
                hc.sent_came_back("an answer the SDK folded")
                if pulled:
                    hc.attached.bent[f"{where} (the {sdk} SDK)"] = list(pulled)
                return streamed, created, again

            answered, took = hc.until_taken((catalog.TOOL_USE,), attempt, lambda r: r is not None)
            if not took or answered is None:
                at_limit.append(f"{scenario_id} turn {turn}")
                break  # the later turn is built on this one's answer
            if turn == 0:  # a client keeps its thinking switch (and the words it sent) on later turns
                kept = [levers.BY_NAME[n] for n in hc.attached.sent[-1][1]
                        if n in levers.BY_NAME and levers.BY_NAME[n].conversation]
            streamed, created, again = answered
            if shape(again) != shape(created):
                continue  # the endpoint samples: two answers to one request cannot be compared
            hc.saw(catalog.DETERMINISTIC)
            if shape(streamed) != shape(created):
                _oracle_failure(hc, api, scenario_id, turn,
                                f"the SDK's folded stream {_brief(shape(streamed))} differs from the non-streamed "
                                f"answer {_brief(shape(created))}, which a second non-streamed answer to the "
                                f"same request repeated", rule=f"{check_id}:nonstream")
            body = apis.get(api).follow(body, dump(created), scenario, turn + 1)
    if at_limit:
        sdk = apis.get(api).SDK
        raise Inconclusive(f"not exercised: every answer to {', '.join(at_limit)} ended at the output limit, "
                           f"which the {sdk} SDK's stream helper refuses by design; the streams themselves are "
                           "judged by the grammar checks", cause="not-exercised")


@pytest.mark.check("AN-SDK-001")
def test_anthropic_sdk_stream_matches_create(hc: Session) -> None:
    attempts = _Attempts()
    client, watch = _anthropic_client(hc, attempts)
    _oracle(hc, "anthropic", "AN-SDK-001", _with_stream(client.messages.stream, "get_final_message"),
            lambda p: client.messages.create(**p), lambda m: (_an_shape(m.content), m.stop_reason),
            lambda m: m.model_dump(), attempts, watch)


@pytest.mark.check("CH-SDK-001")
def test_openai_chat_stream_matches_create(hc: Session) -> None:
    attempts = _Attempts()
    client, watch = _openai_client(hc, attempts)
    _oracle(hc, "chat", "CH-SDK-001", _with_stream(client.chat.completions.stream, "get_final_completion"),
            lambda p: client.chat.completions.create(**p),
            lambda c: (_chat_shape(c.choices[0].message), c.choices[0].finish_reason), lambda c: c.model_dump(),
            attempts, watch)


@pytest.mark.check("RS-SDK-001")
def test_openai_responses_stream_matches_create(hc: Session) -> None:
    attempts = _Attempts()
    client, watch = _openai_client(hc, attempts)
    _oracle(hc, "responses", "RS-SDK-001", _responses_stream(client.responses.stream),
            lambda p: client.responses.create(**p), lambda r: _rs_shape(r.output),
            lambda r: r.model_dump(exclude_none=True), attempts, watch)
