"""The API adapters (``harnesscheck.reference_server.frontends``): the parsed events of the long turn to the
Chat, Anthropic and Responses SSE streams, against a minimal baseline: one ``json.dumps`` of a bare
chat.completion.chunk per event plus ``data:`` framing (the least any adapter does per frame)."""

from __future__ import annotations

import json

import pytest


def _minimal(events):
    from harnesscheck.reference_server.events import ReasoningDelta, TextDelta, ToolCallArgsDelta

    out = []
    for e in events:
        if isinstance(e, TextDelta | ReasoningDelta):
            delta = {"content": e.text}
        elif isinstance(e, ToolCallArgsDelta):
            delta = {"tool_calls": [{"index": e.index, "function": {"arguments": e.text}}]}
        else:
            delta = {}
        out.append(b"data: " + json.dumps({"id": "x", "choices": [{"index": 0, "delta": delta}]}).encode() + b"\n\n")
    return b"".join(out)


def _adapter(api, events):
    from conftest import adapters, run_adapter

    return run_adapter(adapters()[api], events)


@pytest.mark.benchmark(group="adapters")
@pytest.mark.parametrize("api", ["chat"])
def test_adapter_chat(benchmark, corpus, api):
    assert benchmark(_adapter, api, corpus.events) == corpus.sse[api]


@pytest.mark.benchmark(group="adapters")
@pytest.mark.parametrize("api", ["anthropic"])
def test_adapter_anthropic(benchmark, corpus, api):
    assert len(benchmark(_adapter, api, corpus.events)) == len(corpus.sse[api])


@pytest.mark.benchmark(group="adapters")
@pytest.mark.parametrize("api", ["responses"])
def test_adapter_responses(benchmark, corpus, api):
    assert len(benchmark(_adapter, api, corpus.events)) == len(corpus.sse[api])


@pytest.mark.benchmark(group="adapters")
def test_minimal_chat_framing(benchmark, corpus):
    assert benchmark(_minimal, corpus.events).count(b"\n\n") == len(corpus.events)
