"""Create a small random-initialised causal LM that the transformers engine can serve, offline.

The model is Qwen3-style (transformers' Qwen3ForCausalLM; LlamaForCausalLM where Qwen3 is missing),
randomly initialised from a seed, saved with safetensors. Beside it go the server's own tokenizer
(`reference_server/data/tokenizer.json`, trained on text the repo ships), so the token ids the
server counts are the ids the model embeds, a `tokenizer_config.json` carrying the family's chat
template and special tokens, and `harnesscheck.json` describing the family and the shape.

Nothing is downloaded: a fresh machine with torch and transformers installed gets a real-compute
path in seconds. The defaults (4 layers, hidden 512, 8 heads, 4 KV heads) give about 17M parameters;
`PRESETS` names other shapes, among them `qwen3-1.7b`: Qwen3-1.7B's body (28 layers, hidden 2048, 16
heads, 8 KV heads, head dim 128, MLP 6144; 1.4B parameters with this tokenizer's small vocabulary),
for real-compute timing at a realistic size on a GPU (`device="cuda"` initialises it there, in
seconds; save it in bfloat16).
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from harnesscheck.reference_server.pipeline.families import FAMILIES
from harnesscheck.reference_server.tokenizer import DEFAULT_PATH, SPECIAL_TOKENS, Tokenizer

TEMPLATES = Path(__file__).resolve().parent / "templates"
MANIFEST = "harnesscheck.json"


@dataclass(frozen=True, slots=True)
class ModelShape:
    layers: int = 4
    hidden: int = 512
    heads: int = 8
    kv_heads: int = 4
    intermediate: int | None = None  # default: 3.5 x hidden rounded to 128 (about 17M params at 4 x 512)
    max_positions: int = 65536  # long enough for 52K-token prompts on a GPU
    rope_theta: float = 1_000_000.0

    def intermediate_size(self) -> int:
        if self.intermediate:
            return self.intermediate
        return max(128, int(round(self.hidden * 3.5 / 128)) * 128)


PRESETS: dict[str, ModelShape] = {
    "tiny": ModelShape(layers=2, hidden=128, heads=4, kv_heads=2, intermediate=256, max_positions=8192),
    "small": ModelShape(),
    # Qwen3-1.7B's config.json (hidden 2048, 28 layers, 16 heads, 8 KV heads, intermediate 6144, rope theta
    # 1e6), with positions enough for 52K-token prompts and untied embeddings
    "qwen3-1.7b": ModelShape(layers=28, hidden=2048, heads=16, kv_heads=8, intermediate=6144),
}


def _pad(n: int, multiple: int = 64) -> int:
    return (n + multiple - 1) // multiple * multiple


def build_config(shape: ModelShape, vocab_size: int, *, bos_id: int, eos_id: int, pad_id: int) -> Any:
    """A Qwen3Config (LlamaConfig where this transformers has no Qwen3)."""
    if shape.hidden % shape.heads:
        raise ValueError(f"hidden ({shape.hidden}) must be a multiple of heads ({shape.heads})")
    if shape.heads % shape.kv_heads:
        raise ValueError(f"heads ({shape.heads}) must be a multiple of kv-heads ({shape.kv_heads})")
    common: dict[str, Any] = dict(
                  vocab_size=vocab_size, hidden_size=shape.hidden, intermediate_size=shape.intermediate_size(),
                  num_hidden_layers=shape.layers, num_attention_heads=shape.heads,
                  num_key_value_heads=shape.kv_heads, head_dim=shape.hidden // shape.heads,
                  max_position_embeddings=shape.max_positions, rope_theta=shape.rope_theta,
                  tie_word_embeddings=False, bos_token_id=bos_id, eos_token_id=eos_id, pad_token_id=pad_id)
    try:
        from transformers import Qwen3Config

        return Qwen3Config(**common, use_sliding_window=False)
    except ImportError:  # transformers older than Qwen3 support
        from transformers import LlamaConfig

        return LlamaConfig(**common)


def _model_class(config: Any) -> Any:
    if config.model_type == "qwen3":
        from transformers import Qwen3ForCausalLM

        return Qwen3ForCausalLM
    from transformers import LlamaForCausalLM

    return LlamaForCausalLM


def tokenizer_config(family: str, tokenizer: Tokenizer) -> dict[str, Any]:
    fam = FAMILIES[family]
    bos = "<|begin_of_sentence|>" if family == "deepseek_r1" else None
    added = {str(tokenizer.token_id(t)): {"content": t, "special": True, "lstrip": False, "rstrip": False,
                                          "normalized": False, "single_word": False} for t in SPECIAL_TOKENS}
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "chat_template": (TEMPLATES / fam.template).read_text(encoding="utf-8"),
        "bos_token": bos,
        "eos_token": fam.eos,
        "pad_token": "<|endoftext|>",
        "unk_token": None,
        "add_bos_token": False,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": 65536,
        "added_tokens_decoder": added,
    }


def write_tokenizer_files(out: Path, family: str, tokenizer_path: str | Path | None = None, *,
                          chat_template: bool = True) -> Tokenizer:
    """tokenizer.json (the server's tokenizer: same ids) and tokenizer_config.json (the family's chat
    template unless `chat_template` is False, special tokens) into `out`."""
    tok_src = Path(tokenizer_path or DEFAULT_PATH)
    tokenizer = Tokenizer.from_file(tok_src)
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(tok_src, out / "tokenizer.json")
    config = tokenizer_config(family, tokenizer)
    if not chat_template:
        del config["chat_template"]
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    return tokenizer


def write_checkpoint_files(out_dir: str | Path, *, family: str = "nemotron", model_vocab_size: int | None = None,
                           tokenizer_path: str | Path | None = None, chat_template: bool = True) -> Path:
    """A checkpoint directory without weights, for the loader (`reference_server/checkpoint.py`) and
    the scripted engine with --model-path, with no torch: the tokenizer files, config.json
    (vocab_size, eos_token_id, and ModelShape's sizes) and generation_config.json (eos_token_id: the family's turn end and
    `<|endoftext|>`)."""
    out = Path(out_dir)
    tokenizer = write_tokenizer_files(out, family, tokenizer_path, chat_template=chat_template)
    eos_id = tokenizer.token_id(FAMILIES[family].eos)
    end = [eos_id, tokenizer.token_id("<|endoftext|>")]
    shape = ModelShape()  # the sizes the weights would have (Dynamo's mocker sizes its KV cache from them)
    config = {"model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"],
              "vocab_size": model_vocab_size or _pad(tokenizer.vocab_size), "eos_token_id": eos_id,
              "num_hidden_layers": shape.layers, "hidden_size": shape.hidden, "num_attention_heads": shape.heads,
              "num_key_value_heads": shape.kv_heads, "head_dim": shape.hidden // shape.heads,
              "max_position_embeddings": shape.max_positions}
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    (out / "generation_config.json").write_text(json.dumps({"eos_token_id": end}, indent=2) + "\n",
                                                encoding="utf-8")
    return out


def make_model(out_dir: str | Path, *, shape: ModelShape | None = None, family: str = "nemotron", seed: int = 0,
               dtype: str = "float32", tokenizer_path: str | Path | None = None,
               device: str = "cpu") -> dict[str, Any]:
    """Write the model directory; returns the manifest (also saved as harnesscheck.json). `device` is
    where the random weights are drawn (a 1.4B model initialises in seconds on a GPU, a minute on a CPU);
    the saved files are the same kind either way."""
    import torch
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}; known: {', '.join(FAMILIES)}")
    shape = shape or ModelShape()
    t0 = time.monotonic()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tok_src = Path(tokenizer_path or DEFAULT_PATH)
    tokenizer = Tokenizer.from_file(tok_src)
    fam = FAMILIES[family]
    eos_id = tokenizer.token_id(fam.eos)
    bos_id = tokenizer.token_id("<|begin_of_sentence|>" if family == "deepseek_r1" else "<|endoftext|>")
    pad_id = tokenizer.token_id("<|endoftext|>")
    config = build_config(shape, _pad(tokenizer.vocab_size), bos_id=bos_id, eos_id=eos_id, pad_id=pad_id)

    if dtype not in ("float32", "bfloat16", "float16"):
        raise ValueError(f"dtype must be float32, bfloat16 or float16, not {dtype!r}")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device {device!r}: torch sees no CUDA device")
    torch.manual_seed(seed)
    with torch.device(device):
        model = _model_class(config)(config)
    model.to(getattr(torch, dtype))
    model.eval()
    model.generation_config.eos_token_id = eos_id
    model.generation_config.pad_token_id = pad_id
    model.generation_config.bos_token_id = bos_id
    model.save_pretrained(out, safe_serialization=True)

    write_tokenizer_files(out, family, tok_src)
    params = sum(p.numel() for p in model.parameters())
    manifest = {
        "created_by": "harnesscheck make-model",
        "family": family,
        "chat_template": fam.template,
        "eos_token": fam.eos,
        "model_type": config.model_type,
        "architecture": type(model).__name__,
        "params": params,
        "vocab_size": config.vocab_size,
        "tokenizer_vocab_size": tokenizer.vocab_size,
        "tokenizer": "reference_server/data/tokenizer.json (the server's tokenizer: same ids)",
        "shape": asdict(shape) | {"intermediate": shape.intermediate_size()},
        "seed": seed,
        "dtype": dtype,
        "init_device": device,
        "weights": "random (not trained): text from free mode is noise; use mode=scripted for content",
        "serve": f"harnesscheck serve --engine transformers --model-path {out} --model-id harnesscheck-small={family}",
    }
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    manifest["seconds"] = round(time.monotonic() - t0, 2)
    return manifest

