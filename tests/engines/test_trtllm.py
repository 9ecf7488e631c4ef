"""The TensorRT-LLM engine: its adapter against a stand-in of the LLM API (runs everywhere), and the
real thing where `tensorrt_llm` imports (skipped elsewhere, with that reason)."""

from __future__ import annotations

import asyncio
import importlib.util
import os
from dataclasses import dataclass, field
from typing import Any

import pytest

from reference_server.config import ServerConfig
from reference_server.engines.base import GenerateRequest
from reference_server.engines.trtllm import TrtllmEngine, TrtllmUnavailable
from reference_server.tokenizer import load


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

    def __init__(self, prompt: list[int], params: dict[str, Any], cached: int) -> None:
        self.prompt, self.params, self.cached = prompt, params, cached
        self.aborted = False

    async def __aiter__(self):
        out = FakeOutput()
        for n in range(self.params["max_tokens"]):
            if self.aborted:
                return
            token = 100 + n if n < 3 else self.params["end_id"]
            out.token_ids = out.token_ids + [token]
            out.token_ids_diff = [token]
            if token == self.params["end_id"]:
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

    def generate_async(self, inputs: dict[str, list[int]], sampling_params: dict[str, Any], streaming: bool):
        assert streaming
        ids = inputs["prompt_token_ids"]
        cached = 32 if any(s[:33] == ids[:33] for s in self.seen) and len(ids) > 33 else 0
        self.seen.append(ids)
        stream = FakeStream(ids, sampling_params, cached)
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


@pytest.mark.skipif(importlib.util.find_spec("tensorrt_llm") is None,
                    reason="tensorrt_llm does not import here (it needs an NVIDIA GPU and NVIDIA's build)")
def test_real_tensorrt_llm_reuses_kv_blocks() -> None:
    model = os.environ.get("HARNESSCHECK_TRTLLM_MODEL")
    if not model:
        pytest.skip("set HARNESSCHECK_TRTLLM_MODEL to a Hugging Face checkpoint directory")
    eng = TrtllmEngine.from_config(ServerConfig(engine="trtllm", model_path=model,
                                                engine_options={"free_gpu_memory_fraction": "0.5"}), load())
    ids = load().encode("The prefix cache keeps the KV of past requests. " * 200)
    first, out = asyncio.run(run(eng, ids, max_tokens=8))
    assert out and first.finish_reason in ("stop", "length")
    second, _ = asyncio.run(run(eng, ids, max_tokens=8))
    assert second.cached_tokens > 0
