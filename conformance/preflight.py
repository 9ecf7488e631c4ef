"""Preflight: is the endpoint usable at all, before any check (or client, replay, profile, SWE-bench
run) starts?

A run against a closed port, a plain file server, a wrong API key or a model the endpoint does
not serve would otherwise fail every check for the same reason. `preflight` asks a few short
questions instead and answers ok, or one line saying what is wrong and what to do:

1. the URL is well formed (http or https, a host, a valid port);
2. something answers HTTP there (connection refused, no TLS, no HTTP answer: said as such);
3. it speaks an LLM API: `GET /v1/models` lists models, or an API's route answers an empty
   request with a JSON object (an error in its own shape is fine: `POST /v1/messages {}` costs
   no generation);
4. it accepts the API key (401 or 403 on any probe: refused);
5. with a model given and a model list served, the model is on the list: every page of it
   (`has_more`, then `?after_id=LAST`, as Anthropic's list pages);
6. where asked (`generate`: the suite, `check` and `run`), it generates: one one-token answer per selected
   API (the API's smallest output limit) with the model given, else the first listed. An endpoint that
   answers every one of them with a 5xx, or with no HTTP answer, stops the run with one line naming the
   status and body, instead of a suite of failures named after properties never measured (issue 41: a
   proxy that could not route the model answered a bare 500 to every generation).

Real endpoints can be slow to answer their first request (a gateway starting lazily took 7.7 s,
then 0.25 s), so each probe waits up to the run's `timeout` (`--timeout`) for its first byte and
for its whole answer: a slow drip is bounded by the same deadline, and a probe that runs out of it
ends the preflight at once with that line (so an endpoint that sends one byte a second fails in
about one deadline). After a few seconds of waiting, `progress` (when given) is told what the
probe waits for. Preflight never raises for what the endpoint does.

`check/run`, `clients`, `replay`, `profile` and `swebench run` all use it (`require_usable`).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

import httpx

from harnesscheck.protocol import apis as api_modules
from harnesscheck.protocol.apis.base import ANTHROPIC_VERSION
from harnesscheck.conformance.options import url_problem
from harnesscheck.protocol.wire.redact import redact_text, secrets_from_url
from harnesscheck.protocol.wire.client import tls_context

__all__ = ["PROBE_CAP_S", "Preflight", "preflight", "probe_timeout", "require_usable", "say"]

# Commands whose --timeout bounds a longer task (a client turn, a replayed request, an agent run) give each
# probe at most this (`probe_timeout`); check and run give it their --timeout as it is.
PROBE_CAP_S = 60.0
SAY_AFTER_S = 3.0  # a probe still waiting after this long says what it waits for (then every SAY_EVERY_S)
SAY_EVERY_S = 10.0
MAX_PAGES = 50  # model-list pages read at most
_MAX_BODY = 1 << 20

Progress = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class Preflight:
    """The answer: `ok`, else `problem` is the one line to print. `models` is what /v1/models lists."""

    ok: bool
    problem: str = ""
    models: tuple[str, ...] = ()
    seconds: float = 0.0


@dataclass(slots=True)
class _Answer:
    status: int  # 0: no complete HTTP answer (`failure` says what happened)
    content_type: str = ""
    body: Any = None  # the parsed JSON, or None when the body is not JSON
    failure: str = ""
    text: str = ""  # the body's first bytes, as text

    def describe(self) -> str:
        if self.failure:
            return self.failure
        kind = self.content_type.split(";")[0].strip() or "no content type"
        return f"HTTP {self.status} {'JSON' if self.body is not None else kind}"


class _Unusable(Exception):
    """Raised inside preflight with the line to print."""


def preflight(url: str, *, api_key: str | None, model: str | Sequence[str] | None, apis: list[str],
              timeout: float, progress: Progress | None = None, generate: bool = False) -> Preflight:
    """Probe `url` (the endpoint's base URL) as the suite will use it; see the module docstring.
    `model`: one model id or several that must all be served; `timeout`: each probe's deadline, from
    its start to the last byte of its answer; `generate`: ask each API in `apis` for a one-token answer."""
    started = time.monotonic()
    wanted = (model,) if isinstance(model, str) else tuple(model or ())
    secrets = [*secrets_from_url(url), *([api_key] if api_key else [])]  # the lines quote the URL
    said = (lambda line: progress(redact_text(line, secrets))) if progress is not None else None
    try:
        models = asyncio.run(_run(url, api_key=api_key, models=wanted, apis=apis, timeout=timeout,
                                  progress=said, generate=generate))
    except _Unusable as unusable:
        return Preflight(ok=False, problem=redact_text(str(unusable), secrets), seconds=time.monotonic() - started)
    return Preflight(ok=True, models=models, seconds=time.monotonic() - started)


def probe_timeout(task_timeout: float) -> float:
    """A probe's deadline for a command whose --timeout bounds a longer task: that, at most PROBE_CAP_S."""
    return min(task_timeout, PROBE_CAP_S)


def say(line: str) -> None:
    """The commands' `progress`: a preflight line on stdout, at once."""
    print(line, flush=True)


def require_usable(url: str, *, api_key: str | None, model: str | Sequence[str] | None, apis: list[str],
                   timeout: float, progress: Progress | None = None, generate: bool = False) -> Preflight:
    """`preflight`, raising UsageError (one line, exit 2 in every command) when the endpoint is unusable."""
    from harnesscheck.errors import UsageError

    checked = preflight(url, api_key=api_key, model=model, apis=apis, timeout=timeout, progress=progress,
                        generate=generate)
    if not checked.ok:
        raise UsageError(checked.problem)
    return checked


async def _run(url: str, *, api_key: str | None, models: tuple[str, ...], apis: list[str], timeout: float,
               progress: Progress | None, generate: bool = False) -> tuple[str, ...]:
    listed = await _usable(url, api_key=api_key, models=models, apis=apis, timeout=timeout, progress=progress)
    model = (models or listed or ("",))[0]
    if generate and model:
        await _generates(url, api_key=api_key, model=model, apis=apis, timeout=timeout, progress=progress)
    return listed


def _client(api_key: str | None, timeout: float) -> httpx.AsyncClient:
    headers = {"anthropic-version": ANTHROPIC_VERSION}
    if api_key:
        headers |= {"x-api-key": api_key, "authorization": f"Bearer {api_key}"}
    # each read and connect; the probe's whole deadline is _Probe's
    return httpx.AsyncClient(verify=tls_context(), timeout=httpx.Timeout(timeout), headers=headers,
                             follow_redirects=False)


async def _generates(url: str, *, api_key: str | None, model: str, apis: list[str], timeout: float,
                     progress: Progress | None) -> None:
    """One one-token answer per API; _Unusable when every one is a 5xx or no HTTP answer."""
    from harnesscheck.scenarios.loader import get as get_scenario

    base, broken = url.rstrip("/"), []
    async with _client(api_key, timeout) as client:
        probe = _Probe(client, base, timeout, progress)
        for api in apis:
            module = api_modules.get(api)
            body = module.first(get_scenario("plain_text"), model, stream=False)
            body = {**body, module.MAX_TOKENS_FIELD: module.MIN_OUTPUT_TOKENS}
            answer = await probe("POST", module.PATH, body)
            if answer.status and answer.status < 500:
                return  # one API generates (or refuses in its own words): the checks judge the rest
            text = answer.failure or (json.dumps(answer.body)[:200] if answer.body is not None else
                                      answer.text[:200] or "an empty body")
            broken.append(f"POST {module.PATH}: " + (f"HTTP {answer.status} {text}" if answer.status else text))
    if broken:
        raise _Unusable(f"{base} answers no generation (one one-token request per API, model {model!r}): "
                        f"{'; '.join(broken)}; every check would fail for this one cause")


async def _usable(url: str, *, api_key: str | None, models: tuple[str, ...], apis: list[str], timeout: float,
                  progress: Progress | None) -> tuple[str, ...]:
    problem = url_problem(url)
    if problem:
        raise _Unusable(problem)
    base = url.rstrip("/")
    seen: list[str] = []
    async with _client(api_key, timeout) as client:
        probe = _Probe(client, base, timeout, progress)
        # GET /v1/models first: the model list, and most often the key check; then the routes of
        # the APIs to check until one answers in an API's shape.
        answer = await probe("GET", "/v1/models")
        _refused_key(answer, "GET /v1/models", api_key)
        listed = _model_ids(answer)
        seen.append(f"GET /v1/models: {answer.describe()}")
        if listed is not None:
            listed = await _more_pages(probe, answer, listed, models, api_key)
        in_shape = listed is not None
        for api in apis:
            if in_shape:  # the list, or one route, answered past the key check: enough
                break
            path = api_modules.get(api).PATH
            route = await probe("POST", path)
            _refused_key(route, f"POST {path}", api_key)
            seen.append(f"POST {path}: {route.describe()}")
            in_shape = isinstance(route.body, dict) and route.status not in (404, 405, 501)
    if not in_shape:
        hint = "drop the trailing /v1 (the kit adds it)" if urlsplit(base).path.endswith("/v1") else \
            "is this the server's base URL, and its port?"
        raise _Unusable(f"{base} does not answer as an LLM API ({'; '.join(seen)}); {hint}")
    if listed is None:
        if not models:
            raise _Unusable(f"{base} lists no models (GET /v1/models: {answer.describe()}); "
                            "pass the model with --model")
        return ()
    if not listed:
        if not models:
            raise _Unusable(f"{base}/v1/models lists no model; pass the model with --model")
        return ()
    missing = [m for m in models if m not in listed]
    if missing:
        shown = ", ".join(listed[:6]) + (f" and {len(listed) - 6} more" if len(listed) > 6 else "")
        raise _Unusable(f"the endpoint does not serve the model {missing[0]!r} (GET /v1/models lists {shown}); "
                        f"pass one of them with --model")
    return listed


async def _more_pages(probe: _Probe, answer: _Answer, listed: tuple[str, ...], models: tuple[str, ...],
                      api_key: str | None) -> tuple[str, ...]:
    """The later pages of a paginated model list (`has_more` with `last_id`, Anthropic's
    `?after_id=`), until every wanted model is found, the list ends, or MAX_PAGES."""
    body = answer.body
    for _ in range(MAX_PAGES):
        if all(m in listed for m in models) and models:
            break
        last = body.get("last_id") or (listed[-1] if listed else None)
        if body.get("has_more") is not True or not isinstance(last, str):
            break
        path = f"/v1/models?after_id={quote(last, safe='')}"
        page = await probe("GET", path)
        _refused_key(page, f"GET {path}", api_key)
        more = _model_ids(page)
        if not more or all(m in listed for m in more):  # no progress: stop rather than loop
            break
        listed += tuple(m for m in more if m not in listed)
        body = page.body
    return listed


class _Probe:
    """One request at a time, each bounded from its start to the last byte of its answer by the
    deadline; a probe still waiting after SAY_AFTER_S tells `progress` what it waits for."""

    def __init__(self, client: httpx.AsyncClient, base: str, timeout: float, progress: Progress | None):
        self.client, self.base, self.timeout, self.progress = client, base, timeout, progress

    async def __call__(self, method: str, path: str, body: dict[str, Any] | None = None) -> _Answer:
        """The answer, its body read up to 1 MiB. Nothing there (refused, no TLS, no answer in time)
        ends the preflight with the line that explains it; a broken answer (reset, not HTTP) is
        noted and the next probe may still find the API."""
        state: dict[str, Any] = {"status": None, "bytes": 0}
        task = asyncio.ensure_future(self._fetch(method, path, state, body))
        started = time.monotonic()
        say_at = SAY_AFTER_S
        try:
            while True:
                waited = time.monotonic() - started
                left = self.timeout - waited
                if left <= 0:
                    raise _Unusable(self._late(method, path, state))
                step = min(left, max(0.01, say_at - waited)) if self.progress is not None else left
                done, _ = await asyncio.wait({task}, timeout=step)
                if done:
                    return task.result()
                waited = time.monotonic() - started
                if self.progress is not None and waited >= say_at and waited < self.timeout:
                    self.progress(self._waiting(method, path, state, waited))
                    say_at += SAY_EVERY_S
        except httpx.HTTPError as error:
            raise _Unusable(_transport_problem(error, self.base, f"{method} {path}", self.timeout)) from None
        finally:
            if not task.done():
                task.cancel()
                try:
                    await task
                except (asyncio.CancelledError, Exception):
                    pass

    async def _fetch(self, method: str, path: str, state: dict[str, Any], body: dict[str, Any] | None) -> _Answer:
        raw = b""
        try:
            json_body: dict[str, Any] | None = (body or {}) if method == "POST" else None
            async with self.client.stream(method, self.base + path, json=json_body) as response:
                state["status"] = response.status_code
                async for chunk in response.aiter_bytes():
                    raw += chunk
                    state["bytes"] = len(raw)
                    if len(raw) > _MAX_BODY:
                        break
        except (httpx.RemoteProtocolError, httpx.ReadError, httpx.DecodingError) as error:
            return _Answer(status=0, failure=f"no HTTP answer ({str(error) or type(error).__name__})")
        try:
            parsed = json.loads(raw)
        except ValueError:
            parsed = None
        return _Answer(status=response.status_code, content_type=response.headers.get("content-type", ""),
                       body=parsed, text=raw[:400].decode("utf-8", "replace"))

    def _waiting(self, method: str, path: str, state: dict[str, Any], waited: float) -> str:
        what = "its status line and headers" if state["status"] is None else \
            f"the rest of its HTTP {state['status']} answer ({state['bytes']} bytes so far)"
        return (f"preflight: {method} {path} at {self.base}: waiting for {what} after {waited:.0f} s "
                f"(up to {self.timeout:g} s, --timeout)")

    def _late(self, method: str, path: str, state: dict[str, Any]) -> str:
        if state["status"] is None:
            return (f"{self.base} accepted the connection but sent no HTTP answer to {method} {path} within "
                    f"{self.timeout:g} s (--timeout): is an HTTP server up there? a slow one needs a longer "
                    "--timeout")
        return (f"{self.base} answered {method} {path} with HTTP {state['status']} but sent only {state['bytes']} "
                f"bytes of its body within {self.timeout:g} s (--timeout): too slow to use")


def _causes(error: BaseException) -> list[BaseException]:
    """The error and what caused it (anyio's "All connection attempts failed" hides the refusal)."""
    chain: list[BaseException] = []
    while error is not None and len(chain) < 10:
        chain.append(error)
        error = error.__cause__ or error.__context__  # type: ignore[assignment]
    return chain


def _transport_problem(error: httpx.HTTPError, base: str, what: str, timeout: float) -> str:
    reason = str(error) or type(error).__name__
    if any(isinstance(e, ConnectionRefusedError) for e in _causes(error)):
        reason = "connection refused"
    if isinstance(error, httpx.ConnectTimeout):
        return f"cannot connect to {base}: no answer within {timeout:g} s (a wrong host or a firewall?)"
    if isinstance(error, httpx.ConnectError):
        if "ssl" in reason.lower() or "tls" in reason.lower():
            return (f"cannot connect to {base}: the TLS handshake failed ({reason}); "
                    "is it http:// rather than https://?")
        if "refused" in reason.lower():
            return f"cannot connect to {base}: connection refused; is the server running, on that port?"
        return f"cannot connect to {base}: {reason}"
    if isinstance(error, httpx.TimeoutException):
        return (f"{base} accepted the connection but sent no HTTP answer to {what} within {timeout:g} s "
                "(--timeout)")
    return f"{what} at {base} failed: {type(error).__name__}: {reason}"


def _refused_key(answer: _Answer, what: str, api_key: str | None) -> None:
    if answer.status in (401, 403):
        if api_key:
            raise _Unusable(f"the endpoint refused the API key (HTTP {answer.status} on {what}); "
                            "pass the right one with --api-key or HARNESSCHECK_API_KEY")
        raise _Unusable(f"the endpoint wants an API key (HTTP {answer.status} on {what}); "
                        "pass it with --api-key or HARNESSCHECK_API_KEY")


def _model_ids(answer: _Answer) -> tuple[str, ...] | None:
    """The ids of a model list in the OpenAI or Anthropic shape (`{"data": [{"id": ...}]}`), else None."""
    body = answer.body
    if answer.status != 200 or not isinstance(body, dict) or not isinstance(body.get("data"), list):
        return None
    return tuple(m["id"] for m in body["data"] if isinstance(m, dict) and isinstance(m.get("id"), str))
