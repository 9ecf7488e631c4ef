"""Model routes: GET /v1/models in the Anthropic shape, /v1/models/{id} with ids that contain '/'
(raw and percent-encoded, as the SDKs send them), and 404 in shape for an unknown id."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from conformance.harness import Harness
from conformance.verdict import fail, ok_response, skip


def _slash_model(hc: Harness) -> str:
    if "/" in hc.endpoint.model:
        return hc.endpoint.model
    listed = hc.get("chat", "/v1/models", label="list models").json_body() or {}
    ids = [m.get("id", "") for m in listed.get("data", []) if isinstance(m, dict)]
    slashed = [i for i in ids if "/" in i]
    if not slashed:
        skip("the endpoint serves no model id containing '/'")
    return slashed[0]


@pytest.mark.check("AN-ROUTE-001")
def test_models_list_anthropic_shape(hc: Harness) -> None:
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
def test_model_by_id_with_raw_slash(hc: Harness) -> None:
    model = _slash_model(hc)
    t = hc.get("anthropic", f"/v1/models/{model}", label="get model (raw '/')")
    ok_response(t, f"GET /v1/models/{model}")
    if (t.json_body() or {}).get("id") != model:
        fail(f"the answer's id is not {model!r}", transcript=t)


@pytest.mark.check("AN-ROUTE-003")
def test_model_by_id_percent_encoded(hc: Harness) -> None:
    model = _slash_model(hc)
    t = hc.get("anthropic", f"/v1/models/{quote(model, safe='')}", label="get model (%2F)")
    ok_response(t, f"GET /v1/models/{quote(model, safe='')}")
    if (t.json_body() or {}).get("id") != model:
        fail(f"the answer's id is not {model!r}", transcript=t)


@pytest.mark.check("AN-ERR-002")
def test_unknown_model_404_in_shape(hc: Harness) -> None:
    t = hc.get("anthropic", "/v1/models/no-such-org/no-such-model-harnesscheck", label="get unknown model")
    body = t.json_body() or {}
    if t.status != 404:
        fail(f"unknown model id answered HTTP {t.status}, expected 404", transcript=t)
    anthropic_shape = body.get("type") == "error" and isinstance(body.get("error"), dict)
    openai_shape = isinstance(body.get("error"), dict) and "message" in body["error"]
    if not (anthropic_shape or openai_shape):
        fail("the 404 body is in neither the Anthropic nor the OpenAI error shape", transcript=t)
