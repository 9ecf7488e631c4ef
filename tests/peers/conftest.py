"""Fixtures for the peer tests (Dynamo, AIPerf, vLLM's bench): each skips with the reason when
its peer is not installed here."""

from __future__ import annotations

import pytest

from tests.peers import dynamo as dynamo_helper

REPLAY_KEY = "scripted"


@pytest.fixture(scope="module")
def dynamo():
    """Dynamo's frontend + mocker serving ``qwen3-tiny``; replay key ``scripted`` streams reasoning,
    text and one qwen3_coder tool call (the reference tokenizer's ids)."""
    from harnesscheck.reference_server.conversation import ToolSpec
    from harnesscheck.reference_server.events import Part, ToolCall
    from harnesscheck.reference_server.parsers import get_reasoning_parser, get_tool_parser
    from harnesscheck.reference_server.parsers.stream import render_parts
    from harnesscheck.reference_server.tokenizer import load

    tools = [ToolSpec("Read", parameters={"type": "object", "properties": {"file_path": {"type": "string"}}})]
    parts = [Part("reasoning", "I should read the file first."), Part("text", "Reading it now."),
             Part("tool_call", call=ToolCall(0, "c0", "Read", '{"file_path": "src/app.py"}'))]
    raw = render_parts(parts, get_reasoning_parser("nemotron_deci")(),
                       get_tool_parser("qwen3_coder")(tools=tools, id_factory=lambda i: f"c{i}"))
    tok = load()
    proc = dynamo_helper.start(replay={REPLAY_KEY: tok.encode(raw) + [tok.token_id("<|im_end|>")]})
    yield proc
    proc.__exit__(None, None, None)


@pytest.fixture(scope="module")
def dynamo_scripted():
    """Dynamo's frontend + mocker serving ``harnesscheck/qwen3-tiny`` with the qwen3 / hermes parsers and the
    kit's scripted outputs (conformance/mocker_replay.py): what ``--peer dynamo-mocker`` annotates."""
    from harnesscheck.conformance.mocker_replay import scripted_outputs

    model = dynamo_helper.model_dir()
    proc = dynamo_helper.start(model="harnesscheck/qwen3-tiny", reasoning_parser="qwen3", tool_call_parser="hermes",
                               replay=scripted_outputs(model, reasoning_parser="qwen3", tool_parser="hermes"))
    yield proc
    proc.__exit__(None, None, None)
