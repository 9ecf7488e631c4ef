"""The peers of `bench fidelity`: the benchmark clients a user would run instead of the kit's, each
run as a subprocess from its own environment against the same ground-truth server, its
per-request records read back as ``fidelity_records.Measured`` and paired with the server's log by id.

- ``aiperf`` (AIPerf, e.g. 0.13): ``aiperf profile --endpoint-type chat --streaming --concurrency C
  --request-count N --export-level records``. It sends an ``X-Request-ID`` header per request
  (``aiperf/transports/base_transports.py``) and writes one JSON line per request to
  ``profile_export.jsonl``: ``metadata.x_request_id``, ``metrics.time_to_first_token`` (ms),
  ``metrics.inter_chunk_latency`` (ms, one per gap), ``error``.
- ``vllm-bench`` (``vllm bench serve``, vLLM 0.32): ``--backend openai-chat --dataset-name random
  --max-concurrency C --num-prompts N --save-result --save-detailed --request-id-prefix P``. It
  sends ``x-request-id: P<i>`` for prompt ``i`` (``vllm/benchmarks/lib/endpoint_request_func.py``)
  and its detailed result lists ``ttfts`` (s), ``itls`` (s per gap) and ``errors`` in prompt order.

Where to find a peer: ``python`` (an interpreter of the environment it is installed in), else
``$HARNESSCHECK_AIPERF_PYTHON`` / ``$HARNESSCHECK_VLLM_PYTHON``, else the ``aiperf`` / ``vllm``
executable on PATH; a peer that is not there (or whose package that interpreter cannot import)
is skipped with the reason.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from harnesscheck.replay.benchmarks.fidelity_records import Measured

PEERS = ("aiperf", "vllm-bench")
_ENV = {"aiperf": "HARNESSCHECK_AIPERF_PYTHON", "vllm-bench": "HARNESSCHECK_VLLM_PYTHON"}
_MODULE = {"aiperf": "aiperf", "vllm-bench": "vllm"}
_EXE = {"aiperf": "aiperf", "vllm-bench": "vllm"}
TIMEOUT_S = 1200
# `vllm bench serve` without the `vllm` script (which needs the package's metadata to start)
_VLLM_MAIN = ("import sys; from vllm.utils.argparse_utils import FlexibleArgumentParser as P; "
              "from vllm.benchmarks.serve import add_cli_args, main; p = P(); add_cli_args(p); "
              "main(p.parse_args(sys.argv[1:]))")


@dataclass
class PeerRun:
    """One peer at one level: its records (empty when skipped), the command, why it was skipped."""

    measured: list[Measured] = field(default_factory=list)
    command: list[str] = field(default_factory=list)
    skipped: str | None = None


def locate(peer: str, python: str | None = None) -> tuple[list[str] | None, str]:
    """The argv prefix that runs ``peer`` (None if it is not installed) and a sentence saying where."""
    if peer not in PEERS:
        raise ValueError(f"unknown peer {peer!r}; known: {', '.join(PEERS)}")
    python = python or os.environ.get(_ENV[peer])
    module = _MODULE[peer]
    if python:
        if not (os.path.exists(python) and os.access(python, os.X_OK)):
            return None, f"{python} is not an executable"
        code = f"import importlib.util as u; raise SystemExit(u.find_spec({module!r}) is None)"
        probe = subprocess.run([python, "-c", code], capture_output=True, timeout=60, check=False)
        if probe.returncode:
            return None, f"{python} cannot import {module}"
        if peer == "aiperf":
            return [python, "-m", "aiperf", "profile"], f"{python} -m aiperf"
        return [python, "-c", _VLLM_MAIN], f"{python} (vllm.benchmarks.serve)"
    exe = shutil.which(_EXE[peer])
    if exe:
        return [exe, "profile"] if peer == "aiperf" else [exe, "bench", "serve"], exe
    return None, f"{peer} is not installed here: set {_ENV[peer]} to the Python of an environment that has it"


def run_peer(peer: str, url: str, c: int, n: int, python: str | None, tokenizer: str | None,
             workdir: str) -> PeerRun:
    """Run ``peer`` at concurrency ``c`` for ``n`` requests against ``url``; its paired-ready records."""
    argv, where = locate(peer, python)
    if argv is None:
        return PeerRun(skipped=where)
    tok = tokenizer or default_tokenizer()
    out = Path(workdir) / f"{peer}-c{c}-{uuid.uuid4().hex[:6]}"
    out.mkdir(parents=True)
    if peer == "aiperf":
        cmd = [*argv, "--model", "ground-truth", "--url", url, "--endpoint-type", "chat", "--streaming",
               "--concurrency", str(c), "--request-count", str(n), "--tokenizer", tok, "--artifact-dir", str(out),
               "--ui-type", "none", "--export-level", "records", "--no-server-metrics", "--random-seed", "0"]
    else:
        prefix = f"hc-{uuid.uuid4().hex[:8]}-"
        cmd = [*argv, "--backend", "openai-chat", "--base-url", url,
               "--endpoint", "/v1/chat/completions", "--model", "ground-truth", "--tokenizer", tok,
               "--dataset-name", "random", "--random-input-len", "16", "--random-output-len", "64",
               "--num-prompts", str(n), "--max-concurrency", str(c), "--save-result", "--save-detailed",
               "--result-dir", str(out), "--result-filename", "result.json", "--request-id-prefix", prefix,
               "--seed", "0"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S, cwd=out, check=False)
    if done.returncode:
        tail = (done.stdout + done.stderr)[-1500:]
        raise RuntimeError(f"{peer} exited with {done.returncode}: {' '.join(cmd)}\n{tail}")
    records = read_aiperf(out / "profile_export.jsonl") if peer == "aiperf" else read_vllm(out / "result.json", prefix)
    return PeerRun(records, cmd)


def default_tokenizer() -> str:
    """The folder of the reference server's tokenizer (a Hugging Face ``tokenizer.json``)."""
    from harnesscheck.reference_server.tokenizer import DATA

    return str(DATA)


def read_aiperf(path: Path) -> list[Measured]:
    """AIPerf's per-request records: TTFT and chunk times (ms from the request start) by request id."""
    out: list[Measured] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        d = json.loads(line)
        meta, metrics = d.get("metadata") or {}, d.get("metrics") or {}
        rid = str(meta.get("x_request_id") or "")
        err = d.get("error")
        ttft = (metrics.get("time_to_first_token") or {}).get("value")
        gaps = (metrics.get("inter_chunk_latency") or {}).get("value") or []
        times = [] if ttft is None else _cumulative(float(ttft), [float(g) for g in gaps])
        out.append(Measured(rid, ttft, times, None if not err else str(err.get("message") or err)))
    return out


def read_vllm(path: Path, prefix: str) -> list[Measured]:
    """``vllm bench serve``'s detailed result: prompt ``i`` was sent as request id ``prefix + i``.
    Its ``itls`` end with one more gap than the content chunks have (to the ``finish_reason``
    chunk, which carries no content): that last gap is dropped."""
    d = json.loads(path.read_text(encoding="utf-8"))
    out: list[Measured] = []
    for i, (ttft, itls, err) in enumerate(zip(d["ttfts"], d["itls"], d["errors"], strict=True)):
        ttft_ms = None if not ttft else float(ttft) * 1000
        times = [] if ttft_ms is None else _cumulative(ttft_ms, [float(g) * 1000 for g in itls[:-1]])
        out.append(Measured(f"{prefix}{i}", ttft_ms, times, err or None))
    return out


def _cumulative(first: float, gaps: list[float]) -> list[float]:
    times = [first]
    for g in gaps:
        times.append(times[-1] + g)
    return times
