"""What an endpoint says about its engine, as the results document's `run.server` object.

The reference server puts its engine's `describe()` (name, device, timing, settings) in every model's
`/v1/models` metadata; other endpoints usually say nothing, and then engine is null and timing
"unknown". Reading it from the endpoint (rather than assuming the scripted engine) keeps results
honest when the embedded server runs with `--engine transformers` or `trtllm`; the faults a reference
server runs with (`metadata.faults`) join the ones the caller knows of, so a run against `serve --fault
NAME` records NAME whoever started it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import httpx

TIMINGS = ("scripted-model", "real-compute", "unknown")


def server_info(url: str, model: str, *, kind: str, api_key: str | None = None, faults: Iterable[str] = (),
                timeout: float = 10.0) -> dict[str, Any]:
    """`{"kind", "engine", "faults", "timing"}`, plus `engine_settings` when the endpoint describes its engine."""
    server: dict[str, Any] = {"kind": kind, "engine": None, "faults": list(faults), "timing": "unknown"}
    headers = {"authorization": f"Bearer {api_key}", "x-api-key": api_key} if api_key else {}
    try:
        answer = httpx.get(url.rstrip("/") + "/v1/models", headers=headers, timeout=timeout)
        data = answer.json().get("data") or []
    except (httpx.HTTPError, ValueError, AttributeError):
        return server
    if answer.status_code != 200 or not isinstance(data, list):
        return server
    entry = next((m for m in data if isinstance(m, dict) and m.get("id") == model), None)
    if entry is None and data and isinstance(data[0], dict):
        entry = data[0]
    metadata = (entry or {}).get("metadata")
    said = metadata.get("faults") if isinstance(metadata, dict) else None
    if isinstance(said, list):  # the reference server names the faults it runs with (`serve --fault`)
        server["faults"] = list(dict.fromkeys([*server["faults"], *(str(f) for f in said[:100])]))
    engine = metadata.get("engine") if isinstance(metadata, dict) else None
    if isinstance(engine, dict) and engine.get("engine"):
        server["engine"] = str(engine["engine"])
        if engine.get("timing") in TIMINGS:
            server["timing"] = engine["timing"]
        server["engine_settings"] = engine
    return server
