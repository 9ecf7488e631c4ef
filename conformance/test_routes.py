"""Model routes: GET /v1/models in the Anthropic shape and, without anthropic-version, in OpenAI's, GET /v1/models/{served id} first (the route a
harness asks at start-up), then ids that contain '/' (raw and percent-encoded, as the SDKs send them),
and an unknown model answered 404 in shape, on the retrieve route and on the generation routes.

An endpoint without a GET /v1/models/{id} route (vLLM has none: every id gets the web framework's
404; llama.cpp's server answers every unknown route with an OpenAI-shaped 404; a gateway's 404 may echo
the path) fails AN-ROUTE-004, which says so, once: the served id gets a 404 that an id which cannot exist
gets too, or that a path no server routes gets, the path it echoes aside; the slash rules are then
skipped with that reason, and so is the list's shape where GET /v1/models is missing too (issue 41). A route-not-found 404 is not a
model 404: the unknown-model rule is judged on the retrieve route only where the route knows the
served id, and always on the generation routes (an endpoint that answers any model name with 200
does not pass)."""

from __future__ import annotations

from urllib.parse import quote, unquote

import pytest

from harnesscheck.protocol import apis
from harnesscheck.conformance.session import Session
from harnesscheck.conformance.verdict import Problems, fail, ok_response, skip
from harnesscheck.protocol.wire.transcript import Transcript

UNKNOWN = "no-such-org/no-such-model-harnesscheck"
NO_SUCH = "harnesscheck-no-such-model"  # an id without '/' that no endpoint serves


def _slash_model(hc: Session) -> str:
    if "/" in hc.endpoint.model:
        return hc.endpoint.model
    listed = hc.get("chat", "/v1/models", label="list models").json_body() or {}
    ids = [m.get("id", "") for m in listed.get("data", []) if isinstance(m, dict)]
    slashed = [i for i in ids if "/" in i]
    if not slashed:
        skip("the endpoint serves no model id containing '/'")
    return slashed[0]


def _api_error_shape(body: object) -> bool:
    if not isinstance(body, dict):
        return False
    anthropic_shape = body.get("type") == "error" and isinstance(body.get("error"), dict)
    openai_shape = isinstance(body.get("error"), dict) and "message" in body["error"]
    return anthropic_shape or openai_shape


def _anthropic_error_shape(body: object) -> bool:
    return isinstance(body, dict) and body.get("type") == "error" and isinstance(body.get("error"), dict)


def _served(hc: Session) -> Transcript:
    """GET /v1/models/{served id}, the id percent-encoded as the SDKs send it."""
    return hc.get("anthropic", f"/v1/models/{quote(hc.endpoint.model, safe='')}", label="get the served model")


NO_ROUTE = "/v1/harnesscheck-no-such-route"  # a path no server routes


def _echo_free(t: Transcript, path: str) -> str:
    """The body with the path it answered (and the id in it, raw or percent-encoded) left out."""
    text, tail = t.text_body(), path.rsplit("/", 1)[-1]
    for echoed in sorted({path, unquote(path), tail, unquote(tail)}, key=len, reverse=True):
        text = text.replace(echoed, "{path}")
    return text


def _no_retrieve_route(hc: Session, served: Transcript) -> str | None:
    """Why the endpoint has no GET /v1/models/{id} route, or None: the served id gets a 404 that does not
    depend on the id or the route: the same body as an id that cannot exist gets, or as a path no server
    routes gets, the path each echoes aside (a route-not-found 404, bare, in an API's error shape, or
    naming the path). A model-not-found 404 names the id as a route-not-found 404 echoes the path, so only
    the unrouted path's 404 is compared with the echo left out."""
    if served.status != 404:
        return None
    path = f"/v1/models/{quote(hc.endpoint.model, safe='')}"
    probe = hc.get("anthropic", f"/v1/models/{NO_SUCH}", label="get a model that does not exist")
    unrouted = hc.get("anthropic", f"{NO_ROUTE}/{NO_SUCH}", label="get a path no server routes")
    same_id = probe.status == 404 and probe.text_body() == served.text_body()  # a model 404 may name the id
    same_route = unrouted.status == 404 and _echo_free(unrouted, f"{NO_ROUTE}/{NO_SUCH}") == _echo_free(served, path)
    if same_id or same_route:
        listed = hc.get("anthropic", "/v1/models", label="list models (is the route there at all?)")
        also = " (nor GET /v1/models)" if listed.status in (404, 405) else ""
        return (f"the endpoint has no GET /v1/models/{{id}} route{also}: the model it serves gets the 404 that "
                f"{'an id which cannot exist' if same_id else 'a path no server routes'} gets "
                f"({served.text_body()[:100]})")
    return None


def _models_list(hc: Session, api: str, label: str) -> Transcript:
    """GET /v1/models with ``api``'s headers, answered 2xx; no models routes at all skips (AN-ROUTE-004's)."""
    t = hc.get(api, "/v1/models", label=label)
    if t.status in (404, 405):  # no models routes at all: one finding, AN-ROUTE-004's
        _skip_without_route(hc)
    ok_response(t, "GET /v1/models")
    return t


@pytest.mark.check("AN-ROUTE-001")
def test_models_list_anthropic_shape(hc: Session) -> None:
    t = _models_list(hc, "anthropic", "list models (anthropic-version)")
    body = t.json_body() or {}
    data = body.get("data")
    if not isinstance(data, list) or not data:
        fail("GET /v1/models has no data list", transcript=t)
    missing = [k for k in ("has_more", "first_id", "last_id") if k not in body]
    wrong = [m for m in data if not isinstance(m, dict) or m.get("type") != "model" or "id" not in m]
    if missing or wrong:
        fail(f"not the Anthropic list shape: missing {missing}, entries without type 'model': {len(wrong)}",
             transcript=t)


@pytest.mark.check("CH-ROUTE-001")
def test_models_list_openai_shape(hc: Session) -> None:
    t = _models_list(hc, "chat", "list models (no anthropic-version)")
    body = t.json_body()
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list) or not data:
        fail("GET /v1/models has no data list", transcript=t)
    problems = [] if body.get("object") == "list" else [f"object is {body.get('object')!r}, not 'list'"]
    for n, model in enumerate(data):
        if not isinstance(model, dict):
            problems.append(f"data[{n}] is not an object")
            continue
        missing = [k for k, ok in (("id", isinstance(model.get("id"), str)), ("object 'model'", model.get("object") ==
                   "model"), ("created", type(model.get("created")) is int), ("owned_by", isinstance(
                       model.get("owned_by"), str))) if not ok]
        if missing:
            problems.append(f"data[{n}] ({model.get('id', '?')}) lacks {', '.join(missing)}")
    if problems:
        fail(f"not OpenAI's list shape: {'; '.join(problems[:4])}", transcript=t)


@pytest.mark.check("AN-ROUTE-004")
def test_served_model_by_id(hc: Session) -> None:
    t = _served(hc)
    if (absent := _no_retrieve_route(hc, t)) is not None:
        fail(f"{absent}; a harness asks GET /v1/models/{{id}} for its model at start-up (article 1: Claude Code "
             "got this 404 from Dynamo)", transcript=t)
    ok_response(t, f"GET /v1/models/{quote(hc.endpoint.model, safe='')} (the served model)")
    if (t.json_body() or {}).get("id") != hc.endpoint.model:
        fail(f"the answer's id is not {hc.endpoint.model!r}", transcript=t)


def _skip_without_route(hc: Session) -> None:
    if (absent := _no_retrieve_route(hc, _served(hc))) is not None:
        skip(f"{absent} (AN-ROUTE-004 reports it)")


@pytest.mark.check("AN-ROUTE-002")
def test_model_by_id_with_raw_slash(hc: Session) -> None:
    _skip_without_route(hc)
    model = _slash_model(hc)
    t = hc.get("anthropic", f"/v1/models/{model}", label="get model (raw '/')")
    ok_response(t, f"GET /v1/models/{model}")
    if (t.json_body() or {}).get("id") != model:
        fail(f"the answer's id is not {model!r}", transcript=t)


@pytest.mark.check("AN-ROUTE-003")
def test_model_by_id_percent_encoded(hc: Session) -> None:
    _skip_without_route(hc)
    model = _slash_model(hc)
    t = hc.get("anthropic", f"/v1/models/{quote(model, safe='')}", label="get model (%2F)")
    ok_response(t, f"GET /v1/models/{quote(model, safe='')}")
    if (t.json_body() or {}).get("id") != model:
        fail(f"the answer's id is not {model!r}", transcript=t)


def _unknown_model_answer(problems: Problems, t: Transcript, where: str, *, anthropic: bool) -> None:
    """An unknown model must get 404 in an API's error shape: no answer, a 5xx or a body outside the
    shapes fails the rule (MUST); a 2xx (any model name served) or another 4xx fails
    ``AN-ERR-002:generation`` (SHOULD: accepting a lenient request breaks no client); an error asked
    for under ``anthropic-version`` (``anthropic``) in OpenAI's shape fails ``AN-ERR-002:shape``."""
    if t.error or t.status is None:
        problems.add(f"{where}: no answer ({t.error_kind}: {t.error})", transcript=t)
        return
    if t.status >= 500:
        problems.add(f"{where}: an unknown model id answered HTTP {t.status}, expected 404", transcript=t)
    elif t.status >= 400 and not _api_error_shape(t.json_body()):
        problems.add(f"{where}: the {t.status} body is in neither the Anthropic nor the OpenAI error shape: "
                     f"{t.text_body()[:200]}", transcript=t)
    elif t.status >= 400 and anthropic and not _anthropic_error_shape(t.json_body()):
        problems.add(f"{where}: the {t.status} answer to a request sent with anthropic-version is in OpenAI's "
                     f"error shape, not Anthropic's {{type: error, error: {{type, message}}}}: "
                     f"{t.text_body()[:200]}", transcript=t, rule="AN-ERR-002:shape")
    if t.status != 404 and t.status < 500:
        said = ("was answered HTTP 200: the endpoint serves any model name" if t.ok
                else f"was answered HTTP {t.status}")
        problems.add(f"{where}: an unknown model id {said}; expected 404 not_found", transcript=t,
                     rule="AN-ERR-002:generation")


@pytest.mark.check("AN-ERR-002")
def test_unknown_model_404_in_shape(hc: Session) -> None:
    """Every route and every rule is judged; the failure lists each broken rule, the weightiest first."""
    problems = Problems("AN-ERR-002")
    served = _served(hc)
    if served.ok:  # the route knows ids: an unknown one must be its 404, in shape
        t = hc.get("anthropic", f"/v1/models/{UNKNOWN}", label="get unknown model")
        if t.status != 404:
            problems.add(f"GET /v1/models/{{unknown}}: answered HTTP {t.status}, expected 404", transcript=t)
        else:
            _unknown_model_answer(problems, t, "GET /v1/models/{unknown}", anthropic=True)
    else:
        hc.note(f"GET /v1/models/{{id}} not judged: the served model answered HTTP {served.status} there")
    for api in hc.endpoint.apis:  # the generation routes: the model a request names must exist
        module = apis.get(api)
        body = {**module.first(hc.scenario("plain_text"), UNKNOWN, stream=False),
                module.MAX_TOKENS_FIELD: module.MIN_OUTPUT_TOKENS}
        t = hc.post(api, module.PATH, body, label=f"{module.PATH} to an unknown model")
        _unknown_model_answer(problems, t, f"{module.PATH} with an unknown model",
                              anthropic="anthropic-version" in {k.lower() for k in hc.endpoint.headers(api)})
    problems.raise_if_any()


def _broken(t: Transcript) -> bool:
    """No answer, a 5xx, or an error outside the API shapes (what fails the rule itself)."""
    return t.status is None or t.status >= 500 or (t.status >= 400 and not _api_error_shape(t.json_body()))
