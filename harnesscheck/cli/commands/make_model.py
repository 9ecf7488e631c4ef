"""`harnesscheck make-model DIR`: a small random-initialised model for the transformers engine."""

from __future__ import annotations

import argparse
import json

NAME = "make-model"
ORDER = 25
HELP = "create a small random-initialised Qwen3-style model (offline, seconds) for --engine transformers"
DESCRIPTION = """\
Create a small random-initialised Qwen3-style causal LM in DIR, offline and in seconds, so the
transformers engine does real compute on a fresh machine with nothing downloaded:

  config.json, model.safetensors     the model (transformers Qwen3ForCausalLM; Llama where missing)
  tokenizer.json                     the reference server's tokenizer (same ids as the server)
  tokenizer_config.json              the family's chat template and special tokens
  harnesscheck.json                  family, shape, parameter count, seed

The defaults (preset small: 4 layers, hidden 512, 8 heads, 4 KV heads) give about 17M parameters.
--preset qwen3-1.7b is Qwen3-1.7B's body (28 layers, hidden 2048, 16 heads, 8 KV heads, MLP 6144:
1.4B parameters with the server's small vocabulary), for real-compute timing on a GPU (--device
cuda --dtype bfloat16: seconds); --preset tiny is the tests' 1M-parameter model. Flags given with a
preset override its fields. The weights are random: serve it in scripted mode (the default), where
every forward pass is real but the tokens emitted are the scenario's. Needs: pip install torch
transformers safetensors.

Example:
  harnesscheck make-model /tmp/small --family qwen3
  harnesscheck serve --engine transformers --model-path /tmp/small --model-id small=qwen3
  harnesscheck make-model /tmp/q17 --preset qwen3-1.7b --device cuda --dtype bfloat16

Exit status: 0 written, 2 a bad shape or an unusable device.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dir", metavar="DIR", help="output directory (created)")
    parser.add_argument("--preset", default="small", choices=["tiny", "small", "qwen3-1.7b"],
                        help="model shape (default: small, about 17M parameters; qwen3-1.7b: 1.4B)")
    parser.add_argument("--layers", type=int, default=None, help="decoder layers (small: 4)")
    parser.add_argument("--hidden", type=int, default=None, help="hidden size (small: 512)")
    parser.add_argument("--heads", type=int, default=None, help="attention heads (small: 8)")
    parser.add_argument("--kv-heads", type=int, default=None, help="key/value heads, GQA (small: 4)")
    parser.add_argument("--intermediate", type=int, default=None,
                        help="MLP size (small: 3.5 x hidden, rounded to 128)")
    parser.add_argument("--max-positions", type=int, default=None, help="max positions (small: 65536)")
    parser.add_argument("--family", default="nemotron", choices=["nemotron", "qwen3", "deepseek_r1"],
                        help="chat template family (default: nemotron)")
    parser.add_argument("--seed", type=int, default=0, help="initialisation seed (default: 0)")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"],
                        help="saved weight dtype (default: float32)")
    parser.add_argument("--device", default="cpu", metavar="DEVICE",
                        help="where the random weights are drawn: cpu (default), cuda, cuda:N")


def run(args: argparse.Namespace) -> int:
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as error:
        print(f"make-model needs torch and transformers ({error}); pip install torch transformers safetensors")
        return 2
    import dataclasses

    from harnesscheck.reference_server.make_model import PRESETS, make_model

    given = {"layers": args.layers, "hidden": args.hidden, "heads": args.heads, "kv_heads": args.kv_heads,
             "intermediate": args.intermediate, "max_positions": args.max_positions}
    shape = dataclasses.replace(PRESETS[args.preset], **{k: v for k, v in given.items() if v is not None})
    try:
        manifest = make_model(args.dir, shape=shape, family=args.family, seed=args.seed, dtype=args.dtype,
                              device=args.device)
    except ValueError as error:
        print(f"make-model: {error}")
        return 2
    print(json.dumps({k: manifest[k] for k in ("family", "architecture", "params", "vocab_size", "seconds")}))
    print(f"wrote {args.dir}; serve it with:\n  {manifest['serve']}")
    return 0
