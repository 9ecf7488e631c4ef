"""Deprecated: the request builders live in the API modules (`apis.get(api).first(...)`, `.follow(...)`,
`.MIN_OUTPUT_TOKENS`). This forwarder stays only until replay/ and its tests stop importing it."""

from __future__ import annotations

from typing import Any

from harnesscheck.conformance import apis

MIN_OUTPUT_TOKENS = {name: api.MIN_OUTPUT_TOKENS for name, api in apis.APIS.items()}


def first(api: str, scenario: Any, model: str, *, stream: bool = True) -> dict[str, Any]:
    return apis.get(api).first(scenario, model, stream=stream)
