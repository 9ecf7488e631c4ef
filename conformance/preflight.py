"""Preflight: is the endpoint usable at all, before any check runs?

A run against a closed port, a plain file server, a wrong API key or a model the endpoint does
not serve would otherwise fail every check for the same reason. `preflight` asks a few short
questions instead and answers ok, or one line saying what is wrong and what to do:

1. the URL is well formed (http or https, a host, a valid port);
2. something answers HTTP there (connection refused, no TLS, no HTTP answer: said as such);
3. it speaks an LLM API: `GET /v1/models` lists models, or an API's route answers an empty
   request with a JSON object (an error in its own shape is fine: `POST /v1/messages {}` costs
   no generation);
4. it accepts the API key (401 or 403 on any probe: refused);
5. with a model given and a model list served, the model is on the list.

Each probe has a short timeout and the whole preflight a deadline of a few seconds; it never
raises for what the endpoint does.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

from harnesscheck.conformance import apis as api_modules
from harnesscheck.conformance.apis.base import ANTHROPIC_VERSION
from harnesscheck.conformance.options import url_problem
from harnesscheck.conformance.wire.client import new_client

__all__ = ["Preflight", "preflight"]

PROBE_TIMEOUT_S = 3.0  # at most, per probe; less when --timeout is shorter
DEADLINE_S = 8.0  # no new probe starts after this
_MAX_BODY = 1 << 20


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

    def describe(self) -> str:
        if self.failure:
            return self.failure
        kind = self.content_type.split(";")[0].strip() or "no content type"
        return f"HTTP {self.status} {'JSON' if self.body is not None else kind}"


class _Unusable(Exception):
    """Raised inside preflight with the line to print."""


def preflight(url: str, *, api_key: str | None, model: str | None, apis: list[str],
              timeout: float) -> Preflight:
    """Probe `url` (the endpoint's base URL) as the suite will use it; see the module docstring."""
    started = time.monotonic()
    try:
        models = _run(url, api_key=api_key, model=model, apis=apis,
                      probe_timeout=min(timeout, PROBE_TIMEOUT_S), deadline=started + DEADLINE_S)
    except _Unusable as unusable:
        return Preflight(ok=False, problem=str(unusable), seconds=time.monotonic() - started)
    return Preflight(ok=True, models=models, seconds=time.monotonic() - started)


def _run(url: str, *, api_key: str | None, model: str | None, apis: list[str], probe_timeout: float,
         deadline: float) -> tuple[str, ...]:
    problem = url_problem(url)
    if problem:
        raise _Unusable(problem)
    base = url.rstrip("/")
    headers = {"anthropic-version": ANTHROPIC_VERSION}
    if api_key:
        headers |= {"x-api-key": api_key, "authorization": f"Bearer {api_key}"}
    seen: list[str] = []
    with new_client(timeout=probe_timeout, headers=headers, follow_redirects=False) as client:
        # GET /v1/models first: the model list, and most often the key check; then the routes of
        # the APIs to check until one answers in an API's shape.
        answer = _probe(client, base, "GET", "/v1/models", probe_timeout)
        _refused_key(answer, "GET /v1/models", api_key)
        models = _model_ids(answer)
        seen.append(f"GET /v1/models: {answer.describe()}")
        in_shape = models is not None
        for api in apis:
            if time.monotonic() > deadline:
                break
            path = api_modules.get(api).PATH
            route = _probe(client, base, "POST", path, probe_timeout)
            _refused_key(route, f"POST {path}", api_key)
            seen.append(f"POST {path}: {route.describe()}")
            if isinstance(route.body, dict) and route.status not in (404, 405, 501):
                in_shape = True
            if in_shape:  # one route answered past the key check: enough
                break
    if not in_shape:
        hint = "drop the trailing /v1 (the kit adds it)" if urlsplit(base).path.endswith("/v1") else \
            "is this the server's base URL, and its port?"
        raise _Unusable(f"{base} does not answer as an LLM API ({'; '.join(seen)}); {hint}")
    if models is None:
        if not model:
            raise _Unusable(f"{base} lists no models (GET /v1/models: {answer.describe()}); "
                            "pass the model with --model")
        return ()
    if not models:
        if not model:
            raise _Unusable(f"{base}/v1/models lists no model; pass the model with --model")
    elif model and model not in models:
        shown = ", ".join(models[:6]) + (f" and {len(models) - 6} more" if len(models) > 6 else "")
        raise _Unusable(f"the endpoint does not serve the model {model!r} (GET /v1/models lists {shown}); "
                        f"pass one of them with --model")
    return models


def _probe(client: httpx.Client, base: str, method: str, path: str, probe_timeout: float) -> _Answer:
    """One request, its body read up to 1 MiB. Nothing there (refused, no TLS, no answer in time)
    ends the preflight with the line that explains it; a broken answer (reset, not HTTP) is noted
    and the next probe may still find the API."""
    body = {"json": {}} if method == "POST" else {}
    raw = b""
    try:
        with client.stream(method, base + path, **body) as response:
            for chunk in response.iter_bytes():
                raw += chunk
                if len(raw) > _MAX_BODY:
                    break
    except (httpx.RemoteProtocolError, httpx.ReadError, httpx.DecodingError) as error:
        return _Answer(status=0, failure=f"no HTTP answer ({str(error) or type(error).__name__})")
    except httpx.HTTPError as error:
        raise _Unusable(_transport_problem(error, base, f"{method} {path}", probe_timeout)) from None
    try:
        parsed = json.loads(raw)
    except ValueError:
        parsed = None
    return _Answer(status=response.status_code, content_type=response.headers.get("content-type", ""),
                   body=parsed)


def _transport_problem(error: httpx.HTTPError, base: str, what: str, probe_timeout: float) -> str:
    reason = str(error) or type(error).__name__
    if isinstance(error, httpx.ConnectTimeout):
        return f"cannot connect to {base}: no answer within {probe_timeout:g} s (a wrong host or a firewall?)"
    if isinstance(error, httpx.ConnectError):
        if "ssl" in reason.lower() or "tls" in reason.lower():
            return (f"cannot connect to {base}: the TLS handshake failed ({reason}); "
                    "is it http:// rather than https://?")
        if "refused" in reason.lower():
            return f"cannot connect to {base}: connection refused; is the server running, on that port?"
        return f"cannot connect to {base}: {reason}"
    if isinstance(error, httpx.TimeoutException):
        return f"{base} accepted the connection but sent no HTTP answer to {what} within {probe_timeout:g} s"
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
