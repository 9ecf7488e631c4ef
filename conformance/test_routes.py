"""Model routes: GET /v1/models in the Anthropic shape, /v1/models/{id} with ids that contain '/'
(raw and percent-encoded, as the SDKs send them), and 404 in shape for an unknown id.

An endpoint without a GET /v1/models/{id} route at all (vLLM has none: every id gets the web
framework's bare 404) lacks an optional feature: the slash rules are skipped with that reason, and
the unknown-model rule is judged on the Messages route instead."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from harnesscheck.conformance import apis
from harnesscheck.conformance.session import Session
from harnesscheck.conformance.verdict import fail, ok_response, skip


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


def _no_retrieve_route(hc: Session, answer: object) -> str | None:
    """Why the endpoint has no GET /v1/models/{id} route, or None: a bare 404 (not an API error) that
    an id which cannot exist gets too."""
    t = answer  # the answer for the real id
    if getattr(t, "status", None) != 404 or _api_error_shape(t.json_body()):  # type: ignore[attr-defined]
        return None
    probe = hc.get("anthropic", "/v1/models/harnesscheck-no-such-model", label="get a model that does not exist")
    if probe.status == 404 and not _api_error_shape(probe.json_body()) and probe.text_body() == t.text_body():
        return (f"the endpoint has no GET /v1/models/{{id}} route (every id, with or without '/', gets the same "
                f"bare 404: {t.text_body()[:80]})")
    return None


@pytest.mark.check("AN-ROUTE-001")
def test_models_list_anthropic_shape(hc: Session) -> None:
    t = hc.get("anthropic", "/v1/models", label="list models (anthropic-version)")
    ok_response(t, "GET /v1/models")
    body = t.json_body() or {}
    data = body.get("data")
    if not isinstance(data, list) or not data:
        fail("GET /v1/models has no data list", transcript=t)
    missing = [k for k in ("has_more", "first_id", "last_id") if k not in body]
    wrong = [m for m in data if not isinstance(m, dict) or m.get("type") != "model" or "id" not in m]
    if missing or wrong:
        fail(f"not the Anthropic list shape: missing {missing}, entries without type 'model': {len(wrong)}",
             transcript=t)


@pytest.mark.check("AN-ROUTE-002")
def test_model_by_id_with_raw_slash(hc: Session) -> None:
    model = _slash_model(hc)
    t = hc.get("anthropic", f"/v1/models/{model}", label="get model (raw '/')")
    if (absent := _no_retrieve_route(hc, t)) is not None:
        skip(absent)
    ok_response(t, f"GET /v1/models/{model}")
    if (t.json_body() or {}).get("id") != model:
        fail(f"the answer's id is not {model!r}", transcript=t)


@pytest.mark.check("AN-ROUTE-003")
def test_model_by_id_percent_encoded(hc: Session) -> None:
    model = _slash_model(hc)
    t = hc.get("anthropic", f"/v1/models/{quote(model, safe='')}", label="get model (%2F)")
    if (absent := _no_retrieve_route(hc, t)) is not None:
        skip(absent)
    ok_response(t, f"GET /v1/models/{quote(model, safe='')}")
    if (t.json_body() or {}).get("id") != model:
        fail(f"the answer's id is not {model!r}", transcript=t)


@pytest.mark.check("AN-ERR-002")
def test_unknown_model_404_in_shape(hc: Session) -> None:
    t = hc.get("anthropic", "/v1/models/no-such-org/no-such-model-harnesscheck", label="get unknown model")
    if _no_retrieve_route(hc, t) is not None:  # judge the unknown model where the endpoint takes one
        body = hc.body("anthropic", "plain_text", stream=False)
        t = hc.post("anthropic", apis.anthropic.PATH, {**body, "model": "no-such-org/no-such-model-harnesscheck"},
                    label="message to an unknown model")
    if t.status != 404:
        fail(f"unknown model id answered HTTP {t.status}, expected 404", transcript=t)
    if not _api_error_shape(t.json_body()):
        fail(f"the 404 body is in neither the Anthropic nor the OpenAI error shape: {t.text_body()[:200]}",
             transcript=t)
