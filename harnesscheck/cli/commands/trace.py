"""`harnesscheck trace`: make, convert and check trace files."""

from __future__ import annotations

import argparse

from harnesscheck.protocol import apis

NAME = "trace"
ORDER = 42
HELP = "make, convert and check traces (from a capture, AIPerf, Mooncake, built-in workloads)"
DESCRIPTION = """\
Trace files (docs/trace-format.md) are what `harnesscheck replay` plays.

  trace from-capture CAPTURE --out TRACE        a capture (harnesscheck capture) into a trace
  trace import FORMAT FILE --out TRACE [--apis chat] [--model ID] [--block-size 512]
  trace export FORMAT TRACE --out FILE [--block-size 512] [--mooncake-mode lengths|payload]
  trace workload agent-coding --out TRACE [--sessions 4] [--turns 5] [--prompt-tokens 8000] [--apis anthropic]
  trace check TRACE                             validate, print sessions and turns

FORMAT: aiperf (import: single_turn or multi_turn, told by the rows; export: multi_turn, or
single_turn for a trace imported from one), single_turn, multi_turn, mooncake (= mooncake_trace).
Input files may be gzip-compressed (.gz, or any name; at most 1 GiB once decompressed). An export
prints one warning on stderr per field the format cannot hold, with how many turns it touched,
e.g. "warning: AIPerf single_turn: history: sent without the conversation before it (...) (3
turns)" or "warning: Mooncake: prompt: text counted into input_length + hash_ids, not kept (...)";
AIPerf's output_length and extra are carried into Mooncake rows.

Exit status: 0 done, 2 a missing or invalid input file (one line saying what and where).
"""
_FORMATS = ["aiperf", "single_turn", "multi_turn", "mooncake", "mooncake_trace"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = sub.add_parser("from-capture", help="convert a capture file into a trace")
    p.add_argument("capture", help="capture file written by `harnesscheck capture`")
    p.add_argument("--out", required=True, metavar="FILE", help="trace file to write (.gz: compressed)")
    p = sub.add_parser("import", help="import an AIPerf single_turn / multi_turn or a Mooncake trace")
    p.add_argument("format", choices=_FORMATS, help="the input's format")
    p.add_argument("file", help="the input file (JSONL, gzip-compressed or not)")
    p.add_argument("--out", required=True, metavar="FILE", help="trace file to write (.gz: compressed)")
    p.add_argument("--apis", default="chat", choices=apis.names(), metavar="API",
                   help="the API the requests are written for: anthropic, chat or responses (default: chat)")
    p.add_argument("--model", default="", help="model id to put in the requests (replay --model overrides)")
    p.add_argument("--block-size", type=int, default=512, help="Mooncake: tokens per hash id (default 512)")
    p = sub.add_parser("export", help="export a trace as AIPerf single_turn / multi_turn or Mooncake JSONL")
    p.add_argument("format", choices=_FORMATS, help="the output's format")
    p.add_argument("trace", help="trace file to export")
    p.add_argument("--out", required=True, metavar="FILE", help="file to write (.gz: compressed)")
    p.add_argument("--block-size", type=int, default=512, help="Mooncake: tokens per hash id (default 512)")
    p.add_argument("--mooncake-mode", default="lengths", choices=["lengths", "payload"],
                   help="Mooncake: input_length + hash_ids (default), or each request body whole (payload)")
    p = sub.add_parser("workload", help="write a built-in workload trace")
    p.add_argument("name", choices=["agent-coding"], help="the workload")
    p.add_argument("--out", required=True, metavar="FILE", help="trace file to write (.gz: compressed)")
    p.add_argument("--sessions", type=int, default=4, help="concurrent sessions (default: 4)")
    p.add_argument("--turns", type=int, default=5, help="requests per session (default: 5)")
    p.add_argument("--prompt-tokens", type=int, default=8000,
                   help="first prompt's size in tokens (default: 8000)")
    p.add_argument("--apis", default="anthropic", choices=apis.names(), metavar="API",
                   help="the API of the requests: anthropic, chat or responses (default: anthropic)")
    p.add_argument("--model", default="", help="model id to put in the requests (replay --model overrides)")
    p = sub.add_parser("check", help="validate a trace and summarise it")
    p.add_argument("trace", help="trace file to check (.gz too)")


def run(args: argparse.Namespace) -> int:
    import gzip
    import sys
    from pathlib import Path

    from harnesscheck.errors import UsageError
    from harnesscheck.replay import formats
    from harnesscheck.replay.trace import TraceError, load, save

    try:
        if args.action == "from-capture":
            from harnesscheck.replay.capture import capture_to_trace

            trace = capture_to_trace(args.capture)
        elif args.action == "import":
            if args.format.startswith("mooncake"):
                trace = formats.import_mooncake(Path(args.file), api=args.apis, model=args.model,
                                                block_size=args.block_size)
            else:
                kind = None if args.format == "aiperf" else args.format
                trace = formats.import_aiperf(Path(args.file), api=args.apis, model=args.model, kind=kind)
        elif args.action == "export":
            trace = load(args.trace)
            if args.format.startswith("mooncake"):
                result = formats.export_mooncake(trace, block_size=args.block_size, mode=args.mooncake_mode)
            else:
                result = formats.export_aiperf(trace, kind=None if args.format == "aiperf" else args.format)
            data = result.text.encode("utf-8")
            Path(args.out).write_bytes(gzip.compress(data, mtime=0) if args.out.endswith(".gz") else data)
            for warning in result.warnings:
                print(f"warning: {warning}", file=sys.stderr)
            print(f"{args.format}: {len(result.text.splitlines())} line(s) -> {args.out}")
            return 0
        elif args.action == "workload":
            from harnesscheck.replay.workloads import build

            trace = build(args.name, sessions=args.sessions, turns=args.turns, prompt_tokens=args.prompt_tokens,
                          api=args.apis, model=args.model)
        else:
            trace = load(args.trace)
            print(f"{args.trace}: source {trace.source or '?'}, {len(trace.sessions)} session(s), "
                  f"{len(trace.turns)} turn(s)")
            for s in trace.sessions:
                apis = sorted({t.api for t in s.turns})
                print(f"  {s.id}: {len(s.turns)} turn(s), api {','.join(apis)}, "
                      f"{sum(1 for t in s.turns if t.delta is not None)} delta(s)")
            return 0
        save(trace, args.out)  # (text the input held that a trace file cannot: a lone surrogate)
    except (OSError, ValueError, TraceError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        # a missing or malformed input file (JSON of the wrong shape surfaces as Key/Type/AttributeError,
        # JSON nested too deeply as RecursionError)
        named = [getattr(args, name, None) for name in ("capture", "file", "trace")]
        source = next((n for n in named if n), args.action)
        if isinstance(exc, OSError) and exc.strerror:  # `No such file or directory: PATH`, not `[Errno 2] ...`
            from harnesscheck.cli.failures import error_line

            raise UsageError(error_line(exc)) from None
        said = str(exc)
        raise UsageError(said if said.startswith(f"{source}: ") else f"{source}: {said}") from None
    print(f"trace: {len(trace.sessions)} session(s), {len(trace.turns)} turn(s) -> {args.out}")
    return 0
