"""pytest-benchmark micro-benchmarks of the hot paths: SSE parsing, the stream parsers, the API
adapters. Outside the normal test run (the project's testpaths is ``tests``); run with

    .venv/bin/python -m pytest benchmarks --benchmark-only

Files are ``bench_*.py`` (collected by the hook below). Each group holds the kit's function and a
plain baseline on the same input; the terminal summary prints kit/baseline (ratio of medians; above
1 means the kit is slower). The inputs are built once per session from the reference server's own
parsers and adapters: a long nemotron_deci + qwen3_coder model output (reasoning, text, four tool
calls) and the SSE streams the three adapters make of it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

# group -> (kit benchmark, baseline benchmark) for the ratio lines, by the benchmark's full name
RATIOS: dict[str, list[tuple[str, str]]] = {
    "sse": [(f"test_sse[{kit}]", f"test_sse[{base}]") for kit in ("kit_sse_decoder", "kit_fast_sse")
            for base in ("httpx_sse", "anthropic_sdk")],
    "parsers": [("test_stream_parser", "test_regex_one_shot"), ("test_parse_text_one_shot", "test_regex_one_shot")],
    "adapters": [(f"test_adapter_{api}[{api}]", "test_minimal_chat_framing")
                 for api in ("chat", "anthropic", "responses")],
}


def pytest_collect_file(file_path, parent):  # noqa: ANN001 - pytest hook
    if file_path.suffix == ".py" and file_path.name.startswith("bench_"):
        return pytest.Module.from_parent(parent, path=file_path)
    return None


def pytest_terminal_summary(terminalreporter, exitstatus, config):  # noqa: ANN001 - pytest hook
    bs = getattr(config, "_benchmarksession", None)
    if bs is None or not getattr(bs, "benchmarks", None):
        return
    medians = {(b.group, b.name): b.stats.median for b in bs.benchmarks if b.stats}
    lines = []
    for group, pairs in RATIOS.items():
        for kit, base in pairs:
            k, b = medians.get((group, kit)), medians.get((group, base))
            if k and b:
                lines.append(f"  {group}: {kit} / {base} = {k / b:.2f}  ({k * 1e3:.3f} ms vs {b * 1e3:.3f} ms)")
    if lines:
        terminalreporter.write_sep("-", "kit / baseline (ratio of medians; > 1: the kit is slower)")
        for line in lines:
            terminalreporter.write_line(line)


@dataclass
class Corpus:
    raw: str  # the model's raw output
    pieces: list[str]  # one decoded token each
    events: list[Any]  # StreamParser events + Finish
    sse: dict[str, bytes]  # api -> the adapter's whole SSE stream
    tools: list[Any]


def _parsers(tools: list[Any]) -> tuple[Any, Any]:
    from harnesscheck.reference_server.parsers import get_reasoning_parser, get_tool_parser

    n = iter(range(1 << 30))
    return (get_reasoning_parser("nemotron_deci")(),
            get_tool_parser("qwen3_coder")(tools=tools, id_factory=lambda i: f"call_{i}_{next(n)}"))


def adapters() -> dict[str, Any]:
    """api -> factory of a fresh adapter (reference_server.frontends)."""
    from harnesscheck.reference_server.faults import Faults
    from harnesscheck.reference_server.frontends.anthropic import AnthropicStream
    from harnesscheck.reference_server.frontends.chat import ChatStream
    from harnesscheck.reference_server.frontends.responses import ResponsesStream

    f = Faults()
    return {
        "chat": lambda: ChatStream(completion_id="chatcmpl-b", model="m", include_usage=True, dispatch=True, faults=f),
        "anthropic": lambda: AnthropicStream(message_id="msg_b", model="m", prompt_tokens=100, cached_tokens=0,
                                             faults=f),
        "responses": lambda: ResponsesStream(response_id="resp_b", body={"model": "m", "stream": True}, faults=f),
    }


def run_adapter(factory: Any, events: list[Any]) -> bytes:
    a = factory()
    out = list(a.start())
    for e in events:
        out += a.feed(e)
    return b"".join(out)


@pytest.fixture(scope="session")
def corpus() -> Corpus:
    return build_corpus()


def build_corpus() -> Corpus:
    """The corpus (also read by benchmarks/fold_once.py, outside pytest)."""
    from harnesscheck.reference_server.conversation import ToolSpec
    from harnesscheck.reference_server.events import Finish, Part, ToolCall, Usage
    from harnesscheck.reference_server.parsers.stream import StreamParser, render_parts
    from harnesscheck.reference_server.tokenizer import load
    from harnesscheck.replay.benchmarks.common import filler_text

    tools = [ToolSpec("Read", parameters={"type": "object", "properties": {"file_path": {"type": "string"}}}),
             ToolSpec("Edit", parameters={"type": "object", "properties": {
                 "file_path": {"type": "string"}, "old": {"type": "string"}, "new": {"type": "string"}}})]
    parts = [Part("reasoning", filler_text(1500, seed=1)), Part("text", filler_text(400, seed=2))]
    for i in range(4):
        if i % 2:
            args = {"file_path": f"src/m{i}.py", "old": filler_text(60, seed=10 + i), "new": filler_text(60, seed=20 + i)}
            parts.append(Part("tool_call", call=ToolCall(i, f"c{i}", "Edit", json.dumps(args))))
        else:
            parts.append(Part("tool_call", call=ToolCall(i, f"c{i}", "Read", json.dumps({"file_path": f"src/m{i}.py"}))))
    raw = render_parts(parts, *_parsers(tools))
    tok = load()
    pieces = [tok.decode([i]) for i in tok.encode(raw)]
    p = StreamParser(*_parsers(tools))
    events: list[Any] = []
    for piece in pieces:
        events += p.feed(piece)
    events += p.finish()
    events.append(Finish(reason="tool_calls", usage=Usage(prompt_tokens=100, cached_tokens=0,
                                                         completion_tokens=len(pieces))))
    sse = {api: run_adapter(make, events) for api, make in adapters().items()}
    return Corpus(raw, pieces, events, sse, tools)
