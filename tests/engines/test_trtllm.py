"""The TensorRT-LLM engine: its adapter against a stand-in of the LLM API (runs everywhere), and the
real thing where `tensorrt_llm` imports (skipped elsewhere, with that reason)."""

from __future__ import annotations

import asyncio
import importlib.util
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from harnesscheck.reference_server.config import ServerConfig
from harnesscheck.reference_server.checkpoint import load_checkpoint
from harnesscheck.reference_server.engines.base import EngineStopped, GenerateRequest
from harnesscheck.reference_server.engines.trtllm import TrtllmEngine, TrtllmUnavailable, verify_tokenizer
from harnesscheck.reference_server.tokenizer import load


@dataclass
class FakeOutput:
    token_ids: list[int] = field(default_factory=list)
    token_ids_diff: list[int] = field(default_factory=list)
    finish_reason: str | None = None


@dataclass
class FakeResult:
    outputs: list[FakeOutput]
    cached_tokens: int


class FakeStream:
    """The shape of GenerationResult in streaming mode: async iteration, abort()."""

    def __init__(self, prompt: list[int], params: dict[str, Any], cached: int, finish_as: str | None) -> None:
        self.prompt, self.params, self.cached = prompt, params, cached
        self.finish_as = finish_as  # end the request this way after the first token (cancelled, timeout)
        self.aborted = False

    async def __aiter__(self):
        out = FakeOutput()
        for n in range(self.params["max_tokens"]):
            if self.aborted:
                return
            token = 100 + n if n < 3 else self.params["end_id"]
            out.token_ids = out.token_ids + [token]
            out.token_ids_diff = [token]
            if self.finish_as and n == 1:
                out.finish_reason = self.finish_as
            elif token == self.params["end_id"]:
                out.finish_reason = "stop"
            elif n == self.params["max_tokens"] - 1:
                out.finish_reason = "length"
            yield FakeResult([out], self.cached)
            if out.finish_reason:
                return
            await asyncio.sleep(0)

    def abort(self) -> None:
        self.aborted = True


class FakeLLM:
    def __init__(self) -> None:
        self.seen: list[list[int]] = []
        self.streams: list[FakeStream] = []
        self.params: list[dict[str, Any]] = []
        self.finish_as: str | None = None

    def generate_async(self, inputs: dict[str, list[int]], sampling_params: dict[str, Any], streaming: bool):
        assert streaming
        ids = inputs["prompt_token_ids"]
        cached = 32 if any(s[:33] == ids[:33] for s in self.seen) and len(ids) > 33 else 0
        self.seen.append(ids)
        self.params.append(sampling_params)
        stream = FakeStream(ids, sampling_params, cached, self.finish_as)
        self.streams.append(stream)
        return stream


def engine() -> tuple[TrtllmEngine, FakeLLM]:
    llm = FakeLLM()
    return TrtllmEngine(llm, tokenizer=load(), model_path="fake", sampling_factory=dict, block_size=32), llm


async def run(eng: TrtllmEngine, ids: list[int], max_tokens: int = 10):
    gen = await eng.start(GenerateRequest("r", ids, max_tokens, eos_id=7))
    out: list[int] = []
    async for chunk in gen:
        out.extend(chunk)
    return gen, out


def test_adapter_streams_ids_and_reports_cached_tokens() -> None:
    eng, llm = engine()
    ids = list(range(1, 50))
    gen, out = asyncio.run(run(eng, ids))
    assert out == [100, 101, 102, 7] and gen.finish_reason == "stop" and gen.cached_tokens == 0
    gen, _ = asyncio.run(run(eng, ids))
    assert gen.cached_tokens == 32  # the engine's own count, known before the first chunk is yielded
    gen, out = asyncio.run(run(eng, ids, max_tokens=2))
    assert out == [100, 101] and gen.finish_reason == "length"
    assert eng.active_requests() == 0
    assert eng.describe()["kv_block_reuse"] is True


def test_close_mid_stream_aborts_and_frees_the_slot() -> None:
    eng, llm = engine()

    async def scenario() -> None:
        gen = await eng.start(GenerateRequest("r", list(range(40)), 10, eos_id=7))
        stream = gen.__aiter__()
        await stream.__anext__()
        await stream.aclose()
        assert eng.active_requests() == 0 and llm.streams[-1].aborted

    asyncio.run(scenario())


def test_refuses_clearly_without_tensorrt_llm() -> None:
    if importlib.util.find_spec("tensorrt_llm") is not None:
        pytest.skip("tensorrt_llm is installed here")
    with pytest.raises(TrtllmUnavailable, match="TensorRT-LLM"):
        TrtllmEngine.from_config(ServerConfig(engine="trtllm", model_path="/nonexistent"), load())


def test_cancelled_or_timed_out_is_not_a_stop() -> None:
    """TensorRT-LLM's own endings (cancelled, timeout) fail the turn instead of passing for "stop"."""
    for reason in ("cancelled", "timeout"):
        eng, llm = engine()
        llm.finish_as = reason

        async def scenario() -> None:
            gen = await eng.start(GenerateRequest("r", list(range(40)), 10, eos_id=7))
            with pytest.raises(EngineStopped, match=reason) as caught:
                async for _ in gen:
                    pass
            assert caught.value.reason == reason  # each API picks its error form from it
            assert gen.finish_reason != "stop"

        asyncio.run(scenario())
        assert eng.active_requests() == 0


def test_every_end_id_reaches_sampling_params() -> None:
    eng, llm = engine()
    asyncio.run(eng.start(GenerateRequest("r", list(range(40)), 10, eos_id=7, end_ids=(7, 1, 106))))
    assert llm.params[-1]["end_id"] == 7 and llm.params[-1]["stop_token_ids"] == [1, 106]


def _checkpoint_dir(tmp_path: Path, vocab: int) -> Path:
    from harnesscheck.reference_server.make_model import write_checkpoint_files

    write_checkpoint_files(tmp_path, family="nemotron", model_vocab_size=vocab)
    return tmp_path


def test_tokenizer_verified_against_the_model_vocabulary(tmp_path: Path) -> None:
    ckpt = load_checkpoint(_checkpoint_dir(tmp_path, vocab=100))  # the tokenizer has ~2.8K ids
    with pytest.raises(TrtllmUnavailable, match="outside its vocabulary"):
        verify_tokenizer(ckpt, ckpt.tokenizer)
    with pytest.raises(TrtllmUnavailable, match="only from the checkpoint's own tokenizer"):
        verify_tokenizer(ckpt, load())  # the server's own tokenizer object: refused even with equal ids


def test_refuses_without_a_checkpoint() -> None:
    if importlib.util.find_spec("tensorrt_llm") is None:
        pytest.skip("tensorrt_llm does not import here: from_config stops at the import")
    with pytest.raises(TrtllmUnavailable, match="--model-path"):
        TrtllmEngine.from_config(ServerConfig(engine="trtllm"), load(), None)


CALC_SYSTEM = "Think step by step before you answer. Use the tools when they help."
CALC_TOOLS = [
    {"name": "calculator", "description": "Evaluate an arithmetic expression.",
     "input_schema": {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]}},
    {"name": "weather", "description": "Current weather for a city.",
     "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}},
]
CALC_PROMPT = "Think carefully about what 15 * 23 equals, then use the calculator to verify."


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("tensorrt_llm") is None,
                    reason="tensorrt_llm does not import here (it needs an NVIDIA GPU and NVIDIA's build)")
def test_real_tensorrt_llm_serves_the_calculator_scenario() -> None:
    """Article 1's calculator scenario on a real checkpoint through the Anthropic API: thinking, then a
    calculator tool_use, stop_reason tool_use; the second turn (the tool result appended) reuses the
    first turn's KV blocks. HARNESSCHECK_TRTLLM_MODEL: a checkpoint directory (e.g. Nemotron-3-Super);
    HARNESSCHECK_TRTLLM_ARGS: extra serve flags (e.g. --model-id ID=nemotron)."""
    import anthropic

    from harnesscheck.reference_server.launch import ServerProcess

    model = os.environ.get("HARNESSCHECK_TRTLLM_MODEL")
    if not model:
        pytest.skip("set HARNESSCHECK_TRTLLM_MODEL to a Hugging Face checkpoint directory")
    extra = os.environ.get("HARNESSCHECK_TRTLLM_ARGS", "").split()
    with ServerProcess(["--engine", "trtllm", "--model-path", model, "--engine-option",
                        "free_gpu_memory_fraction=0.5", *extra], startup_timeout=1800) as server:
        client = anthropic.Anthropic(base_url=server.url, api_key="x", timeout=600)
        model_id = client.models.list().data[0].id
        messages: list[dict] = [{"role": "user", "content": CALC_PROMPT}]
        first = client.messages.create(model=model_id, max_tokens=2048, system=CALC_SYSTEM, tools=CALC_TOOLS,
                                       messages=messages)
        kinds = [b.type for b in first.content]
        assert kinds[0] == "thinking" and "tool_use" in kinds, kinds
        call = next(b for b in first.content if b.type == "tool_use")
        assert call.name == "calculator" and "15" in call.input["expression"] and "23" in call.input["expression"]
        assert first.stop_reason == "tool_use"
        messages += [{"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
                     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "345"}]}]
        second = client.messages.create(model=model_id, max_tokens=1024, system=CALC_SYSTEM, tools=CALC_TOOLS,
                                        messages=messages)
        assert (second.usage.cache_read_input_tokens or 0) >= first.usage.input_tokens // 2, second.usage
