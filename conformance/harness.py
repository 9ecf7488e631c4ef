"""The session object every check gets (`hc`): the endpoint, recorded exchanges, and a cache of
scenario streams shared by the checks that judge the same stream (so the suite stays fast)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import httpx

from conformance import requests as reqs
from conformance.grammar import anthropic as an_grammar
from conformance.wire import client
from conformance.wire.transcript import Transcript
from scenarios.loader import Scenario, get as get_scenario

PATHS = {"anthropic": "/v1/messages", "chat": "/v1/chat/completions", "responses": "/v1/responses"}


@dataclass(slots=True)
class Endpoint:
    url: str
    model: str
    api_key: str | None = None
    apis: tuple[str, ...] = ("anthropic", "chat", "responses")
    tries: int = 3
    timeout: float = 30.0
    expect: frozenset[str] = frozenset()
    embedded: bool = False
    server_args: tuple[str, ...] = ()
    witness: str = "auto"  # history checks: auto | tokenize | cache | timing

    def headers(self, api: str) -> dict[str, str]:
        headers = {"content-type": "application/json"}
        if api == "anthropic":
            headers["anthropic-version"] = "2023-06-01"
        if self.api_key:
            headers["x-api-key"] = self.api_key
            headers["authorization"] = f"Bearer {self.api_key}"
        return headers


def discover_model(url: str, api_key: str | None, timeout: float) -> str:
    headers = {"authorization": f"Bearer {api_key}", "x-api-key": api_key} if api_key else {}
    answer = httpx.get(url.rstrip("/") + "/v1/models", headers=headers, timeout=timeout)
    answer.raise_for_status()
    return answer.json()["data"][0]["id"]


@dataclass(slots=True)
class Harness:
    endpoint: Endpoint
    attached: list[tuple[str, Transcript]] = field(default_factory=list)  # this test's exchanges
    stalled: str | None = None  # set once a stream stopped sending: the rest of the run is not judged
    _streams: dict[tuple[Any, ...], Transcript] = field(default_factory=dict)

    def note_stall(self, exchanges: list[tuple[str, Transcript]]) -> None:
        """Mark the endpoint stalled when a started answer went silent for at least half the deadline,
        ran out of time, and a short probe answer does not complete either. (A slow answer that keeps
        sending, one that never started, or one whose endpoint holds back part of it, e.g. a buffered
        tool call, while a short answer still completes, is only slow.)"""
        deadline_ns = int(self.endpoint.timeout * 1e9)
        for label, t in exchanges:
            if t.error_kind not in ("deadline", "read_timeout") or not t.chunks:
                continue
            end_ns = t.timings.end_ns or deadline_ns
            silent_ns = end_ns - t.chunks[-1].t_ns
            if silent_ns < deadline_ns // 2:
                continue
            probe = self._probe_answer()
            if probe is None or probe.error is None:
                return  # the endpoint still completes a short answer: this one was only slow
            self.stalled = (f"{label}: no data for {silent_ns / 1e9:.1f} s after {len(t.chunks)} reads, until the "
                            f"{self.endpoint.timeout:g} s deadline, and a short probe answer did not complete "
                            f"either ({probe.error})")
            return

    def _probe_answer(self) -> Transcript | None:
        """A short streamed answer (plain_text, the API's smallest useful output limit), not recorded."""
        api = next((a for a in ("anthropic", "chat", "responses") if a in self.endpoint.apis), None)
        if api is None:
            return None
        body = reqs.first(api, self.scenario("plain_text"), self.endpoint.model)
        body["max_output_tokens" if api == "responses" else "max_tokens"] = 16
        limit = min(self.endpoint.timeout, 15.0)
        return client.stream_request(self._url(PATHS[api]), headers=self.endpoint.headers(api),
                                     json_body=body, timeout=limit, api=api, read_timeout=limit)

    # -- plain exchanges, recorded ------------------------------------------------------------
    def _url(self, path: str) -> str:
        return self.endpoint.url.rstrip("/") + path

    def _secret_headers(self) -> list[str]:
        return ["x-api-key", "authorization"]

    def _refuse_if_stalled(self) -> None:
        if self.stalled:
            from conformance.verdict import Inconclusive

            raise Inconclusive(f"endpoint stalled earlier in the run: {self.stalled}", cause="stalled")

    def post(self, api: str, path: str, body: Any = None, *, stream: bool = False,
             headers: dict[str, str] | None = None, content: bytes | None = None, label: str = "") -> Transcript:
        self._refuse_if_stalled()
        merged = {**self.endpoint.headers(api), **(headers or {})}
        call = client.stream_request if stream else client.post_json
        transcript = call(self._url(path), headers=merged, json_body=None if content is not None else body,
                          content=content, timeout=self.endpoint.timeout, api=api,
                          read_timeout=self.endpoint.timeout)  # slow engines may queue a request for long
        self.attach(label or f"POST {path}", transcript)
        self.note_stall([(label or f"POST {path}", transcript)])
        return transcript

    def get(self, api: str, path: str, *, headers: dict[str, str] | None = None, label: str = "") -> Transcript:
        self._refuse_if_stalled()
        merged = {**self.endpoint.headers(api), **(headers or {})}
        merged.pop("content-type", None)
        transcript = client.get(self._url(path), headers=merged, timeout=self.endpoint.timeout, api=api)
        self.attach(label or f"GET {path}", transcript)
        return transcript

    def attach(self, label: str, transcript: Transcript) -> None:
        self.attached.append((label, transcript))

    # -- scenario streams, shared between checks ------------------------------------------------
    def scenario(self, scenario_id: str) -> Scenario:
        return get_scenario(scenario_id)

    def body(self, api: str, scenario_id: str, *, stream: bool = True) -> dict[str, Any]:
        return reqs.first(api, self.scenario(scenario_id), self.endpoint.model, stream=stream)

    def stream(self, api: str, scenario_id: str, *, turn: int = 0) -> Transcript:
        """The streamed answer to a scenario's turn (history from the endpoint's own answers)."""
        key = (api, scenario_id, turn)
        if key not in self._streams:
            body = self.request_for(api, scenario_id, turn)
            self._streams[key] = self.post(api, PATHS[api], body, stream=True, label=f"{scenario_id} turn {turn}")
        transcript = self._streams[key]
        self.attach(f"{scenario_id} turn {turn}", transcript)
        return transcript

    def request_for(self, api: str, scenario_id: str, turn: int) -> dict[str, Any]:
        scenario = self.scenario(scenario_id)
        body = reqs.first(api, scenario, self.endpoint.model)
        for k in range(1, turn + 1):
            answer = final_answer(api, self.stream(api, scenario_id, turn=k - 1))
            if answer is None:
                return body
            body = reqs.follow(api, body, answer, scenario, k)
        return body


def final_answer(api: str, transcript: Transcript) -> dict[str, Any] | None:
    """The answer folded from a stream, in the shape of the API's non-stream response."""
    if api == "anthropic":
        return an_grammar.final_message(transcript)
    if api == "chat":
        from conformance.grammar import chat as grammar
        return grammar.final_message(transcript)
    from conformance.grammar import responses as grammar  # type: ignore[no-redef]
    folded = grammar.final_message(transcript)
    if folded is None:
        return None
    # The non-stream shape: the final response object, with the items as they were streamed.
    return {**(folded.get("response") or {}), "output": folded["output"]}


def api_key_from_env(value: str | None) -> str | None:
    return value or os.environ.get("HARNESSCHECK_API_KEY") or None
