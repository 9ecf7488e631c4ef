"""`bench headline`: the first article's headline figures on real compute, in one command.

The article measured, on a B200 with a 52K-token Claude Code prompt, TTFT 168 ms with a stable prefix,
912 ms with the per-session billing header and 169 ms with it stripped; and 167 ms vs 322 ms for a
next turn whose ~500 tokens of history came back verbatim vs rewritten. This runs both benchmarks on
the transformers engine (real forward passes, real KV prefix cache) serving a random-initialised model
of a realistic shape, made here offline:

1. `make_model` with a preset shape (`full`: Qwen3-1.7B's body, 1.4B parameters, bfloat16, initialised
   on the GPU; `small`: the tests' 1M-parameter model, float32) unless `model_dir` already holds one;
2. `bench preamble` (stable / header / stripped) and `bench history` (kept / rewritten), each against
   its pair of embedded reference servers on that model (`--engine transformers`), with at least the
   regression gate's minimum of sessions per arm; each writes its JSON and plot as soon as it ends;
3. `summary.json` and `summary.md`: the three ratios (header/stable, stripped/stable, rewritten/kept)
   with their bootstrap 95% intervals beside the article's, the arms' medians, the timing the server
   reported (`real-compute`), the GPU's name (torch's, from the engine's `/v1/models` metadata), the
   model's shape and parameter count, the versions and the date.

Sizes: `full` is for one GPU (sized for about five minutes on an H200; nothing measured there yet);
`small` runs on a CPU in about a minute and is what the test suite runs (scripts/gpu_headline.sh
--cpu-small). Every size knob can be set on its own.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harnesscheck.replay.benchmarks import common

MODEL_ID = "harnesscheck/headline"
FAMILY = "nemotron"
# The article's figures (ms, B200, 52K-token prompt) and the ratios they give.
ARTICLE_MS = {"stable": 168.0, "header": 912.0, "stripped": 169.0, "kept": 167.0, "rewritten": 322.0}
RATIOS = (("header/stable", "preamble"), ("stripped/stable", "preamble"), ("rewritten/kept", "history"))


@dataclass(frozen=True)
class Size:
    model_preset: str  # reference_server.make_model.PRESETS
    system_tokens: int  # bench preamble
    sessions: int  # bench preamble, per arm
    history_sessions: int
    history_system_tokens: int
    turn_tokens: int  # bench history: tokens of the previous turn after its reasoning
    engine_options: tuple[str, ...] = ()


SIZES = {
    # One H200: a 52K-token prefill of the 1.4B model is about 0.5 PFLOP (~1 s); a decode step is one
    # forward pass of 28 layers (~20-30 ms unbatched in eager transformers), so history's turn 1
    # (~550 scripted tokens, decoded for real) is most of the run. Gate minimum: 4 per arm.
    "full": Size("qwen3-1.7b", 52000, 8, 5, 52000, 500),
    # A CPU in the test suite: the tiny model, a few thousand tokens, one torch thread per server.
    "small": Size("tiny", 3000, 4, 4, 1500, 48, ("threads=1",)),
}


@dataclass
class HeadlineOptions:
    out: Path
    size: str = "full"
    device: str = "auto"  # auto: CUDA where torch sees one; the full size refuses a CPU unless asked for
    model_dir: str | None = None  # reuse (or keep) the model here; default: a temporary folder, removed
    model_preset: str | None = None  # over the size's (reference_server.make_model.PRESETS)
    shape: dict[str, int] = field(default_factory=dict)  # ModelShape fields over the size's preset
    system_tokens: int | None = None
    sessions: int | None = None
    history_sessions: int | None = None
    history_system_tokens: int | None = None
    turn_tokens: int | None = None
    engine_options: list[str] = field(default_factory=list)  # KEY=VALUE, after the size's and the defaults
    server_args: list[str] = field(default_factory=list)
    startup_timeout: float = 300.0
    log: Callable[[str], None] = print
    caption: Callable[[dict[str, Any], list[Path], str], None] | None = None  # adds a caption to plots


def _device(asked: str, size: str) -> str:
    import torch

    if asked == "auto":
        if torch.cuda.is_available():
            return "cuda"
        if size == "full":
            raise ValueError(f"bench headline --size full needs a CUDA GPU, and torch {torch.__version__} sees "
                             "none; --size small runs on a CPU (or pass --device cpu to insist)")
        return "cpu"
    if asked.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"--device {asked}: torch {torch.__version__} sees no CUDA device")
    return asked


def _kv_bytes_per_token(shape: Any, dtype: str) -> int:
    elem = 2 if dtype in ("bfloat16", "float16") else 4
    return 2 * shape.layers * shape.kv_heads * (shape.hidden // shape.heads) * elem


def _model(opts: HeadlineOptions, size: Size, device: str, dtype: str, work: Path) -> tuple[Path, dict[str, Any]]:
    """The model folder and its manifest: `model_dir` when it holds a make-model model, else a new one."""
    from harnesscheck.reference_server.make_model import MANIFEST, PRESETS, make_model

    target = Path(opts.model_dir) if opts.model_dir else work / "model"
    manifest_path = target / MANIFEST
    if manifest_path.is_file() and (target / "config.json").is_file():
        opts.log(f"model: reusing {target}")
        return target, json.loads(manifest_path.read_text(encoding="utf-8"))
    preset = opts.model_preset or size.model_preset
    if preset not in PRESETS:
        raise ValueError(f"model preset must be one of {', '.join(PRESETS)}, not {preset!r}")
    shape = dataclasses.replace(PRESETS[preset], **opts.shape)
    opts.log(f"model: making a random {preset} model ({shape.layers} layers, hidden {shape.hidden}, "
             f"{dtype}) in {target}, initialised on {device}")
    manifest = make_model(target, shape=shape, family=FAMILY, seed=0, dtype=dtype, device=device)
    return target, manifest


def run_headline(opts: HeadlineOptions) -> dict[str, Any]:
    """Make or reuse the model, run both benchmarks, write everything under `opts.out`; the summary."""
    from harnesscheck.reference_server.make_model import ModelShape
    from harnesscheck.replay.benchmarks.history import HistoryOptions, run_history
    from harnesscheck.replay.benchmarks.preamble import PreambleOptions, run_preamble
    from harnesscheck.reports.schema import now_iso

    if opts.size not in SIZES:
        raise ValueError(f"--size must be one of {', '.join(SIZES)}, not {opts.size!r}")
    size = SIZES[opts.size]
    started, t0 = now_iso(), time.monotonic()
    seconds: dict[str, float] = {}
    device = _device(opts.device, opts.size)
    dtype = "bfloat16" if device.startswith("cuda") else "float32"
    out = Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="hc-headline-"))
    try:
        model_dir, manifest = _model(opts, size, device, dtype, work)
        seconds["model"] = round(time.monotonic() - t0, 1)
        shape = ModelShape(**{k: v for k, v in manifest["shape"].items() if k in ModelShape.__dataclass_fields__})
        system_tokens = opts.system_tokens or size.system_tokens
        hist_system = opts.history_system_tokens or size.history_system_tokens
        # KV store: room for four prompts of the longest context per server (the stable prefix, the
        # header arm's newest chains, the output), so LRU eviction never reaches the stable prefix.
        longest = max(system_tokens, hist_system) + 2048
        cache_mb = max(256, 4 * longest * _kv_bytes_per_token(shape, manifest.get("dtype", dtype)) // 2**20)
        engine_options = [f"device={device}", f"cache_mb={cache_mb}", *size.engine_options, *opts.engine_options]
        server_args = ["--engine", "transformers", "--model-path", str(model_dir), "--model-id", f"{MODEL_ID}={FAMILY}",
                       *[x for o in engine_options for x in ("--engine-option", o)], *opts.server_args]

        t1 = time.monotonic()
        sessions = opts.sessions or size.sessions
        opts.log(f"bench preamble: {system_tokens} system tokens, {sessions} sessions per arm "
                 "(stable / header / stripped)")
        preamble = run_preamble(PreambleOptions(model=MODEL_ID, system_tokens=system_tokens, sessions=sessions,
                                                server_args=server_args, startup_timeout=opts.startup_timeout))
        seconds["preamble"] = round(time.monotonic() - t1, 1)
        written = _write(opts, preamble, "bench-preamble")

        t2 = time.monotonic()
        hist_sessions = opts.history_sessions or size.history_sessions
        turn_tokens = opts.turn_tokens or size.turn_tokens
        opts.log(f"bench history: {hist_system} system tokens, {turn_tokens} turn tokens, {hist_sessions} sessions "
                 "per arm (kept / rewritten)")
        history = run_history(HistoryOptions(model=MODEL_ID, sessions=hist_sessions, system_tokens=hist_system,
                                             turn_tokens=turn_tokens, server_args=server_args,
                                             startup_timeout=opts.startup_timeout))
        seconds["history"] = round(time.monotonic() - t2, 1)
        written += _write(opts, history, "bench-history")
    finally:
        shutil.rmtree(work, ignore_errors=True)  # the model too, unless it lives in model_dir
    seconds["total"] = round(time.monotonic() - t0, 1)
    summary = build_summary(preamble, history, manifest=manifest, size=opts.size, device=device,
                            started_at=started, seconds=seconds, files=[p.name for p in written],
                            model_dir=str(model_dir) if opts.model_dir else None)
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    (out / "summary.md").write_text(format_summary(summary), encoding="utf-8")
    return summary


def _write(opts: HeadlineOptions, doc: dict[str, Any], stem: str) -> list[Path]:
    written = common.write_outputs(doc, Path(opts.out), stem)
    if opts.caption is not None:
        opts.caption(doc, [p for p in written if p.suffix == ".png"], stem)
    for bench in doc["benchmarks"]:
        opts.log(common.format_table(bench))
    for path in written:
        opts.log(f"wrote {path}")
    return written


def build_summary(preamble: dict[str, Any], history: dict[str, Any], *, manifest: dict[str, Any], size: str,
                  device: str, started_at: str, seconds: dict[str, float], files: list[str],
                  model_dir: str | None = None) -> dict[str, Any]:
    """What the two results documents say, in one small object: ratios with intervals beside the
    article's, arms, timing, GPU, model, versions, date."""
    benches = {"preamble": preamble["benchmarks"][0], "history": history["benchmarks"][0]}
    engine = (preamble["run"].get("server") or {}).get("engine_settings") or {}
    timings = sorted({b.get("timing", "unknown") for b in benches.values()})
    ratios = []
    for name, where in RATIOS:
        found = next((r for r in benches[where].get("ratios", []) if r["name"] == name), None) or {}
        num, den = name.split("/")
        ratios.append({"name": name, "value": found.get("value"), "ci95": found.get("ci95"),
                       "article": round(ARTICLE_MS[num] / ARTICLE_MS[den], 3),
                       "article_ms": [ARTICLE_MS[num], ARTICLE_MS[den]]})
    arms = {where: [{k: a.get(k) for k in ("name", "median", "p90", "ci95")} | {"n": len(a.get("samples", []))}
                    for a in b["arms"]] for where, b in benches.items()}
    return {
        "title": "The first article's headline numbers on real compute (bench headline)",
        "date": started_at,
        "timing": timings[0] if len(timings) == 1 else "mixed: " + ", ".join(timings),
        "size": size,
        "device": engine.get("device", device),
        "gpu": engine.get("gpu"),
        "gpu_memory_gib": engine.get("gpu_memory_gib"),
        "model": {"made_by": manifest.get("created_by"), "architecture": manifest.get("architecture"),
                  "params": manifest.get("params"), "shape": manifest.get("shape"), "dtype": engine.get("dtype"),
                  "weights": "random (not trained); scripted mode: every forward pass is real, the tokens emitted "
                             "are the scenario's", "path": model_dir},
        "engine": {k: engine.get(k) for k in ("engine", "mode", "attn", "prefill_chunk", "block_size",
                                              "cache_capacity_blocks", "cache_block_bytes", "torch",
                                              "transformers", "cuda")},
        "ratios": ratios,
        "arms": arms,
        "settings": {"preamble": _pick(benches["preamble"]["settings"], ("system_tokens", "sessions", "warmup_rounds",
                                                                          "max_tokens", "usage_first_sample")),
                     "history": _pick(benches["history"]["settings"], ("system_tokens", "turn_tokens", "sessions",
                                                                        "warmup_rounds", "usage_first_sample"))},
        "seconds": seconds,
        "files": files,
    }


def _pick(d: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {k: d[k] for k in keys if k in d}


def _num(x: Any, fmt: str = ".3f") -> str:
    return "-" if x is None else format(x, fmt)


def format_summary(s: dict[str, Any]) -> str:
    """summary.md: a few lines a person reads first."""
    m, e, shape = s["model"], s["engine"], s["model"].get("shape") or {}
    gpu = f"{s['gpu']} ({s['gpu_memory_gib']} GiB)" if s.get("gpu") else "none (CPU run)"
    params = f"{m['params']:,}" if isinstance(m.get("params"), int) else "?"
    lines = [
        f"# {s['title']}",
        "",
        f"timing: {s['timing']}",
        f"gpu: {gpu}",
        f"device: {s['device']}, dtype {m.get('dtype')}",
        f"model: {m.get('architecture')}, random weights, {shape.get('layers')} layers, hidden {shape.get('hidden')}, "
        f"{shape.get('heads')} heads / {shape.get('kv_heads')} KV heads, MLP {shape.get('intermediate')}, "
        f"{params} parameters",
        f"engine: transformers {e.get('transformers')}, torch {e.get('torch')}"
        + (f", CUDA {e['cuda']}" if e.get("cuda") else "")
        + f", attention {e.get('attn')}, prefill chunk {e.get('prefill_chunk')}, KV blocks of {e.get('block_size')} "
        f"tokens on the model's device ({e.get('cache_capacity_blocks')} at most)",
        f"date: {s['date']} (size {s['size']}; {s['seconds'].get('total')} s)",
        "",
        "| ratio | measured (median / median) | 95% CI | article (B200) |",
        "| --- | ---: | --- | ---: |",
    ]
    for r in s["ratios"]:
        ci = r.get("ci95")
        cis = f"[{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "-"
        a_num, a_den = r["article_ms"]
        lines.append(f"| {r['name']} | {_num(r['value'])} | {cis} | {r['article']:.3f} ({a_num:g} / {a_den:g} ms) |")
    lines += ["", "| benchmark | arm | n | median TTFT (ms) | 95% CI (ms) | article (ms) |",
              "| --- | --- | ---: | ---: | --- | ---: |"]
    for where, arms in s["arms"].items():
        tokens = s["settings"][where].get("system_tokens")
        for a in arms:
            ci = a.get("ci95")
            cis = f"[{ci[0]:.1f}, {ci[1]:.1f}]" if ci else "-"
            lines.append(f"| {where} ({tokens} system tokens) | {a['name']} | {a['n']} | {_num(a['median'], '.1f')} | "
                         f"{cis} | {ARTICLE_MS.get(a['name'], '-')} |")
    lines += ["", "Files: " + ", ".join(s["files"] + ["summary.json", "summary.md"]), ""]
    return "\n".join(lines)
