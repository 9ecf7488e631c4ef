"""Dynamo 1.6.1 (frontend + CPU mocker) as a peer, serving the kit's scripted outputs, until stopped.

    python scripts/dynamo_peer.py [--python DYNAMO_PYTHON] [--model-dir DIR]
    harnesscheck check --endpoint URL --model harnesscheck/qwen3-tiny --peer dynamo-mocker --out runs/dynamo

DYNAMO_PYTHON: the Python of an environment with ai-dynamo 1.6.1 (docs/peers/dynamo-1.6.1.md; default
$HARNESSCHECK_DYNAMO_PYTHON). DIR: a Hugging Face folder with the tokenizer, chat template and config (the
mocker loads no weights); default, one the kit writes (the reference tokenizer with Qwen3's template, no torch).
The mocker plays the kit's scenario turns (conformance/mocker_replay.py) with the qwen3 reasoning and hermes
tool-call parsers. Ctrl-C (or SIGTERM) stops the frontend and the mocker, and removes what was written.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

MODEL = "harnesscheck/qwen3-tiny"


def main(argv: list[str] | None = None) -> int:
    from harnesscheck.conformance.mocker_replay import scripted_outputs
    from harnesscheck.replay.benchmarks.dynamo_peer import ENV_PYTHON, DynamoProcess, locate, weightless_model

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--python", default=os.environ.get(ENV_PYTHON), help=f"Dynamo's Python (default: ${ENV_PYTHON})")
    parser.add_argument("--model-dir", default=None, help="a Hugging Face folder (default: one the kit writes)")
    args = parser.parse_args(argv)
    python, why = locate(args.python)
    if python is None:
        print(f"dynamo_peer: {why}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="hc-dynamo-peer-") as tmp:
        model_dir = Path(args.model_dir) if args.model_dir else weightless_model(Path(tmp) / "model")
        replay = scripted_outputs(model_dir, reasoning_parser="qwen3", tool_parser="hermes")
        for stop in (signal.SIGINT, signal.SIGTERM):  # SIGINT too: a shell starts a background job with it ignored
            signal.signal(stop, signal.default_int_handler)
        with DynamoProcess(python, model_dir, model=MODEL, reasoning_parser="qwen3", tool_call_parser="hermes",
                           replay=replay) as dynamo:
            print(f"Dynamo 1.6.1 serving {dynamo.model} on {dynamo.url} (Ctrl-C stops it)", flush=True)
            try:
                while True:
                    time.sleep(3600)
            except KeyboardInterrupt:
                print("stopping Dynamo", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
