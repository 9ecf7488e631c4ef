"""The preamble arms with real compute: stable prefix vs billing header (stripped / not stripped).

    python -m tests.engines.bench_preamble [--model-path DIR] [--tokens 4096] [--repeat 3]

Starts `harnesscheck serve --engine transformers` twice (header stripped, the default; and
--no-strip-anthropic-preamble) and streams Anthropic requests whose system prompt is ~N tokens:
  stable    no header, same system prompt every request
  stripped  a per-request `x-anthropic-billing-header` line, stripped by the server
  header    the same, on the server that keeps it (every request's prefix differs at token 0)
Prints the median time to the first content delta and the cached tokens per arm (after one
warm-up request per arm). Asserts nothing about speed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import statistics
import tempfile
import time
from typing import Any

import httpx

from harnesscheck.reference_server.launch import ServerProcess

MODEL = "bench-small"


def system_text(tokens: int) -> str:
    rng = random.Random(0)
    words = "cache block prefix token model server stream reason tool call history render template".split()
    return "\n".join(" ".join(rng.choice(words) for _ in range(12)) for _ in range(tokens // 14 + 1))


def header(n: int) -> str:
    return f"x-anthropic-billing-header: cc_version=1.0; cc_entrypoint=cli; cch={hashlib.sha256(str(n).encode()).hexdigest()[:5]};"


def ttft(url: str, system: str, n: int) -> tuple[float, int, int]:
    body: dict[str, Any] = {"model": MODEL, "max_tokens": 64, "stream": True, "system": system,
                            "messages": [{"role": "user", "content": f"Question {n}: say ok."}]}
    t0 = time.monotonic()
    first = None
    usage: dict[str, Any] = {}
    with httpx.stream("POST", url + "/v1/messages", json=body, timeout=600) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if not line.startswith("data: "):
                continue
            event = json.loads(line[6:])
            if event["type"] == "message_start":
                usage = event["message"]["usage"]
            elif event["type"] == "content_block_delta" and first is None:
                first = time.monotonic() - t0
    total = usage.get("input_tokens", 0) + usage.get("cache_read_input_tokens", 0)
    return first or 0.0, usage.get("cache_read_input_tokens", 0), total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-path")
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    model_path = args.model_path
    if not model_path:
        from harnesscheck.reference_server.make_model import make_model

        model_path = tempfile.mkdtemp(prefix="hc-bench-model-")
        make_model(model_path, family="nemotron")
    common = ["--engine", "transformers", "--model-path", model_path, "--model-id", f"{MODEL}=nemotron",
              "--engine-option", f"threads={args.threads}"]
    system = system_text(args.tokens)
    rows = []
    counter = iter(range(10**6))
    for arm, extra, with_header in [("stable", [], False), ("stripped", [], True),
                                    ("header", ["--no-strip-anthropic-preamble"], True)]:
        with ServerProcess([*common, *extra], startup_timeout=180) as server:
            def one() -> tuple[float, int, int]:
                n = next(counter)
                return ttft(server.url, (header(n) + "\n" + system) if with_header else system, n)

            one()  # warm-up: fills the cache with this arm's prefix
            runs = [one() for _ in range(args.repeat)]
        row = {"arm": arm, "ttft_s": round(statistics.median(r[0] for r in runs), 3),
               "cached_tokens": runs[-1][1], "prompt_tokens": runs[-1][2]}
        print(json.dumps(row), flush=True)
        rows.append(row)
    print("\n| arm | prompt tokens | cached tokens | TTFT (s, median) |\n| --- | ---: | ---: | ---: |")
    for row in rows:
        print(f"| {row['arm']} | {row['prompt_tokens']:,} | {row['cached_tokens']:,} | {row['ttft_s']:.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
