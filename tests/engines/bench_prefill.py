"""Cold vs warm prefill through the transformers engine (prints a table; asserts nothing about speed).

    python -m tests.engines.bench_prefill                     # make a 4x512 model, CPU, 2K and 8K
    python -m tests.engines.bench_prefill --device cuda --lengths 8192,16384,32768,52000

For each length N: a cold request (nothing cached) and a warm one whose first N - ~100 tokens are
cached (the same prefix, a new ~100-token tail), both timed to the first token through
`engine.start` + the first token of the stream, the median of --repeat runs. Prints one JSON line
per length and a Markdown table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-path", help="model dir (default: make a 4-layer/512 model in a temp dir)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--lengths", default="2048,8192")
    parser.add_argument("--tail", type=int, default=100, help="uncached tokens in the warm run (default 100)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    parser.add_argument("--prefill-chunk", type=int, default=16384)
    parser.add_argument("--json-out", help="also write the rows here")
    args = parser.parse_args(argv)

    import torch

    from harnesscheck.reference_server.engines.base import GenerateRequest
    from harnesscheck.reference_server.engines.transformers_engine import TransformersEngine
    from harnesscheck.reference_server.make_model import make_model
    from harnesscheck.reference_server.tokenizer import load, shipped_corpus

    if args.threads:
        torch.set_num_threads(args.threads)
    model_path = args.model_path
    if not model_path:
        model_path = tempfile.mkdtemp(prefix="hc-bench-model-")
        made = make_model(model_path, family="nemotron")
        print(f"made {made['params']:,}-param model in {made['seconds']} s at {model_path}")
    tok = load()
    corpus = tok.encode("\n".join(shipped_corpus()))
    lengths = [int(x) for x in args.lengths.split(",")]
    need = max(lengths) + args.tail * (args.repeat + 2) + 10
    while len(corpus) < need:
        corpus = corpus + corpus
    opts = {"device": args.device, "dtype": args.dtype, "prefill_chunk": str(args.prefill_chunk),
            "cache_mb": "16384"}
    engine = TransformersEngine.load(model_path, tok, opts, block_size=16)
    eos = tok.token_id("<|im_end|>")

    async def ttft(ids: list[int]) -> tuple[float, int]:
        t0 = time.perf_counter()
        gen = await engine.start(GenerateRequest("bench", ids, 1, eos, script_text=""))
        stream = gen.__aiter__()
        await stream.__anext__()
        elapsed = time.perf_counter() - t0
        await stream.aclose()
        await engine.run(lambda: None)
        return elapsed, gen.cached_tokens

    async def measure() -> list[dict]:
        rows = []
        await ttft(corpus[:256])  # warm up kernels
        for n in lengths:
            cold, warm = [], []
            for r in range(args.repeat):
                engine.cache.clear()
                shift = 7 * (r + 1)  # a fresh prefix per repeat
                base = corpus[shift : shift + n]
                t, cached = await ttft(base)
                assert cached == 0
                cold.append(t)
                tail = corpus[-(args.tail * (r + 2)) :][: args.tail]
                prefix = base[: n - args.tail]
                t, cached = await ttft(prefix + tail)
                warm.append(t)
            row = {"tokens": n, "cold_s": round(statistics.median(cold), 4),
                   "warm_s": round(statistics.median(warm), 4), "warm_cached_tokens": cached,
                   "speedup": round(statistics.median(cold) / statistics.median(warm), 1)}
            print(json.dumps(row), flush=True)
            rows.append(row)
        return rows

    rows = asyncio.run(measure())
    d = engine.describe()
    where = torch.cuda.get_device_name() if args.device.startswith("cuda") else f"cpu x{torch.get_num_threads()}"
    print(f"\nmodel: {d['model_type']} {d['layers']} layers, hidden {d['hidden']}, {d['params']:,} params, "
          f"{d['dtype']}, {where}, torch {d['torch']}, transformers {d['transformers']}")
    print("| prompt tokens | cold TTFT (s) | warm TTFT (s), cached tokens | speedup |")
    print("| ---: | ---: | ---: | ---: |")
    for row in rows:
        print(f"| {row['tokens']:,} | {row['cold_s']:.3f} | {row['warm_s']:.3f} ({row['warm_cached_tokens']:,}) "
              f"| {row['speedup']}x |")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({"engine": d, "device_name": where, "rows": rows}, indent=2))
    engine.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
