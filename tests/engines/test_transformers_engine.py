"""The transformers engine on a tiny random model: real forward passes, a real KV prefix cache.

The cache is shown to be real by comparing logits: a prompt prefilled on top of restored KV blocks
gives the same last-position logits as a cold prefill of the whole prompt.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from harnesscheck.reference_server.engines.base import GenerateRequest  # noqa: E402
from harnesscheck.reference_server.engines.kv_store import KVBlockStore  # noqa: E402
from harnesscheck.reference_server.engines.transformers_engine import EngineConfigError, TransformersEngine  # noqa: E402
from harnesscheck.reference_server.tokenizer import Tokenizer, load  # noqa: E402

BLOCK = 16
TEXT = ("The prefix cache keeps the KV of past requests in blocks keyed by hash chains, so the next turn of an "
        "agent session only prefills what is new. ")


def engine(model_dir: Path, **options: Any) -> TransformersEngine:
    opts = {"threads": "2", **{k: str(v) for k, v in options.items()}}
    return TransformersEngine.load(model_dir, load(), opts, block_size=BLOCK)


def request(ids: list[int], script: str = "ok", max_tokens: int = 64, eos_id: int | None = None) -> GenerateRequest:
    eos = load().token_id("<|im_end|>") if eos_id is None else eos_id
    return GenerateRequest(request_id="t", prompt_ids=ids, max_tokens=max_tokens, eos_id=eos, script_text=script)


async def drain(eng: TransformersEngine, req: GenerateRequest):
    gen = await eng.start(req)
    out: list[int] = []
    async for ids in gen:
        out.extend(ids)
    await eng.run(lambda: None)  # let queued store work finish
    return gen, out


def prompt_ids(n_tokens: int, seed: str = "") -> list[int]:
    tok = load()
    ids = tok.encode(seed + TEXT * (n_tokens // 20 + 2))
    return ids[:n_tokens]


def test_make_model_writes_a_loadable_model(tiny_model_dir: Path) -> None:
    from transformers import AutoModelForCausalLM

    names = {p.name for p in tiny_model_dir.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
            "harnesscheck.json"} <= names
    manifest = json.loads((tiny_model_dir / "harnesscheck.json").read_text())
    assert manifest["family"] == "nemotron" and manifest["model_type"] == "qwen3"
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, local_files_only=True)
    assert model.config.vocab_size >= load().vocab_size
    assert sum(p.numel() for p in model.parameters()) == manifest["params"]
    # the directory's tokenizer is the server's, id for id
    assert Tokenizer.from_file(tiny_model_dir / "tokenizer.json").hf.get_vocab() == load().hf.get_vocab()
    config = json.loads((tiny_model_dir / "tokenizer_config.json").read_text())
    assert "<|im_start|>" in config["chat_template"] and config["eos_token"] == "<|im_end|>"


def test_scripted_mode_emits_the_script(tiny_model_dir: Path) -> None:
    eng = engine(tiny_model_dir)
    script = "<think>\nLet me check.\n</think>\n\n<tool_call>\n{\"name\": \"calculator\"}\n</tool_call>"
    gen, out = asyncio.run(drain(eng, request(prompt_ids(40), script)))
    tok = load()
    assert out == tok.encode(script) + [tok.token_id("<|im_end|>")]
    assert gen.finish_reason == "stop" and gen.output_ids == out
    assert gen.timings["prefill_s"] > 0
    d = eng.describe()
    assert d["engine"] == "transformers" and d["timing"] == "real-compute" and d["mode"] == "scripted"
    assert d["device"] == "cpu" and d["params"] > 0 and d["block_size"] == BLOCK
    assert d["decode_threads"] == 1 and d["threads"] >= 1
    import torch

    # the setting is per thread (OpenMP): read it on the compute thread, after a one-token decode step
    assert eng._executor.submit(torch.get_num_threads).result() == 1


def test_scripted_mode_clips_at_max_tokens(tiny_model_dir: Path) -> None:
    eng = engine(tiny_model_dir)
    gen, out = asyncio.run(drain(eng, request(prompt_ids(20), "one two three four five six", max_tokens=3)))
    assert len(out) == 3 and gen.finish_reason == "length"


def test_second_prompt_reuses_the_kv_and_gets_the_same_logits(tiny_model_dir: Path) -> None:
    import torch

    eng = engine(tiny_model_dir)
    ids = prompt_ids(200)  # 12 full blocks + 8 tokens
    cold, _ = asyncio.run(drain(eng, request(ids)))
    assert cold.cached_tokens == 0
    warm, _ = asyncio.run(drain(eng, request(ids)))
    assert warm.cached_tokens == (len(ids) - 1) // BLOCK * BLOCK == 192
    assert warm.prompt_tokens == 200
    diff = (cold.prefill_logits.float() - warm.prefill_logits.float()).abs().max().item()
    assert diff < 1e-3, diff
    # the comparison means something: a different prompt gives different logits
    other, _ = asyncio.run(drain(eng, request(prompt_ids(200, seed="Other. "))))
    assert (other.prefill_logits - cold.prefill_logits).abs().max().item() > 1e-2
    # a prompt that extends the first one reuses its blocks, and its generated tokens' blocks too
    tok = load()
    script = " the answer is forty two, computed for real" * 3
    first, out = asyncio.run(drain(eng, request(ids, script)))
    longer = ids + out + tok.encode("\nnext user turn")
    nxt, _ = asyncio.run(drain(eng, request(longer)))
    assert nxt.cached_tokens >= (len(ids) + len(out)) // BLOCK * BLOCK
    # and the logits still match a cold prefill of the longer prompt
    fresh = engine(tiny_model_dir)
    cold_long, _ = asyncio.run(drain(fresh, request(longer)))
    assert cold_long.cached_tokens == 0
    assert torch.allclose(cold_long.prefill_logits, nxt.prefill_logits, atol=1e-3)


def test_lru_store_is_bounded(tiny_model_dir: Path) -> None:
    eng = engine(tiny_model_dir, cache_blocks=8)
    for n in range(4):
        asyncio.run(drain(eng, request(prompt_ids(70, seed=f"prompt {n}: "))))  # 4 blocks + output each
        assert len(eng.cache) <= 8
    assert eng.cache.stats.evictions > 0
    last = prompt_ids(70, seed="prompt 3: ")
    again, _ = asyncio.run(drain(eng, request(last)))
    assert again.cached_tokens == 64  # the newest prompt survived
    first, _ = asyncio.run(drain(eng, request(prompt_ids(70, seed="prompt 0: "))))
    assert first.cached_tokens == 0  # the oldest was evicted


def test_store_evicts_tails_first_and_never_pinned_blocks() -> None:
    import torch

    store = KVBlockStore(block_size=2, capacity_blocks=3)
    kv = [(torch.zeros(1, 1, 8, 2), torch.ones(1, 1, 8, 2))]
    a = [1, 2, 3, 4, 5, 6]
    store.insert(a, kv)
    cached, keys = store.match(a + [7])
    assert cached == 6 and len(keys) == 3
    store.pin(keys)
    store.insert([9, 9, 8, 8], kv)  # over capacity, but a's blocks are pinned
    assert store.match(a + [7])[0] == 6
    store.unpin(keys)
    assert len(store) == 3
    # the chain [9,9][8,8] was less recently used: its tail went first, then its head
    assert store.match([9, 9, 8, 8, 0])[0] == 0
    gathered = store.gather(keys)
    assert gathered[0][0].shape == (1, 1, 6, 2)


def test_close_mid_stream_frees_the_slot(tiny_model_dir: Path) -> None:
    eng = engine(tiny_model_dir, max_active=1)

    async def scenario() -> None:
        gen = await eng.start(request(prompt_ids(60), "a long answer " * 20))
        stream = gen.__aiter__()
        await stream.__anext__()
        assert eng.active_requests() == 1
        await stream.aclose()  # the client went away
        assert eng.active_requests() == 0
        await eng.run(lambda: None)  # the store work queued by the first request is done
        # the only slot is free again: a second request is admitted at once
        second = await asyncio.wait_for(eng.start(request(prompt_ids(60))), timeout=5)
        assert second.cached_tokens == 48  # the first request's prompt KV was stored
        await second.close()
        assert eng.active_requests() == 0
        await eng.run(lambda: None)

    asyncio.run(scenario())
    assert eng.cache.stats.pinned_blocks == 0


def test_free_mode_stops_at_max_tokens(tiny_model_dir: Path) -> None:
    eng = engine(tiny_model_dir, mode="free")
    gen, out = asyncio.run(drain(eng, request(prompt_ids(30), max_tokens=5, eos_id=-1)))
    assert len(out) == 5 and gen.finish_reason == "length"
    assert all(0 <= i < load().vocab_size for i in out)  # never past the tokenizer (the table is padded)
    # greedy is deterministic
    _, again = asyncio.run(drain(engine(tiny_model_dir, mode="free"), request(prompt_ids(30), max_tokens=5, eos_id=-1)))
    assert again == out


def test_free_mode_samples_with_a_temperature(tiny_model_dir: Path) -> None:
    runs = [asyncio.run(drain(engine(tiny_model_dir, mode="free", temperature=5, seed=s),
                              request(prompt_ids(30), max_tokens=6, eos_id=-1)))[1] for s in (1, 1, 2)]
    assert runs[0] == runs[1] and len(runs[0]) == 6  # seeded
    assert runs[0] != runs[2]


def test_free_mode_stops_at_eos(tiny_model_dir: Path) -> None:
    eng = engine(tiny_model_dir, mode="free")
    _, out = asyncio.run(drain(eng, request(prompt_ids(30), max_tokens=4, eos_id=-1)))
    eos = out[1]  # make the model's own second token the stop token
    gen, stopped = asyncio.run(drain(eng, request(prompt_ids(30), max_tokens=50, eos_id=eos)))
    assert stopped[-1] == eos and len(stopped) <= 2 and gen.finish_reason == "stop"


def test_refuses_what_it_cannot_serve(tiny_model_dir: Path, tmp_path: Path) -> None:
    eng = engine(tiny_model_dir)
    big = Tokenizer(load().hf)
    big.vocab_size = eng.config.vocab_size + 1
    with pytest.raises(EngineConfigError, match="vocabulary"):
        TransformersEngine(model=eng.model, tokenizer=big, model_path="x", device="cpu", dtype="float32")
    with pytest.raises(EngineConfigError, match="config.json"):
        TransformersEngine.load(tmp_path, load(), {})
    with pytest.raises(EngineConfigError, match="mode"):
        engine(tiny_model_dir, mode="creative")
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    import importlib.util

    if importlib.util.find_spec("gguf") is None:
        with pytest.raises(EngineConfigError, match="gguf"):
            TransformersEngine.load(gguf, load(), {})


def test_tokenizer_model_option_loads_the_directory_tokenizer(tiny_model_dir: Path) -> None:
    eng = engine(tiny_model_dir, tokenizer="model")
    assert eng.tokenizer is not load()
    assert eng.tokenizer.hf.get_vocab() == load().hf.get_vocab()
    assert eng.describe()["tokenizer"] == "model"
