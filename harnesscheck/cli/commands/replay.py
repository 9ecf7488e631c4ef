"""`harnesscheck replay`: play a trace against an endpoint and time every turn."""

from __future__ import annotations

import argparse

NAME = "replay"
ORDER = 41
HELP = "replay a trace (sessions concurrently, turns in order) and time each turn: TTFT, ITL, tool-ready"
DESCRIPTION = """\
Replay TRACE (a file from `harnesscheck trace ...` or `capture`, or builtin:agent-coding) against
--endpoint. Sessions run concurrently (at most --concurrency), turns in order, with the recorded
think and tool times (times --time-scale; 0 = no waiting).

Modes: fixed (default): the recorded answers are the history, so prompts are identical run to
run; live: the endpoint's own answers become the history (tool results from the trace).

Per turn: status, time to headers, TTFT, inter-token times, tool-ready times, end; written to
--out as results.json (turns + summary percentiles) and turns.csv (one row per turn).
The client is the kit's own HTTP/1.1 client (replay.http1) on uvloop, the benchmark clock.

--ray [ADDRESS] --workers N (after TRACE; pip install 'harnesscheck[ray]'): the sessions are dealt to
N Ray actors (one CPU each, spread over the cluster's machines), --concurrency split among them, each
timing its own requests; the percentiles are those of all workers' samples merged, and each worker's
offered concurrency and requests in flight (peak, mean) are printed. See docs/scale-out.md.

Example:
  harnesscheck replay builtin:agent-coding --endpoint http://localhost:8000 --mode live --out runs/r1
  harnesscheck replay builtin:agent-coding --endpoint http://10.0.0.5:8000 --concurrency 64 \
      --ray auto --workers 8

The endpoint is checked first, as `check` does (conformance/preflight.py; each probe waits up to
--timeout, at most 60 s): an unusable one is one line and exit 2 before any session starts.

Byte bounds on each answer: a gzip/deflate/zstd body decodes to at most 64 MiB and an SSE event is at
most 8 MiB (replay.http1, replay.codings); past either, that turn fails with the reason (a truncated
coded body too).

Stopped by Ctrl-C or SIGTERM, the turns finished so far are written (results.json's summary says
"interrupted": true) and the exit status is 130.

Exit status: 0 every turn replayed; 1 a turn failed; 2 usage error, bad trace or unusable endpoint;
130 interrupted.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("trace", help="trace file, or builtin:agent-coding")
    parser.add_argument("--endpoint", required=True, metavar="URL",
                        help="base URL of the endpoint to replay on")
    parser.add_argument("--model", help="model id for every request (default: the trace's; if empty, the "
                                        "endpoint's first listed model)")
    parser.add_argument("--mode", choices=["fixed", "live"], default="fixed",
                        help="fixed: recorded answers are the history (default); live: the endpoint's own")
    parser.add_argument("--concurrency", type=int, default=16, help="sessions in flight at once (default 16)")
    parser.add_argument("--time-scale", type=float, default=1.0, help="factor on think/tool/schedule times")
    parser.add_argument("--out", metavar="DIR", help="write results.json and turns.csv here")
    parser.add_argument("--api-key", metavar="KEY", help="sent as x-api-key (anthropic) or Authorization: Bearer (others); "
                                          "never written to the results")
    parser.add_argument("--header", action="append", default=[], metavar="NAME:VALUE", help="extra header")
    parser.add_argument("--timeout", type=float, default=600.0, help="per-request total timeout, seconds")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument("--ray", nargs="?", const="", default=None, metavar="ADDRESS",
                        help="replay from Ray actors (ADDRESS; omitted: RAY_ADDRESS or a local instance)")
    parser.add_argument("--workers", type=int, help="with --ray: actors to shard the sessions over "
                                                    "(default: one per CPU of the cluster)")


def run(args: argparse.Namespace) -> int:
    import math
    import os

    from harnesscheck.errors import Interrupted, UsageError
    from harnesscheck.replay.replayer import ReplayOptions, first_model, replay
    from harnesscheck.replay.trace import TraceError, load

    if not (math.isfinite(args.time_scale) and args.time_scale >= 0):  # a wait nobody can sleep (NaN, inf)
        raise UsageError(f"--time-scale must be a finite number >= 0, got {args.time_scale}")
    if args.ray is None and args.workers is not None:
        raise UsageError("--workers needs --ray")
    if args.workers is not None and args.workers < 1:
        raise UsageError("--workers must be at least 1")
    if args.ray is not None:
        from harnesscheck.replay.cluster import RayUnavailable, import_ray

        try:
            import_ray()
        except RayUnavailable as exc:
            raise UsageError(str(exc)) from exc
    api_key = args.api_key or os.environ.get("HARNESSCHECK_API_KEY")
    try:
        if args.trace.startswith("builtin:"):
            from harnesscheck.replay.workloads import build

            trace = build(args.trace.split(":", 1)[1])
        else:
            trace = load(args.trace)
    except (OSError, TraceError, KeyError) as exc:  # one line on stderr, exit 2 (main)
        from harnesscheck.cli.failures import error_line

        raise UsageError(error_line(exc) if isinstance(exc, OSError) else f"{args.trace}: {exc}") from None
    # The endpoint first, as `check` does: a closed port, a server that is no LLM API, a key refused or
    # missing, a --model not served: each said as such, one line, exit 2, before any session starts.
    from harnesscheck.conformance.preflight import probe_timeout, require_usable, say

    checked = require_usable(args.endpoint, api_key=api_key, model=args.model or None,
                             apis=sorted({t.api for t in trace.turns}) or ["chat"],
                             timeout=probe_timeout(args.timeout), progress=say)
    model = args.model
    if not model and any(not (t.request or {}).get("model", "x") for t in trace.turns):
        model = checked.models[0] if checked.models else first_model(args.endpoint, api_key)
        if not model:
            raise UsageError("the trace has no model id and the endpoint lists none; pass --model")
    headers = {}
    for h in args.header:
        name, _, value = h.partition(":")
        headers[name.strip()] = value.strip()
    opts = ReplayOptions(endpoint=args.endpoint, model=model, mode=args.mode, concurrency=args.concurrency,
                         time_scale=args.time_scale, api_key=api_key, headers=headers, timeout=args.timeout,
                         progress=not args.no_progress)
    try:
        result = replay(trace, opts) if args.ray is None else _replay_on_ray(args, trace, opts)
    except Interrupted as stop:  # the finished turns, marked interrupted, written before the exit 130
        if stop.measured is not None:
            _report(args, stop.measured)
        raise
    return _report(args, result)


def _report(args: argparse.Namespace, result) -> int:
    """Write and print a replay's result; its exit status."""
    import json

    if args.out:
        paths = result.write(args.out)
        print(f"results: {paths['json']}  {paths['csv']}")
    s = result.summary
    if s.get("interrupted"):
        print(f"interrupted: the results hold the {s['turns']} turn(s) finished before the stop")
    if args.json:
        print(json.dumps(s, indent=1))
    else:
        def fmt(stats: dict) -> str:
            return "-" if not stats.get("n") else f"p50 {stats['p50']:.1f}  p90 {stats['p90']:.1f}  p99 {stats['p99']:.1f}"

        print(f"{s['turns_ok']}/{s['turns']} turns ok in {s['wall_s']:.1f} s ({s['sessions']} sessions, "
              f"max in flight {s['max_in_flight']}, mode {s['mode']}, {s['client']})")
        print(f"  TTFT ms         {fmt(s['ttft_ms'])}")
        print(f"  ITL ms          {fmt(s['itl_ms'])}")
        print(f"  tool ready ms   {fmt(s['first_tool_ready_ms'])}")
        print(f"  end ms          {fmt(s['end_ms'])}")
        for w in s.get("workers", ()):
            print(f"  worker {w['worker']} ({w['host']}): {w['sessions']} sessions, offered concurrency "
                  f"{w['offered_concurrency']}, in flight max {w['max_in_flight']} "
                  f"mean {w['mean_in_flight']:.1f}")
        if "workers" in s:
            print(f"  all workers: offered concurrency {s['offered_concurrency']}, in flight max <= "
                  f"{s['max_in_flight']} (sum of peaks) mean {s['mean_in_flight']:.1f}")
        for r in result.records:
            if not r.get("ok"):
                print(f"  FAILED {r['session']} turn {r['turn']}: {r.get('error_kind')}: {(r.get('error') or '')[:200]}")
                break
    return 0 if s["turns_failed"] == 0 else 1


def _replay_on_ray(args: argparse.Namespace, trace, opts):
    """The replay from Ray actors (``harnesscheck.replay.distributed``)."""
    from contextlib import ExitStack

    from harnesscheck.errors import UsageError
    from harnesscheck.replay.distributed import replay_on_ray
    from harnesscheck.replay.cluster import ray_session

    with ExitStack() as stack:
        try:
            stack.enter_context(ray_session(args.ray or None))
        except (ConnectionError, RuntimeError, ValueError) as exc:  # no cluster at that address
            where = args.ray or "the default address"
            raise UsageError(f"could not connect to Ray at {where}: {exc}") from exc
        return replay_on_ray(trace, opts, workers=args.workers)
