"""The session object every check gets (`hc`): the endpoint, recorded exchanges, and a cache of
scenario streams shared by the checks that judge the same stream (so the suite stays fast)."""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx

from harnesscheck.protocol import apis
from harnesscheck.conformance import catalog, levers
from harnesscheck.conformance.options import QUICK_BUDGET, QUICK_GROWTH_STEPS
from harnesscheck.protocol.wire import client
from harnesscheck.protocol.wire.redact import secrets_from_args, secrets_from_url
from harnesscheck.protocol.wire.transcript import Transcript
from harnesscheck.scenarios.loader import Scenario, get as get_scenario

T = TypeVar("T")


class Exchanges(list[tuple[str, Transcript]]):
    """One check's recorded (label, transcript) exchanges, and the paths its answers took (catalog.PATHS):
    cleared together, so the paths seen are always this check's. `recent` holds what the current try took;
    `notes` what the check says of how it judged (which witness spoke), shown with its result. The levers
    (conformance/levers.py): `levers` are on for this check's opening requests toward the paths `wanted`,
    `tried` the samples a ladder took, `bent` the levers (or peer profile) behind each answer it judged."""

    def __init__(self) -> None:
        super().__init__()
        self.paths: set[str] = set()
        self.recent: set[str] = set()
        self.notes: list[str] = []
        self.levers: list[levers.Lever] = []
        self.wanted: set[str] = set()
        self.tried: list[levers.Tried] = []
        self.bent: dict[str, list[str]] = {}
        self.refusals: list[tuple[list[str], Transcript]] = []  # levered requests the endpoint refused (4xx)
        # generation requests sent outside `post` (an official SDK's own call, bent by `lever_extra`): per
        # request [api, the levers on it, what came back (the caller says: `sent_came_back`), refused]
        self.sent: list[list[Any]] = []
        self.budget = 1  # the output limit of this check's opening requests, times this (Session.until_taken)
        self.at_bound = False  # --quick: the last generation request's limit was at QUICK_BUDGET (no room to grow)

    def clear(self) -> None:
        super().clear()
        self.paths.clear()
        self.recent.clear()
        self.notes.clear()
        self.levers, self.wanted, self.tried, self.bent, self.refusals, self.sent = [], set(), [], {}, [], []
        self.budget = 1
        self.at_bound = False


@dataclass(slots=True)
class Endpoint:
    url: str
    model: str
    api_key: str | None = None
    apis: tuple[str, ...] = field(default_factory=apis.names)  # every registered API, when made
    tries: int = 3
    timeout: float = 30.0
    expect: frozenset[str] = frozenset()
    embedded: bool = False
    server_args: tuple[str, ...] = ()
    witness: str = "auto"  # history checks: auto | tokenize | cache | timing
    quick: bool = False  # --quick: options.QUICK_LEAVES_OUT says what it leaves out (tries is 1 already)
    peer: str = ""  # --peer: a profile that bends every generation request (levers.PEERS), e.g. dynamo-mocker
    context_window: int | None = None  # --context-window: the model's window in tokens (None: ask the endpoint)

    def headers(self, api: str) -> dict[str, str]:
        return apis.get(api).headers(self.api_key)

    @property
    def secrets(self) -> list[str]:
        """What no file or terminal line may hold: the API key, the credentials in the URL (user info,
        a key in the query) and the values of the embedded server's credential options (--api-key)."""
        return [*([self.api_key] if self.api_key else []), *secrets_from_url(self.url),
                *secrets_from_args(self.server_args)]


def discover_model(url: str, api_key: str | None, timeout: float) -> str:
    headers = {"authorization": f"Bearer {api_key}", "x-api-key": api_key} if api_key else {}
    answer = httpx.get(url.rstrip("/") + "/v1/models", headers=headers, timeout=timeout)
    answer.raise_for_status()
    return answer.json()["data"][0]["id"]


@dataclass(slots=True)
class Session:
    """One test session against an endpoint (the `hc` fixture): posts and records exchanges, shares
    scenario streams between checks, and notes a stalled endpoint. (Not a harness: in the kit a harness
    is an agent client such as Claude Code or Codex.)"""

    endpoint: Endpoint
    attached: Exchanges = field(default_factory=Exchanges)  # this test's exchanges and the paths they took
    stalled: str | None = None  # set once a stream stopped sending: the rest of the run is not judged
    stall: dict[str, Any] | None = None  # that stall as measured (results.json run.stall): request, frames, seconds
    _streams: dict[tuple[Any, ...], Transcript] = field(default_factory=dict)
    # (api, scenario, turn) -> (that turn's request, the turn-before stream it was built on): a long
    # session (test_context.py, 30 turns) builds each request once, not again from turn 0 every turn
    _bodies: dict[tuple[Any, ...], tuple[dict[str, Any], Transcript]] = field(default_factory=dict)
    check_id: str = ""  # the check running now (the plugin sets it): some take fewer levers (levers.ladder)
    _bent: dict[int, tuple[Transcript, list[str], set[str]]] = field(default_factory=dict)  # answer -> levers, wanted
    _lever_memo: dict[tuple[str, frozenset[str]], list[levers.Lever]] = field(default_factory=dict)
    _ladder_spent: dict[tuple[Any, ...], list[levers.Lever]] = field(default_factory=dict)
    _stall_seen: dict[int, tuple[Transcript, str]] = field(default_factory=dict)  # a stalled answer -> its words

    def note_stall(self, exchanges: list[tuple[str, Transcript]]) -> str | None:
        """A started answer that went silent for at least half the deadline and ran out of time is a stall
        (issue 40: whoever reads the stream; a slow answer keeps sending, one that never started is only
        slow): recorded as measured (``stall``: request, frames, seconds; results.json run.stall, and the
        run exits 4) and returned in words (None: no stall among ``exchanges``). A short probe answer then
        says whether the whole endpoint stopped: if it does not complete either, ``stalled`` is set and
        the rest of the run is not judged; if it does, only this request stalled and the run goes on."""
        deadline_ns = int(self.endpoint.timeout * 1e9)
        for label, t in exchanges:
            if id(t) in self._stall_seen and self._stall_seen[id(t)][0] is t:  # judged once (one probe)
                return self._stall_seen[id(t)][1]
            if t.error_kind not in ("deadline", "read_timeout") or not t.chunks:
                continue
            end_ns = t.timings.end_ns or deadline_ns
            silent_ns = end_ns - t.chunks[-1].t_ns
            if silent_ns < deadline_ns // 2:
                continue
            path = t.url.split("://", 1)[-1].partition("/")[2].split("?")[0]
            words = self.note_silence(label, t.method, "/" + path, frames=len(t.frames), reads=len(t.chunks),
                                      after_s=t.chunks[-1].t_ns / 1e9, silent_s=silent_ns / 1e9)
            self._stall_seen[id(t)] = (t, words)
            return words
        return None

    def note_silence(self, label: str, method: str, path: str, *, frames: int, reads: int, after_s: float,
                     silent_s: float) -> str:
        """Record a stall as measured (an answer that sent ``frames`` in ``reads`` network reads over
        ``after_s`` seconds, then nothing for ``silent_s`` until its deadline), whoever read it (``post``, a
        session fetched in threads, an official SDK's own client); a short probe answer says whether the
        whole endpoint stopped (``stalled``: the rest of the run is not judged). Returns it in words."""
        probe = None if self.stalled else self._probe_answer()
        whole = self.stalled is not None or (probe is not None and probe.error is not None)
        record = {"request": label, "method": method, "path": path, "frames": frames, "reads": reads,
                  "after_s": round(after_s, 3), "silent_s": round(silent_s, 3), "deadline_s": self.endpoint.timeout,
                  "probe": (probe.error if probe is not None and probe.error else
                            "completed" if probe is not None else "not sent")}
        words = (f"{label} ({method} {path}): {frames} frames ({reads} reads) in {after_s:.1f} s, then no data for "
                 f"{silent_s:.1f} s until the {self.endpoint.timeout:g} s deadline")
        words += (f", and a short probe answer did not complete either ({probe.error})"
                  if probe is not None and probe.error else
                  "; a short probe answer still completed (this request stalled, the run goes on)"
                  if probe is not None else "")
        if self.stall is None:
            self.stall = record
        if whole and self.stalled is None:
            self.stalled = words
        return words

    def _probe_answer(self) -> Transcript | None:
        """A short streamed answer (plain_text, the API's smallest useful output limit), not recorded."""
        api = next((a for a in apis.NAMES if a in self.endpoint.apis), None)
        if api is None:
            return None
        body = apis.get(api).first(self.scenario("plain_text"), self.endpoint.model)
        body[apis.get(api).MAX_TOKENS_FIELD] = 16
        # half the deadline: a working endpoint completes 16 tokens in far less, and a stalled run then ends
        # in about one and a half deadlines
        limit = min(max(self.endpoint.timeout / 2, 2.0), 15.0)
        return client.stream_request(self._url(apis.get(api).PATH), headers=self.endpoint.headers(api),
                                     json_body=body, timeout=limit, api=api, read_timeout=limit)

    # -- plain exchanges, recorded ------------------------------------------------------------
    def _url(self, path: str) -> str:
        return self.endpoint.url.rstrip("/") + path

    def _refuse_if_stalled(self) -> None:
        if self.stalled:
            from harnesscheck.conformance.verdict import Inconclusive

            raise Inconclusive(f"endpoint stalled earlier in the run: {self.stalled}", cause="stalled")

    def post(self, api: str, path: str, body: Any = None, *, stream: bool = False,
             headers: dict[str, str] | None = None, content: bytes | None = None, label: str = "",
             first_frames: int | None = None) -> Transcript:
        """Post and record. ``first_frames``: stop reading a 2xx event stream after that many event frames
        (acceptance is known at the status line and the first frames; wire.client)."""
        self._refuse_if_stalled()
        built = body
        body, bent = self._bend(api, path, body) if content is None else (body, [])
        merged = {**self.endpoint.headers(api), **(headers or {})}
        call = client.stream_request if stream else client.post_json

        def send(json_body: Any) -> Transcript:
            return call(self._url(path), headers=merged, json_body=None if content is not None else json_body,
                        content=content, timeout=self.endpoint.timeout, api=api, first_frames=first_frames,
                        read_timeout=self.endpoint.timeout)  # slow engines may queue a request for long

        transcript = send(body)
        pulled = [n for n in bent if n in levers.BY_NAME]
        if pulled and transcript.status is not None and 400 <= transcript.status < 500 and \
                transcript.status not in (401, 403, 408, 429):
            # the endpoint refused a lever: no check judges that refusal; the request goes as the check built it
            self.attached.refusals.append((pulled, transcript))
            body, bent = self._bend(api, path, built, with_levers=False)
            transcript = send(body)
        if bent:
            self._bent[id(transcript)] = (transcript, bent, set(self.attached.wanted))
        self.attach(label or f"POST {path}", transcript)
        stalled = self.note_stall([(label or f"POST {path}", transcript)])
        if stalled:  # this request stalled: the check says so, not "timeout"
            from harnesscheck.conformance.verdict import Inconclusive

            raise Inconclusive(f"the endpoint stalled: {stalled}", cause="stalled")
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
        marked = self._bent.get(id(transcript))
        if marked is not None and marked[0] is transcript:
            self.attached.bent[label] = marked[1]
            if not levers.allowed(marked[1], self.check_id):  # e.g. a forced answer, for a rule on unforced ones
                return
        self.saw(*paths_in(transcript))

    # -- levers (conformance/levers.py): what bends a generation request, and the ladder -------------
    def _bend(self, api: str, path: str, body: Any, *, with_levers: bool = True) -> tuple[Any, list[str]]:
        """A generation request as the peer profile and this check's levers send it, and their names."""
        if api not in apis.APIS or path.split("?")[0] != apis.get(api).PATH or not isinstance(body, dict):
            return body, []
        names: list[str] = []
        if self.endpoint.peer:
            body, names = levers.peer_bend(self.endpoint.peer, api, body)
        if self.attached.levers and with_levers:
            body, used = levers.bend(self.attached.levers, api, body, self.attached.wanted, bound=self._bound)
            names += used
        if self.attached.budget > 1 and with_levers:
            body, used = levers.grown(api, body, self.attached.budget)
            names += used
        body, self.attached.at_bound = self.quick_bound(api, body)
        return body, names

    @property
    def _bound(self) -> int | None:
        """--quick: the most output tokens a request may ask for (a lever that needs more is not pulled)."""
        return QUICK_BUDGET if self.endpoint.quick else None

    def quick_bound(self, api: str, body: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        """--quick: the request with its output limit at most QUICK_BUDGET (options.QUICK_LEAVES_OUT), and
        whether the limit is at that bound; unchanged (and False) otherwise."""
        return levers.bounded(api, body, QUICK_BUDGET) if self.endpoint.quick else (body, False)

    def _sample(self, wanted: set[str], attempt: Callable[[], T], on: list[levers.Lever],
                taken: Callable[[T], bool] | None = None) -> tuple[T, bool, str | None, levers.Tried]:
        """One try of `attempt` with the levers `on`: its result, whether it took a wanted path (or, given
        `taken`, whether `taken(result)` says so), the API of its last generation answer (None: it made
        none), and the record of it."""
        self.attached.levers, self.attached.wanted, self.attached.recent = list(on), wanted, set()
        mark, refusals, sent = len(self.attached), len(self.attached.refusals), len(self.attached.sent)
        result = attempt()
        answers = [t for _, t in self.attached[mark:]
                   if t.api in apis.APIS and t.url.split("?")[0].endswith(apis.get(t.api).PATH)]
        last = answers[-1] if answers else None
        took = taken(result) if taken is not None else bool(self.attached.recent & wanted)
        if last is None and self.attached.sent[sent:]:  # the attempt's requests went outside `post` (an SDK)
            api, names, what, refused = self.attached.sent[-1]
            record = levers.Tried(levers=list(names), wanted=sorted(wanted), came_back=what, took=took,
                                  refused=refused)
            record.extra["timed_out"] = False
            record.extra["cut"] = levers.OUTPUT_LIMIT_WORDS in what
            self.attached.tried.append(record)
            return result, took, api, record
        marked = self._bent.get(id(last)) if last is not None else None
        used = marked[1] if marked is not None and marked[0] is last else []
        refused = self.attached.refusals[refusals:]
        if refused:  # the levers as sent, and the endpoint's refusal of them (the check got the request as built)
            names, answer = refused[-1]
            record = levers.Tried(levers=names, wanted=sorted(wanted), came_back=levers.came_back(answer.api, answer),
                                  took=took, refused=True)
        else:
            record = levers.Tried(levers=[n for n in used if not n.startswith("replay:")], wanted=sorted(wanted),
                                  came_back=levers.came_back(last.api, last) if last is not None else "no request",
                                  took=took, refused=bool(answers) and all(
                                      t.status is not None and 400 <= t.status < 500 for t in answers))
        record.extra["timed_out"] = last is not None and last.error_kind in ("deadline", "read_timeout",
                                                                              "connect_timeout", "timeout")
        record.extra["cut"] = last is not None and levers.cut_by_limit(last.api, last)
        self.attached.tried.append(record)
        return result, took, last.api if last is not None else None, record

    def peer_extra(self, api: str, body: dict[str, Any]) -> dict[str, Any]:
        """What the peer profile adds to a generation request sent outside `post` (an official SDK's own
        call takes it as `extra_body`), e.g. dynamo-mocker's nvext annotation; {} without a profile."""
        if not self.endpoint.peer:
            return {}
        bent, _ = levers.peer_bend(self.endpoint.peer, api, body)
        return {k: v for k, v in bent.items() if k not in body}

    def lever_extra(self, api: str, body: dict[str, Any]) -> dict[str, Any]:
        """What this sample's levers add to a generation request sent outside `post` (an official SDK's own
        call takes it as `extra_body`: the fields the levers added or changed), recorded as one request of
        the sample (`sent_came_back` says what came back); {} when no lever applies."""
        bent, used = levers.bend(self.attached.levers, api, body, self.attached.wanted, bound=self._bound)
        if self.attached.budget > 1:
            bent, grown = levers.grown(api, bent, self.attached.budget)
            used = [*used, *grown]
        bent, self.attached.at_bound = self.quick_bound(api, bent)
        self.attached.sent.append([api, used, "an answer", False])
        return {k: v for k, v in bent.items() if k not in body or body[k] != v}

    def sent_came_back(self, what: str, *, refused: bool = False) -> None:
        """What came back to the last request `lever_extra` bent (levers.Tried.came_back), and whether the
        endpoint refused the levers on it (a 4xx: dropped, as `post` drops them)."""
        if self.attached.sent:
            self.attached.sent[-1][2:] = [what, refused]

    def lever_record(self) -> dict[str, Any]:
        """This check's levers for its result (results.json `levers`): every sample a ladder took, with the
        levers on it and what came back, and the levers (or peer profile) behind each answer it judged;
        {} when none was pulled."""
        pulled = any(t.levers for t in self.attached.tried) or self.attached.bent
        if not pulled:
            return {}
        return {"tried": [t.to_dict() for t in self.attached.tried], "judged": dict(self.attached.bent)}

    # -- coverage: the paths this check saw, and retries of scenarios that depend on them ------------
    @property
    def exercised(self) -> frozenset[str]:
        """The paths (catalog.PATHS) the current check's answers took, or the check marked."""
        return frozenset(self.attached.paths)

    def note(self, text: str) -> None:
        """Say how the current check judged (shown in its result's notes), e.g. which witness spoke."""
        self.attached.notes.append(text)

    def saw(self, *paths: str) -> None:
        self.attached.paths.update(paths)
        self.attached.recent.update(paths)

    def require_exercised(self, check_id: str) -> None:
        """Inconclusive (not-exercised) when one of the check's rules saw none of the paths it needs."""
        from harnesscheck.conformance.verdict import Inconclusive

        check = catalog.get(check_id)
        if catalog.unexercised(check, self.exercised):
            raise Inconclusive(catalog.not_exercised_reason(check, self.exercised), cause="not-exercised")

    def until_taken(self, paths: Iterable[str], attempt: Callable[[], T],
                    taken: Callable[[T], bool] | None = None) -> tuple[T, bool]:
        """Run a scenario that depends on the model taking one of `paths`: as the check built it, then with
        the levers of its API (levers.ladder: one more each try, a refused one dropped), then the strongest
        accepted set for the rest of --tries; return the first try that took one (True), else the last
        (False). `taken(result)`, where given, says whether a try took the path the check judges (a forced
        answer not cut before its call, a call the limit cut); `paths` then only picks the levers. The
        levers that took it stay on for the check's later opening requests (the same request, e.g. with
        tool_choice none), and a later check of the same API and paths starts with them. Every try is
        recorded, so a check judges each one: a broken contract on any try is a failure, a path never taken
        is not (its result says which levers were tried and what came back)."""
        wanted = set(paths)
        result, took, api, record = self._sample(wanted, attempt, [], taken)
        if took or api is None or record.refused or record.extra["timed_out"]:
            if not took and api is None:  # it made no request the kit can bend: plain tries, as before
                for _ in range(max(1, self.endpoint.tries) - 1):
                    result, took, _, _ = self._sample(wanted, attempt, [], taken)
                    if took:
                        break
            if not took:
                self.attached.levers = []
            return result, took
        key = (api, frozenset(wanted))
        plan: list[list[levers.Lever]] = []
        if key in self._lever_memo:  # what took this path before, for this API: first
            plan.append(self._lever_memo[key])
        ladder = levers.ladder(api, wanted, check_id=self.check_id)
        # a ladder spent without taking the path is not climbed again by a check with the same ladder (a check
        # that takes fewer levers, catalog.LEVERS_UNFORCED / LEVERS_OWN_FORCING, climbs its own, and spends only its own)
        spent = (*key, tuple(lever.name for lever in ladder))
        active = [lever for lever in self._ladder_spent.get(spent, [])
                  if levers.allowed([lever.name], self.check_id)]
        refused: set[str] = set()
        ladder = [] if spent in self._ladder_spent else ladder

        cut_on: list[levers.Lever] | None = [] if record.extra.get("cut") else None  # the last levers a cut try had

        def run(on: list[levers.Lever]) -> bool:
            nonlocal result, took, record, cut_on
            result, took, _, record = self._sample(wanted, attempt, on, taken)
            if took:
                self._lever_memo[key] = on
            if record.extra.get("cut"):
                cut_on = list(on)
            return took or record.extra["timed_out"]  # a deadline: more tries would wait it out again

        for on in plan:
            if not levers.allowed([lever.name for lever in on], self.check_id):
                continue
            if run(on):
                return self._taken(result, took)
        unapplied = False
        for lever in ladder:
            if lever.fallback and lever.fallback not in refused:
                continue
            if run([*active, lever]):
                return self._taken(result, took)
            if record.refused:
                refused.add(lever.name)
            elif lever.name in record.levers:  # it applied and was accepted: keep it on
                active = [*active, lever]
            else:  # it did not apply to this request (no tools to name or force): another check's may take it
                unapplied = True
        if ladder and not unapplied:
            self._ladder_spent[spent] = active
        for _ in range(max(1, self.endpoint.tries) - 1):
            if run(active):
                return self._taken(result, took)
        # Answers cut by the output limit before the path (a model still reasoning): a larger budget, times
        # levers.GROWTH each try up to the scenario's cap, with the levers that were accepted (issue 40)
        grow = cut_on
        steps = QUICK_GROWTH_STEPS if self.endpoint.quick else None  # --quick: one step, so no answer runs minutes
        while grow is not None and levers.room_to_grow(self.attached.budget) and steps != 0 \
                and not self.attached.at_bound:  # --quick: a limit at its bound cannot grow
            steps = None if steps is None else steps - 1
            self.attached.budget *= levers.GROWTH
            if run(grow):
                return self._taken(result, took)
            if not record.extra.get("cut"):  # it ended before the limit, still without the path: no budget helps
                break
        return self._taken(result, took)

    def _taken(self, result: T, took: bool) -> tuple[T, bool]:
        if not took:
            self.attached.levers = []  # nothing stays on for the check's later requests
            self.attached.budget = 1
        return result, took

    def streams_taking(self, api: str, scenario_id: str, paths: Iterable[str]) -> list[Transcript]:
        """The shared stream of a scenario's turn 0, then fresh ones, up to --tries in all, until one
        takes one of `paths`; the newest becomes the shared stream (the one that took the path, if one
        did). Returns every stream tried (post records each, and the paths it took)."""
        tried: list[Transcript] = []

        def attempt() -> Transcript:
            key = (api, scenario_id, 0)
            if tried:  # the shared stream did not take the path: a new sample of the same request
                body = self.request_for(api, scenario_id, 0)
                self._streams[key] = self.post(api, apis.get(api).PATH, body, stream=True, label=f"{scenario_id} turn 0 "
                                               f"(try {len(tried) + 1})")
                for later in [k for k in self._streams if k[:2] == (api, scenario_id) and k[2] > 0]:
                    del self._streams[later]  # built on the old answer
            else:
                self.stream(api, scenario_id)
            tried.append(self._streams[key])
            return self._streams[key]

        self.until_taken(paths, attempt)
        return tried

    # -- scenario streams, shared between checks ------------------------------------------------
    def scenario(self, scenario_id: str) -> Scenario:
        return get_scenario(scenario_id)

    def body(self, api: str, scenario_id: str, *, stream: bool = True) -> dict[str, Any]:
        return apis.get(api).first(self.scenario(scenario_id), self.endpoint.model, stream=stream)

    def stream(self, api: str, scenario_id: str, *, turn: int = 0) -> Transcript:
        """The streamed answer to a scenario's turn (history from the endpoint's own answers)."""
        key = (api, scenario_id, turn)
        if key not in self._streams:
            body = self.request_for(api, scenario_id, turn)
            self._streams[key] = self.post(api, apis.get(api).PATH, body, stream=True,
                                           label=f"{scenario_id} turn {turn}")
            kept, wanted = self._kept(api, scenario_id) if turn > 0 else ([], set())
            if kept and id(self._streams[key]) not in self._bent:  # it carries the opening's thinking switch
                self._bent[id(self._streams[key])] = (self._streams[key], [lv.name for lv in kept], wanted)
        transcript = self._streams[key]
        self.attach(f"{scenario_id} turn {turn}", transcript)
        return transcript

    def request_for(self, api: str, scenario_id: str, turn: int) -> dict[str, Any]:
        scenario = self.scenario(scenario_id)
        body, start = apis.get(api).first(scenario, self.endpoint.model), 1
        for k in range(turn, 0, -1):  # the latest request built on the streams still shared
            memo = self._bodies.get((api, scenario_id, k))
            if memo is not None and memo[1] is self._streams.get((api, scenario_id, k - 1)):
                body, start = copy.deepcopy(memo[0]), k + 1
                break
        for k in range(start, turn + 1):
            before = self.stream(api, scenario_id, turn=k - 1)
            answer = final_answer(api, before)
            if answer is None:
                return copy.deepcopy(body)
            body = apis.get(api).follow(body, answer, scenario, k)  # follow copies: the memo stays as built
            self._bodies[(api, scenario_id, k)] = (body, before)
        if start <= turn:
            body = copy.deepcopy(body)  # the caller's to change; the memo keeps its own
        if turn > 0:  # a conversation keeps the words and the thinking switch its opening answer was sampled with
            body = self.conversation_levers(api, body, scenario_id)
        return body

    def conversation_levers(self, api: str, body: dict[str, Any], scenario_id: str) -> dict[str, Any]:
        """A later turn's request (built outside `request_for`, e.g. by a session fetched in a thread) with
        the settings a client keeps from the scenario's opening answer (the words, the thinking switch)."""
        kept, wanted = self._kept(api, scenario_id)
        if kept:
            body = levers.bend(kept, api, body, wanted, keep_forcing=scenario_id in levers.SESSIONS_KEEP_FORCING,
                               bound=self._bound)[0]
        opened = self._bent.get(id(self._streams.get((api, scenario_id, 0))))
        scale = levers.budget_of(opened[1]) if opened and opened[0] is self._streams.get((api, scenario_id, 0)) else 1
        return levers.grown(api, body, scale)[0] if scale > 1 else body  # and the output limit it grew to

    def _kept(self, api: str, scenario_id: str) -> tuple[list[levers.Lever], set[str]]:
        """The levers a conversation keeps on every later turn (levers.Lever.conversation) from the one its
        shared opening answer was sampled with, and the paths they were pulled toward."""
        opened = self._bent.get(id(self._streams.get((api, scenario_id, 0))))
        if not opened or opened[0] is not self._streams.get((api, scenario_id, 0)):
            return [], set()
        forcing = scenario_id in levers.SESSIONS_KEEP_FORCING
        kept = [levers.BY_NAME[n] for n in opened[1]
                if n in levers.BY_NAME and (levers.BY_NAME[n].conversation or (forcing and levers.BY_NAME[n].forcing))]
        return kept, set(opened[2])


def final_answer(api: str, transcript: Transcript) -> dict[str, Any] | None:
    """The answer folded from a stream, in the shape of the API's non-stream response."""
    return apis.get(api).final_answer(transcript)


def paths_in(transcript: Transcript) -> set[str]:
    """The paths (catalog.PATHS) a generation answer took: tool use, parallel calls, thinking,
    interleaving (reasoning, call, reasoning, call), an agent turn (reasoning before a call), cache hits."""
    api = transcript.api
    if api not in apis.APIS or not transcript.ok or not transcript.url.split("?")[0].endswith(apis.get(api).PATH):
        return set()
    try:
        answer = final_answer(api, transcript) if transcript.frames else transcript.json_body()
    except Exception:  # an answer that does not fold took no path the kit can name; the grammar judges it
        return set()
    if not isinstance(answer, dict):
        return set()
    kinds = answer_kinds(api, answer)
    seen = set()
    if "tool" in kinds:
        seen.add(catalog.TOOL_USE)
    if kinds.count("tool") >= 2:
        seen.add(catalog.PARALLEL)
    if "reasoning" in kinds:
        seen.add(catalog.THINKING)
        if "tool" in kinds[kinds.index("reasoning"):]:
            seen.add(catalog.AGENT_TURN)
    if _in_order(kinds, ("reasoning", "tool", "reasoning", "tool")):
        seen.add(catalog.INTERLEAVING)
    if apis.get(api).usage_tokens(answer)[2] > 0:
        seen.add(catalog.CACHE_HIT)
    return seen


def _in_order(kinds: list[str], pattern: tuple[str, ...]) -> bool:
    """True when `pattern` occurs in `kinds` as a subsequence (in order, gaps allowed)."""
    rest = iter(kinds)
    return all(any(k == want for k in rest) for want in pattern)


def answer_kinds(api: str, answer: dict[str, Any]) -> list[str]:
    """The kinds of an answer's parts in model order: "reasoning", "tool" or "text"."""
    return ["tool" if kind == "tool_call" else kind for kind, _ in apis.get(api).parts(answer)]


def api_key_from_env(value: str | None) -> str | None:
    return value or os.environ.get("HARNESSCHECK_API_KEY") or None
