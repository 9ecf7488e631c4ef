"""The stream parsers on a long model output (nemotron_deci reasoning + qwen3_coder tool calls,
~2200 tokens fed one decoded token at a time): ``StreamParser`` (what the reference server runs per
request) and its one-shot form ``parse_text``, against a plain baseline: two regular expressions
over the whole text (the least it costs to find the structure at all, with no streaming, partial
tags or whitespace rules)."""

from __future__ import annotations

import re

import pytest

_THINK = re.compile(r"^(.*?)</think>(.*)$", re.S)
_CALL = re.compile(r"<tool_call>\s*<function=([^>]+)>(.*?)</function>\s*</tool_call>", re.S)
_PARAM = re.compile(r"<parameter=([^>]+)>\n?(.*?)\n?</parameter>", re.S)


def _stream(corpus):
    from conftest import _parsers
    from harnesscheck.reference_server.parsers.stream import StreamParser

    p = StreamParser(*_parsers(corpus.tools))
    n = 0
    for piece in corpus.pieces:
        n += len(p.feed(piece))
    return n + len(p.finish())


def _one_shot(corpus):
    from conftest import _parsers
    from harnesscheck.reference_server.parsers.stream import parse_text

    return parse_text(corpus.raw, *_parsers(corpus.tools))


def _regex(raw):
    m = _THINK.match(raw)
    rest = m.group(2) if m else raw
    calls = [(name, dict(_PARAM.findall(body))) for name, body in _CALL.findall(rest)]
    return calls


@pytest.mark.benchmark(group="parsers")
def test_stream_parser(benchmark, corpus):
    assert benchmark(_stream, corpus) > 100


@pytest.mark.benchmark(group="parsers")
def test_parse_text_one_shot(benchmark, corpus):
    parts = benchmark(_one_shot, corpus)
    assert sum(1 for p in parts if p.kind == "tool_call") == 4


@pytest.mark.benchmark(group="parsers")
def test_regex_one_shot(benchmark, corpus):
    assert len(benchmark(_regex, corpus.raw)) == 4
