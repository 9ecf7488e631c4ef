"""`harnesscheck bench`: the articles' headline measurements (docs/benchmarks.md).

Why one module (647 lines): it is one subcommand's argument parser and its dispatch: every `bench`
kind (the headline measurements, `load`, the live and request-log options) shares the common options
(`_common`, `_timing`) and the one report step, and the measuring itself lives in replay/benchmarks/.
The rest is the printing of each kind's figures, which belongs to the command that prints them.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from harnesscheck.protocol import apis as _apis

NAME = "bench"
ORDER = 50
HELP = ("benchmarks: preamble (billing-header TTFT), dispatch (tool-ready latency), history (rewritten history TTFT), "
        "overlap (streaming tool execution), fidelity (client clock), server (server CPU per token), "
        "mixed (stream gaps while large prompts are tokenized), "
        "load (concurrency and request-rate sweeps), headline (preamble + history on real compute)")
DESCRIPTION = """\
Benchmarks against --endpoint, or with none against embedded reference servers started with a
non-zero timing model (figures then say timing "scripted-model"). Each prints a table (median, p90,
bootstrap 95% CI per arm, ratios with intervals) and writes OUT/bench-NAME.json (a results
document, docs/results-schema.md) and a PNG plot.

  preamble  TTFT of K new sessions sharing one long system prompt: stable / fresh billing header /
            header stripped (article 1: 168 / 912 / 169 ms)
  dispatch  time to each tool call complete, to its tool_call_dispatch frame (Chat) and to the end
            of stream, for the buffered, inline and dispatch server modes
  history   next-turn TTFT with the history kept vs the past reasoning rewritten (167 vs 322 ms)
  overlap   turn latency with tools run after the stream vs while it streams (replay.executor),
            next to the article's model (sum vs max(remaining generation, tool time))
  fidelity  the kit's TTFT / inter-token error against a ground-truth server that logs its own
            times, at concurrency 1, 16, 64, 256; http1+uvloop (the kit's client) vs plain httpx
  server    the reference server's own CPU per streamed token at concurrency 1, 8, 32, engine
            delays zero (vs Dynamo's ~20 µs per SSE frame)
  mixed     the worst inter-frame gap of concurrent streams with a 2 MB count_tokens request in
            flight, beside the same figure with none (windows alternated in one run)
  load      concurrency and request-rate (Poisson) sweeps: throughput, goodput under --slo, TTFT /
            TPOT / ITL / E2EL percentiles, printed as `vllm bench serve` prints them, a plot per sweep
  headline  preamble and history on real compute: a random model of realistic shape made offline,
            served by the transformers engine (GPU: --size full; CPU: --size small), with the
            ratios beside the article's in OUT/summary.md (scripts/gpu_headline.sh wraps it)

While a benchmark runs, a live line on stderr shows what it is doing and the time elapsed (not when
stdout is not a terminal, nor with --no-progress).

Timing of the embedded servers: `serve` models 10 ms before the first token, 40 µs per uncached
prompt token and 2 ms per output token; a benchmark sets what it measures instead (each flag's help
gives its default): preamble, dispatch, history and overlap cost 100 µs per prompt token, so that a
prefix the cache reuses (or loses) shows in TTFT; preamble decodes at 1 ms and history at 0.2 ms a
token, as only their first token is timed, dispatch and overlap at 5 ms, so a tool call's
arguments take time to stream; load costs nothing per prompt token and 5 ms per output
token, so a level's figures follow its concurrency whatever the workload's prompts (give
--prefill-us-per-token for a random:ISL,OSL workload whose input length should count).

An --endpoint is checked first (reachable, an LLM API, key accepted, model served).
Exit status: 0 measured, 1 bench load: fewer than --min-success (default 0.9) of a level's requests
succeeded (the results are written all the same), 2 usage error, the endpoint unusable or refusing a
request, 130 interrupted (Ctrl-C, SIGTERM).
"""
# The API each benchmark talks; load takes --api, the others --apis.
_BENCH_APIS = {"preamble": ["anthropic"], "history": ["chat"]}
_NO_PROGRESS_HELP = "no live progress line (it is off anyway when stdout is not a terminal)"


def _sessions(text: str) -> int:
    """--sessions as an int; warns on stderr below the regression gate's minimum samples per side."""
    from harnesscheck.reports.gate import MIN_SAMPLES

    n = int(text)
    if n < MIN_SAMPLES:
        print(f"warning: --sessions {n} is below {MIN_SAMPLES}: the regression gate will not judge these arms "
              "(docs/gate.md)", file=sys.stderr)
    return n


def _common(p: argparse.ArgumentParser, *, sessions: int) -> None:
    p.add_argument("--endpoint", default=None, metavar="URL", help="server to measure (default: embedded)")
    p.add_argument("--model", default=None, help="model id (default: the first of /v1/models)")
    p.add_argument("--api-key", default=None, metavar="KEY", help="API key (default: $HARNESSCHECK_API_KEY)")
    p.add_argument("--sessions", type=_sessions, default=sessions,
                   help=f"measured samples per arm (default: {sessions}; the gate needs a minimum, docs/gate.md)")
    p.add_argument("--warmup", type=int, default=1, help="warm-up rounds discarded (default: 1)")
    p.add_argument("--out", default="harnesscheck-results", metavar="DIR", help="output folder")
    _timing(p, prefill=100.0)
    p.add_argument("--server-arg", action="append", default=[], metavar="ARG",
                   help="extra argument for the embedded servers, repeatable (e.g. --server-arg=--block-size=32)")


def _timing(p: argparse.ArgumentParser, *, prefill: float | None) -> None:
    """The embedded servers' timing model: --ttft-base-ms, and --prefill-us-per-token unless None."""
    p.add_argument("--ttft-base-ms", type=float, default=10.0,
                   help="embedded timing: fixed cost before token 1 (default: 10 ms, as `serve`'s)")
    if prefill is not None:
        p.add_argument("--prefill-us-per-token", type=float, default=prefill,
                       help=f"embedded timing: cost per uncached prompt token (default: {prefill:g} µs; `serve`'s: "
                            "40, why they differ: `harnesscheck bench --help`)")


def _decode_ms(p: argparse.ArgumentParser, default: float) -> None:
    p.add_argument("--decode-ms", type=float, default=default,
                   help=f"embedded timing: interval between output tokens (default: {default:g} ms; `serve`'s: 2, "
                        "why they differ: `harnesscheck bench --help`)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="bench", metavar="BENCH")
    sub.required = True
    p = sub.add_parser("preamble", help="TTFT: stable prefix vs per-session billing header vs stripped")
    _common(p, sessions=16)  # 8 let one load burst on a 2-core machine move a median
    p.add_argument("--system-tokens", type=int, default=8000,
                   help="length of the shared system prompt in tokens (default: 8000; the article's GPU run: 52K)")
    _decode_ms(p, 1.0)
    p = sub.add_parser("dispatch", help="tool-ready latency: buffered vs inline vs dispatch")
    _common(p, sessions=5)
    _decode_ms(p, 5.0)
    p.add_argument("--apis", default=",".join(_apis.names()), help="comma-separated APIs (default: all three)")
    p.add_argument("--scenarios", default="parallel_tools,interleaved", help="comma-separated scenario ids")
    p = sub.add_parser("history", help="next-turn TTFT: history kept vs past reasoning rewritten")
    _common(p, sessions=8)
    _decode_ms(p, 0.2)
    p.add_argument("--system-tokens", type=int, default=2000, help="shared system prompt tokens (default: 2000)")
    p.add_argument("--turn-tokens", type=int, default=1500,
                   help="tokens of the previous assistant turn after its reasoning (default: 1500)")
    p = sub.add_parser("overlap", help="turn latency: tools after the stream vs while streaming")
    _common(p, sessions=6)
    _decode_ms(p, 5.0)
    p.add_argument("--apis", default=",".join(_apis.names()), help="comma-separated APIs (default: all three)")
    p.add_argument("--scenarios", default="parallel_tools,interleaved", help="comma-separated scenario ids")
    p.add_argument("--tool-ms", default="300,300", metavar="MS,MS",
                   help="fake tool durations per call index, the last repeated (default: 300,300)")
    p.add_argument("--concurrency-safe", action="store_true",
                   help="the fake tools are concurrency-safe (run in parallel); default: one at a time")
    p = sub.add_parser("fidelity", help="the client clock vs a ground-truth server, at concurrency 1..256, "
                                        "beside peers (AIPerf, vllm bench) on the same ground truth")
    p.add_argument("--concurrency", default="1,16,64,256", metavar="LIST",
                   help="comma-separated levels (default: 1,16,64,256)")
    p.add_argument("--requests", type=int, default=None, metavar="N",
                   help="requests measured per level (default: max(500, 4c) at c >= 16, 200 below, so p99 is a "
                        "percentile; fewer only for quick looks)")
    p.add_argument("--pattern", default="all-at-once", choices=["all-at-once", "staggered"],
                   help="all-at-once (default): every worker starts together and every request counts, as a "
                        "user's load does; staggered spreads the starts and drops each worker's first request, "
                        "which hides connection set-up and the initial burst")
    p.add_argument("--processes", type=int, default=None, metavar="N",
                   help="processes the kit's client is sharded over (default: one per core)")
    p.add_argument("--transports", default="http1+uvloop", metavar="LIST",
                   help="comma-separated: http1+uvloop (the kit's StreamClient), httpx (a plain httpx baseline, "
                        "limits sized to the concurrency)")
    p.add_argument("--peer", action="append", default=[], choices=["aiperf", "vllm-bench"],
                   help="also measure the same ground truth with this peer in the same run (repeatable); "
                        "a peer that is not installed is skipped with the reason")
    p.add_argument("--peer-python", action="append", default=[], metavar="[PEER=]PYTHON",
                   help="the Python of a peer's own environment (e.g. aiperf=/opt/aiperf/bin/python), repeatable")
    p.add_argument("--tokenizer", default=None, metavar="DIR",
                   help="tokenizer folder for the peers' synthetic prompts (default: the reference server's)")
    p.add_argument("--first-ms", type=float, default=50.0, help="ground truth: time to the first chunk")
    p.add_argument("--chunks", type=int, default=64, help="ground truth: chunks per response")
    p.add_argument("--gap-ms", type=float, default=5.0, help="ground truth: gap between chunks")
    p.add_argument("--out", default="harnesscheck-results", metavar="DIR", help="output folder")
    p = sub.add_parser("server", help="tokens per CPU-second of the reference server (and Dynamo's frontend), "
                                      "measured the same way in sustained windows")
    p.add_argument("--concurrency", default="1,8,32", metavar="LIST", help="comma-separated levels (default: 1,8,32)")
    p.add_argument("--windows", type=int, default=3, metavar="N", help="measurement windows per side and level "
                                                                      "(default: 3)")
    p.add_argument("--window-s", type=float, default=15.0, metavar="SECONDS",
                   help="length of each sustained window (default: 15)")
    p.add_argument("--warmup-s", type=float, default=3.0, metavar="SECONDS",
                   help="load before each level's first window, not measured (default: 3)")
    p.add_argument("--apis", default="chat,anthropic", metavar="LIST",
                   help="comma-separated APIs, rotated (default: chat,anthropic; Dynamo 1.6.1's Responses streams "
                        "carry no reasoning text)")
    p.add_argument("--scenarios", default="long_reasoning,long_agent_turn", metavar="LIST",
                   help="comma-separated scenario ids")
    p.add_argument("--server-arg", action="append", default=[], metavar="ARG", help="extra server argument")
    p.add_argument("--profile", action="store_true",
                   help="run the server under cProfile and report its top functions (slower)")
    p.add_argument("--dynamo", default=os.environ.get("HARNESSCHECK_DYNAMO_PYTHON"), metavar="PYTHON",
                   help="also measure Dynamo's frontend + mocker started from this Python's environment "
                        "(default: $HARNESSCHECK_DYNAMO_PYTHON)")
    p.add_argument("--dynamo-model-dir", default=None, metavar="DIR",
                   help="with --dynamo: a Hugging Face folder with tokenizer, chat template and config (no weights; "
                        "default: one the kit writes, the reference tokenizer with Qwen3's template, no torch)")
    p.add_argument("--peer", choices=["dynamo"], default=None,
                   help="measure this peer beside the reference server in the same run, same load and windows: "
                        "dynamo (Dynamo 1.6.1's frontend + mocker from --dynamo PYTHON or $HARNESSCHECK_DYNAMO_PYTHON)")
    p.add_argument("--endpoint", default=None, metavar="URL",
                   help="measure this server instead of an embedded one (needs --pid)")
    p.add_argument("--pid", type=int, default=None, help="with --endpoint: the server's process id on this machine")
    p.add_argument("--model", default=None, metavar="ID", help="with --endpoint: model id (default: the first of "
                                                              "/v1/models)")
    p.add_argument("--api-key", default=None, metavar="KEY",
                   help="with --endpoint: API key (default: $HARNESSCHECK_API_KEY)")
    p.add_argument("--out", default="harnesscheck-results", metavar="DIR", help="output folder")
    p = sub.add_parser("mixed", help="worst stream inter-frame gap with vs without a large prompt being tokenized")
    p.add_argument("--endpoint", default=None, metavar="URL", help="server to measure (default: embedded)")
    p.add_argument("--model", default=None, help="model id (default: the first of /v1/models)")
    p.add_argument("--api-key", default=None, metavar="KEY", help="API key (default: $HARNESSCHECK_API_KEY)")
    p.add_argument("--concurrency", type=int, default=16, help="concurrent streams (default: 16)")
    p.add_argument("--windows", type=int, default=4, help="measurement windows per arm, alternated (default: 4)")
    p.add_argument("--window-s", type=float, default=4.0, help="seconds each window starts streams (default: 4)")
    p.add_argument("--stream-tokens", type=int, default=200, help="output tokens per stream (default: 200)")
    p.add_argument("--large-bytes", type=int, default=2 * 1024 * 1024,
                   help="prompt text of the large request, bytes (default: 2 MiB)")
    p.add_argument("--large-route", default="count_tokens", choices=["count_tokens", "tokenize"],
                   help="where the large prompt goes: /v1/messages/count_tokens or /tokenize (default: count_tokens)")
    p.add_argument("--apis", default=",".join(_apis.names()), help="comma-separated stream APIs, rotated")
    p.add_argument("--scenario", default="long_reasoning", help="the streams' scenario (default: long_reasoning)")
    _timing(p, prefill=None)
    p.add_argument("--decode-ms", type=float, default=5.0,
                   help="embedded timing: interval between output tokens, the undisturbed gap (default: 5)")
    p.add_argument("--server-arg", action="append", default=[], metavar="ARG", help="extra server argument")
    p.add_argument("--out", default="harnesscheck-results", metavar="DIR", help="output folder")
    _load_arguments(sub)
    _headline_arguments(sub)
    p = sub.add_parser("suite", help="the conformance suite's wall time at --concurrency 1, 4, 16 beside its longest "
                                     "case, against a reference server whose turns take about a second")
    p.add_argument("--levels", default="1,4,16", metavar="LIST", help="comma-separated concurrency levels "
                                                                       "(default: 1,4,16)")
    p.add_argument("--turn-s", type=float, default=1.0, metavar="SECONDS",
                   help="the embedded server's time per turn (default: 1)")
    p.add_argument("--apis", default=",".join(_apis.names()), metavar="LIST",
                   help="comma-separated APIs to check (default: all three)")
    p.add_argument("--out", default="harnesscheck-results", metavar="DIR",
                   help="output folder (each level's suite results in DIR/suite-runs/n<N>/)")
    for sp in sub.choices.values():
        sp.add_argument("--no-progress", action="store_true", help=_NO_PROGRESS_HELP)


def _load_arguments(sub: argparse._SubParsersAction) -> None:
    from harnesscheck.replay.benchmarks.load import LABELS_EXPLAINED, RANDOM_PROMPTS

    explained = "\n".join(f"  {line}" for line in LABELS_EXPLAINED)
    p = sub.add_parser("load",
                       help="concurrency and request-rate sweeps: throughput, goodput, latency percentiles",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="Concurrency and request-rate (Poisson) sweeps, each level printed as `vllm bench "
                                   "serve` prints its result.\n\nWhat the figures that read alike mean:\n"
                                   f"{explained}")
    p.add_argument("--endpoint", default=None, metavar="URL", help="server to measure (default: embedded)")
    p.add_argument("--model", default=None, help="model id (default: the first of /v1/models)")
    p.add_argument("--api-key", default=None, metavar="KEY", help="API key (default: $HARNESSCHECK_API_KEY)")
    p.add_argument("--workload", default="scenario:long_reasoning", metavar="SPEC",
                   help="a trace file (each turn an independent request, cycled), builtin:agent-coding, "
                        "scenario:NAME (one scenario request, repeated; default: scenario:long_reasoning), or "
                        f"random:ISL,OSL ({RANDOM_PROMPTS} distinct prompts of about ISL input tokens of the kit's "
                        "own prose, counted with the reference tokenizer, each asking for OSL output tokens; "
                        "vllm bench's random dataset)")
    p.add_argument("--random-range-ratio", type=float, default=None, metavar="RATIO",
                   help="random: workloads: input and output lengths drawn uniformly within +-RATIO of ISL and "
                        "OSL (vllm bench's name; same as random:ISL,OSL,RATIO; default: 0, every prompt alike)")
    p.add_argument("--apis", default="chat", metavar="LIST",
                   help="comma-separated APIs of builtin: and scenario: workloads, their requests alternated "
                        "(default: chat)")
    p.add_argument("--max-tokens", type=int, default=64,
                   help="scenario: output tokens per request (default: 64)")
    p.add_argument("--concurrency", default=None, metavar="LIST",
                   help="concurrency sweep, comma-separated levels (default 1,4,16 when no --request-rate)")
    p.add_argument("--request-rate", default=None, metavar="LIST",
                   help="request-rate sweep, comma-separated requests/s, Poisson arrivals (e.g. 2,8,32)")
    p.add_argument("--duration", type=float, default=10.0, metavar="S",
                   help="seconds each level sends requests (default: 10); then it waits for the answers")
    p.add_argument("--max-requests", type=int, default=None, metavar="N", help="at most N requests per level")
    p.add_argument("--seed", type=int, default=0, help="seed of the Poisson arrivals (level n uses seed + n)")
    p.add_argument("--slo", default="", metavar="NAME=MS,...",
                   help="goodput SLOs, e.g. ttft_ms=500,itl_ms=50,e2e_ms=4000 (itl_ms: per-request mean "
                        "inter-token time, vLLM's tpot; vLLM's names ttft, tpot, e2el also read)")
    p.add_argument("--warmup", type=int, default=1,
                   help="warm-up requests discarded before the sweeps (default: 1)")
    p.add_argument("--timeout", type=float, default=120.0, metavar="SECONDS",
                   help="each request's deadline; a stream that started and then sent nothing for half of it is "
                        "recorded as stalled (default: 120)")
    p.add_argument("--min-success", type=float, default=0.9, metavar="SHARE",
                   help="the share of each level's requests that must succeed (0 to 1); below it the results "
                        "are written and the command exits 1 with one line saying so (default: 0.9)")
    p.add_argument("--export-requests", default=None, metavar="FILE",
                   help="also write one JSON line per request as it ends: level, api, start, ok, status, error, "
                        "stalled, TTFT, TPOT, ITLs, E2EL (ms), input and output tokens")
    p.add_argument("--out", default="harnesscheck-results", metavar="DIR", help="output folder")
    _timing(p, prefill=0.0)
    _decode_ms(p, 5.0)
    p.add_argument("--server-arg", action="append", default=[], metavar="ARG",
                   help="extra argument for the embedded server, repeatable")


def _headline_arguments(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("headline", help="preamble + history TTFT on the transformers engine (real compute), "
                                        "a random model of realistic shape made offline; ratios vs the article")
    p.add_argument("--size", default="full", choices=["full", "small"],
                   help="full (default): a 1.4B Qwen3-shaped model in bfloat16 on a CUDA GPU, 52K-token prompts; "
                        "small: the tests' tiny model on a CPU, a few thousand tokens")
    p.add_argument("--device", default="auto", help="auto (CUDA where torch sees one), cuda, cuda:N, cpu")
    p.add_argument("--model-dir", default=None, metavar="DIR",
                   help="reuse the make-model model in DIR, or make it there and keep it (default: a temporary "
                        "folder, removed at the end)")
    p.add_argument("--model-preset", default=None, choices=["tiny", "small", "qwen3-1.7b"],
                   help="model shape (full: qwen3-1.7b; small: tiny)")
    for flag in ("layers", "hidden", "heads", "kv-heads", "intermediate"):
        p.add_argument(f"--{flag}", type=int, default=None, help=f"model {flag.replace('-', ' ')}, over the preset's")
    p.add_argument("--system-tokens", type=int, default=None, help="preamble's shared system prompt (full: 52000)")
    p.add_argument("--sessions", type=_sessions, default=None, help="preamble sessions per arm (full: 8)")
    p.add_argument("--history-sessions", type=_sessions, default=None, help="history sessions per arm (full: 5)")
    p.add_argument("--history-system-tokens", type=int, default=None, help="history's system prompt (full: 52000)")
    p.add_argument("--turn-tokens", type=int, default=None,
                   help="history: tokens of the previous turn after its reasoning (full: 500)")
    p.add_argument("--engine-option", action="append", default=[], metavar="KEY=VALUE",
                   help="transformers engine option for the servers, repeatable (docs/engines.md)")
    p.add_argument("--server-arg", action="append", default=[], metavar="ARG", help="extra server argument")
    p.add_argument("--startup-timeout", type=float, default=300.0, metavar="S",
                   help="seconds each server may take to load the model and answer (default: 300)")
    p.add_argument("--out", default="harnesscheck-results", metavar="DIR", help="output folder")


def _headline(args: argparse.Namespace) -> int:
    """`bench headline`: everything is written by the benchmark as it goes; the summary printed last."""
    from harnesscheck.replay.benchmarks.headline import HeadlineOptions, run_headline

    shape = {k: getattr(args, k) for k in ("layers", "hidden", "heads", "kv_heads", "intermediate")
             if getattr(args, k) is not None}
    out = Path(args.out)
    run_headline(HeadlineOptions(
        out=out, size=args.size, device=args.device, model_dir=args.model_dir, model_preset=args.model_preset,
        shape=shape,
        system_tokens=args.system_tokens, sessions=args.sessions, history_sessions=args.history_sessions,
        history_system_tokens=args.history_system_tokens, turn_tokens=args.turn_tokens,
        engine_options=args.engine_option, server_args=args.server_arg, startup_timeout=args.startup_timeout,
        log=lambda line: print(line, flush=True), caption=_caption_plots))
    print((out / "summary.md").read_text(encoding="utf-8"))
    print(f"wrote {out / 'summary.json'}\nwrote {out / 'summary.md'}")
    return 0


def run(args: argparse.Namespace) -> int:
    import httpx

    from harnesscheck.errors import Interrupted, UsageError

    if args.bench == "headline":
        try:
            return _headline(args)
        except httpx.HTTPError as error:
            raise UsageError(f"{type(error).__name__}: {error}") from None
        except (RuntimeError, ValueError, OSError) as error:  # no GPU, a server that did not start, a bad size
            raise UsageError(str(error)) from None
    api_key = getattr(args, "api_key", None) or os.environ.get("HARNESSCHECK_API_KEY")
    out = Path(args.out)
    if getattr(args, "endpoint", None):
        from harnesscheck.conformance.options import split_apis
        from harnesscheck.conformance.preflight import preflight

        apis = _BENCH_APIS.get(args.bench) or split_apis(args.apis)
        checked = preflight(args.endpoint, api_key=api_key, model=args.model, apis=apis, timeout=10.0)
        if not checked.ok:
            raise UsageError(checked.problem)
    try:
        with _live(args) as status:
            doc = _measure(args, api_key, status)
    except httpx.HTTPError as error:  # the endpoint failed a request
        raise UsageError(f"{type(error).__name__}: {error}") from None
    except (RuntimeError, ValueError, OSError) as error:  # a refused request, a bad setting, a missing trace
        from harnesscheck.cli.failures import error_line

        raise UsageError(error_line(error)) from None
    except Interrupted as stop:  # what finished before the stop (levels, samples), marked interrupted
        if isinstance(stop.measured, dict):
            _report(args, stop.measured, out)
            print("interrupted: the results hold what was measured before the stop")
        raise
    return _report(args, doc, out)


def _report(args: argparse.Namespace, doc: dict, out: Path) -> int:
    """Print a benchmark's results and write them (JSON, plots) under ``out``."""
    from harnesscheck.replay.benchmarks import common

    if args.bench == "load":
        _print_load(doc)
    else:
        for bench in doc["benchmarks"]:
            print(common.format_table(bench))
            for line in bench.get("settings", {}).get("summary", []):
                print("  " + line)
            print()
    written = common.write_outputs(doc, out, f"bench-{args.bench}")
    if args.bench == "load":
        written += _load_plots(doc, out)
    if args.bench in _CAPTIONED:
        _caption_plots(doc, [p for p in written if p.suffix == ".png"], f"bench-{args.bench}")
    for path in written:
        print(f"wrote {path}")
    if args.bench == "load":
        from harnesscheck.replay.benchmarks.load import success_problem

        problem = success_problem(_load_figures(doc), args.min_success)
        if problem:  # the figures of a failing endpoint are no benchmark: said, and no exit 0
            print(f"harnesscheck bench load: {problem}", file=sys.stderr)
            return 1
    return 0


@contextlib.contextmanager
def _live(args: argparse.Namespace) -> Iterator[Callable[[str], None]]:
    """A live line on stderr while the benchmark runs (spinner, what it does, time elapsed), as
    `replay` shows its bar; nothing when stdout is not a terminal or with --no-progress."""
    if args.no_progress or not sys.stdout.isatty():
        yield lambda text: None
        return
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    columns = (SpinnerColumn(), TextColumn(f"[bold]bench {args.bench}[/bold] {{task.description}}"),
               TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        where = getattr(args, "endpoint", None) or "embedded reference servers"
        task = bar.add_task(f"measuring against {where}")
        yield lambda text: bar.update(task, description=text)


def _measure(args: argparse.Namespace, api_key: str | None, status: Callable[[str], None]) -> dict:
    """Run the chosen benchmark; its results document. ``status`` shows what it is doing."""
    from harnesscheck.reference_server.faults import in_server_args, unknown_problem

    problem = unknown_problem(in_server_args(getattr(args, "server_arg", None) or []))
    if problem:  # a mistyped --server-arg=--fault=NAME, said before any server starts
        raise ValueError(problem)
    if args.bench == "load":
        from harnesscheck.replay.benchmarks.load import LoadOptions, parse_slo, run_load

        rates = [float(x) for x in (args.request_rate or "").split(",") if x.strip()]
        conc = [int(x) for x in (args.concurrency or "").split(",") if x.strip()]
        if not conc and not rates:
            conc = [1, 4, 16]
        with _request_log(args.export_requests) as record:
            return run_load(LoadOptions(
                endpoint=args.endpoint, model=args.model, api_key=api_key, workload=_workload(args),
                apis=[a.strip() for a in args.apis.split(",") if a.strip()],
                max_tokens=args.max_tokens, concurrency=conc, rates=rates, duration_s=args.duration,
                max_requests=args.max_requests, seed=args.seed, slo_ms=parse_slo(args.slo), warmup=args.warmup,
                ttft_base_ms=args.ttft_base_ms, prefill_us_per_token=args.prefill_us_per_token,
                decode_ms=args.decode_ms, server_args=args.server_arg, timeout_s=args.timeout, record=record,
                progress=lambda label, done, failed: status(f"{label}: {done} answered, {failed} failed")))
    if args.bench == "suite":
        from harnesscheck.conformance import concurrency_bench
        from harnesscheck.reports.schema import now_iso
        from harnesscheck.replay.benchmarks import common

        started = now_iso()
        levels = tuple(int(x) for x in args.levels.split(",") if x.strip())
        if not levels or min(levels) < 1:
            raise ValueError(f"--levels: give concurrency levels of 1 or more, got {args.levels!r}")
        measured = concurrency_bench.measure(levels, Path(args.out) / "suite-runs", turn_s=args.turn_s,
                                             apis=args.apis, progress=status)
        for level in measured:
            print(concurrency_bench.format_level(level))
        return common.results_document(
            benchmarks=[concurrency_bench.benchmark(measured, turn_s=args.turn_s)],
            endpoint="embedded reference server", model="", apis=[a.strip() for a in args.apis.split(",")],
            server={"kind": "embedded", "timing": "scripted-model"}, settings={"levels": list(levels),
                                                                                "turn_s": args.turn_s},
            started_at=started)
    if args.bench == "fidelity":
        from harnesscheck.replay.benchmarks.fidelity import FidelityOptions, run_fidelity

        peer_python = dict(x.split("=", 1) if "=" in x else ((args.peer or ["aiperf"])[0], x)
                           for x in args.peer_python)
        doc = run_fidelity(FidelityOptions(
            concurrency=[int(x) for x in args.concurrency.split(",") if x.strip()], requests=args.requests,
            pattern=args.pattern, processes=args.processes,
            transports=[t.strip() for t in args.transports.split(",") if t.strip()], peers=list(args.peer),
            peer_python=peer_python, tokenizer=args.tokenizer, first_ms=args.first_ms, chunks=args.chunks,
            gap_ms=args.gap_ms))
    elif args.bench == "server":
        from harnesscheck.replay.benchmarks.server_cost import ServerCostOptions, run_server_cost

        if args.peer == "dynamo" and not args.dynamo:
            from harnesscheck.errors import UsageError

            raise UsageError("bench server --peer dynamo needs Dynamo's Python: --dynamo PYTHON or "
                             "$HARNESSCHECK_DYNAMO_PYTHON (an environment with ai-dynamo 1.6.1; docs/peers/dynamo-1.6.1.md)")

        doc = run_server_cost(ServerCostOptions(
            concurrency=[int(x) for x in args.concurrency.split(",") if x.strip()], windows=args.windows,
            window_s=args.window_s, warmup_s=args.warmup_s,
            apis=[a.strip() for a in args.apis.split(",") if a.strip()],
            scenarios=[s.strip() for s in args.scenarios.split(",") if s.strip()], server_args=args.server_arg,
            profile=args.profile, dynamo_python=args.dynamo, dynamo_model_dir=args.dynamo_model_dir,
            endpoint=args.endpoint, pid=args.pid, model=args.model, api_key=api_key))
    elif args.bench == "preamble":
        from harnesscheck.replay.benchmarks.preamble import PreambleOptions, run_preamble

        doc = run_preamble(PreambleOptions(**_bench_options(args, api_key), system_tokens=args.system_tokens))
    elif args.bench == "dispatch":
        from harnesscheck.replay.benchmarks.dispatch import DispatchOptions, run_dispatch

        doc = run_dispatch(DispatchOptions(**_bench_options(args, api_key), apis=_split(args.apis),
                                           scenarios=_split(args.scenarios)))
    elif args.bench == "overlap":
        from harnesscheck.replay.benchmarks.overlap import OverlapOptions, run_overlap

        doc = run_overlap(OverlapOptions(
            **_bench_options(args, api_key), apis=_split(args.apis), scenarios=_split(args.scenarios),
            tool_ms=[float(x) for x in _split(args.tool_ms)], concurrency_safe=args.concurrency_safe))
    elif args.bench == "history":
        from harnesscheck.replay.benchmarks.history import HistoryOptions, run_history

        doc = run_history(HistoryOptions(**_bench_options(args, api_key), system_tokens=args.system_tokens,
                                         turn_tokens=args.turn_tokens))
    elif args.bench == "mixed":
        from harnesscheck.replay.benchmarks.mixed import MixedOptions, run_mixed

        doc = run_mixed(MixedOptions(
            **_bench_options(args, api_key), concurrency=args.concurrency, windows=args.windows,
            window_s=args.window_s, stream_tokens=args.stream_tokens, large_bytes=args.large_bytes,
            large_route=args.large_route, apis=_split(args.apis), scenario=args.scenario))
    return doc


def _workload(args: argparse.Namespace) -> str:
    """--workload, with --random-range-ratio folded into a random: spec (random:ISL,OSL,RATIO), and
    --timeout and --min-success checked (ValueError: exit 2, one line)."""
    import math

    if not (args.timeout > 0 and math.isfinite(args.timeout)):
        raise ValueError(f"--timeout must be a number of seconds above 0, got {args.timeout:g}")
    if not 0 <= args.min_success <= 1:
        raise ValueError(f"--min-success is a share from 0 to 1, got {args.min_success:g}")
    spec = args.workload
    if args.random_range_ratio is None:
        return spec
    if not spec.startswith("random:"):
        raise ValueError("--random-range-ratio is for random:ISL,OSL workloads")
    if spec.count(",") >= 2:
        raise ValueError(f"give the range ratio once: {spec} already has one, and --random-range-ratio too")
    return f"{spec},{args.random_range_ratio:g}"


@contextlib.contextmanager
def _request_log(path: str | None) -> Iterator[Callable[[str, object], None] | None]:
    """--export-requests FILE: each request of `bench load` as one JSON line, written as it ends (a
    run stopped part way keeps what ended); None without the flag."""
    if not path:
        yield None
        return
    import json

    counts: dict[str, int] = {}
    with open(path, "w", encoding="utf-8") as file:
        def record(level: str, sample: object) -> None:
            counts[level] = counts.get(level, 0) + 1
            file.write(json.dumps(sample.record(level, counts[level] - 1)) + "\n")  # type: ignore[attr-defined]

        yield record


# The flags behind replay.benchmarks.common.BenchOptions' fields (and --sessions / --warmup where a
# benchmark has them), as `_common` and the mixed parser define them.
_BENCH_FIELDS = ("endpoint", "model", "sessions", "warmup", "ttft_base_ms", "prefill_us_per_token", "decode_ms")


def _bench_options(args: argparse.Namespace, api_key: str | None) -> dict:
    """The fields a BenchOptions subclass shares, from the flags this benchmark's parser defines."""
    fields = {name: getattr(args, name) for name in _BENCH_FIELDS if hasattr(args, name)}
    return {**fields, "api_key": api_key, "server_args": args.server_arg}


def _split(text: str) -> list[str]:
    """A comma-separated flag's items, blanks left out."""
    return [x.strip() for x in text.split(",") if x.strip()]


def _load_figures(doc: dict) -> dict[str, list[dict]]:
    """Per sweep kind, its levels' figures (kept in the settings of its TTFT benchmark)."""
    return {b["settings"]["sweep"]: b["settings"]["figures"] for b in doc["benchmarks"]
            if b["name"].endswith("-ttft")}


def _print_load(doc: dict) -> None:
    """Each level as `vllm bench serve` prints it, then one summary row per level."""
    from harnesscheck.replay.benchmarks.load import format_level

    for kind, figures in _load_figures(doc).items():
        print(f"load sweep: {kind}")
        for f in figures:
            print(format_level(kind, f["level"], f))
        print(f"  {'level':<10} {'req/s':>7} {'goodput':>8} {'out tok/s':>10} {'TTFT p50/p99':>16} "
              f"{'ITL p50/p99':>14} {'E2EL p50/p99':>16}  (ms)")
        for f in figures:
            good = "-" if f["request_goodput"] is None else f"{f['request_goodput']:.2f}"
            print(f"  {f['label']:<10} {f['request_throughput']:>7.2f} {good:>8} {f['output_throughput']:>10.1f} "
                  f"{f['p50_ttft_ms']:>7.1f}/{f['p99_ttft_ms']:<8.1f} "
                  f"{f['p50_itl_ms']:>6.1f}/{f['p99_itl_ms']:<7.1f} "
                  f"{f['p50_e2el_ms']:>7.1f}/{f['p99_e2el_ms']:<8.1f}")
        print()


def _load_plots(doc: dict, out: Path) -> list[Path]:
    """OUT/bench-load-KIND-sweep.png per sweep (replay.benchmarks.load_plot)."""
    from harnesscheck.replay.benchmarks.load_plot import sweep_plot

    written = []
    run = doc["run"]
    for kind, figures in _load_figures(doc).items():
        path = out / f"bench-load-{kind}-sweep.png"
        title = f"bench load: {kind} sweep · endpoint {run.get('endpoint')} · model {run.get('model')}"
        sweep_plot(kind, figures, str(path), title=title)
        written.append(path)
    return written


_CAPTIONED = {"overlap", "fidelity", "server", "mixed", "load"}


def _caption_plots(doc: dict, pngs: list[Path], stem: str) -> None:
    """Add a caption under each plot: engine, timing (real compute / scripted model), machine and
    the main settings, so a plot read on its own still says what it measured."""
    from matplotlib.figure import Figure
    from matplotlib.image import imread

    run = doc["run"]
    server, m = run.get("server") or {}, run.get("machine") or {}
    by_png = {}
    for bench in doc["benchmarks"]:
        name = bench["name"].removeprefix(stem.removeprefix("bench-") + "-")
        by_png[f"{stem}.png" if len(doc["benchmarks"]) == 1 else f"{stem}-{name}.png"] = bench
    for png in pngs:
        bench = by_png.get(png.name)
        if bench is None:
            continue
        st = bench.get("settings") or {}
        keys = ("workload", "sweep", "duration_s", "scenario", "api", "sessions", "tool_ms", "concurrency", "first_chunk_ms", "chunks", "chunk_gap_ms",
                "windows", "window_s", "pattern", "processes")
        shown = ", ".join(f"{k}={st[k]}" for k in keys if k in st)
        tm = (run.get("settings") or {}).get("timing_model")
        es = server.get("engine_settings") or {}
        device = f" · device: {es['device']}" + (f" ({es['gpu']})" if es.get("gpu") else "") if es.get("device") else ""
        lines = [f"timing: {bench.get('timing', server.get('timing', 'unknown'))} · engine: {server.get('engine')} "
                 f"({server.get('kind')}){device} · endpoint: {run.get('endpoint')}",
                 f"machine: {m.get('hostname')}, {m.get('cpus')} CPUs, {m.get('platform')}, Python {m.get('python')}"
                 f" · {run.get('started_at')}",
                 shown + (f" · timing model {tm}" if tm else "")]
        import textwrap

        lines = [part for line in lines if line for part in textwrap.wrap(line, 100)]
        img = imread(str(png))
        h, w = img.shape[:2]
        dpi = 110
        extra = 16 * len(lines) + 12
        fig = Figure(figsize=(w / dpi, (h + extra) / dpi), dpi=dpi)
        ax = fig.add_axes((0, extra / (h + extra), 1, h / (h + extra)))
        ax.imshow(img)
        ax.axis("off")
        for i, line in enumerate(lines):
            fig.text(0.01, (extra - 14 - 16 * i) / (h + extra), line, fontsize=7.5,
                     color="#1f2937", va="bottom")
        fig.savefig(str(png), dpi=dpi, facecolor="white")
