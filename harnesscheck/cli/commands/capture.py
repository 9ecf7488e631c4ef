"""`harnesscheck capture`: a recording reverse proxy between a real client and its endpoint."""

from __future__ import annotations

import argparse

NAME = "capture"
ORDER = 40
HELP = "record a real client's session through a reverse proxy (streams pass through untouched)"
DESCRIPTION = """\
Run a reverse proxy on --listen that forwards everything to --upstream untouched (method, path and
query, headers minus hop-by-hop ones, body bytes; SSE streamed through chunk by chunk) and records
each exchange (request, response transcript, chunk and frame arrival times) into --out (JSONL).
Secrets are redacted before anything is written: API keys, Authorization, cookies and every
--redact-header, also where the same values appear in bodies. Stop it with Ctrl-C.

Byte bounds (each cut is printed on stderr and noted in the record): a request body over
--max-body-bytes (default 64 MiB) is answered 413, not forwarded; coded bodies (gzip, deflate, zstd)
are decoded for the record up to --max-decoded-bytes (default 64 MiB: a gzip bomb stops there, its
record says so); a response is forwarded whole and recorded up to --max-record-bytes (default 64 MiB
of SSE frames or body, as the record holds them: a frame's raw bytes and data, a body's base64 and
text, a coded body once decoded).

Then make a trace of it:  harnesscheck trace from-capture CAPTURE --out TRACE

Example (Claude Code):
  harnesscheck capture --upstream http://localhost:8000 --listen 9000 --out cc.capture.jsonl
  ANTHROPIC_BASE_URL=http://localhost:9000 claude -p "fix the build"

Exit status: 0 stopped (Ctrl-C, SIGTERM); 2 the upstream or the listen port is unusable.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--upstream", required=True, metavar="URL", help="the endpoint to forward to")
    parser.add_argument("--listen", type=int, default=9000, metavar="PORT", help="port to listen on (0: any free)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--out", required=True, metavar="FILE", help="capture file to write (JSONL)")
    parser.add_argument("--redact-header", action="append", default=[], metavar="NAME",
                        help="also redact this header (and its value anywhere), repeatable")
    parser.add_argument("--trace", metavar="FILE", help="on exit, also convert the capture into this trace")
    mib = 1024 * 1024
    parser.add_argument("--max-body-bytes", type=int, default=64 * mib, metavar="N",
                        help="largest request body forwarded, in bytes (default 64 MiB; larger: 413)")
    parser.add_argument("--max-decoded-bytes", type=int, default=64 * mib, metavar="N",
                        help="a coded body is decoded for the record up to N bytes (default 64 MiB)")
    parser.add_argument("--max-record-bytes", type=int, default=64 * mib, metavar="N",
                        help="a response is recorded up to N bytes of frames or body (default 64 MiB)")


def run(args: argparse.Namespace) -> int:
    import asyncio
    import signal

    from harnesscheck.errors import UsageError
    import sys

    from harnesscheck.replay.capture import CaptureProxy, Limits, capture_to_trace
    from harnesscheck.replay.client import run_async
    from harnesscheck.replay.trace import save

    async def main() -> int:
        limits = Limits(max_body_bytes=args.max_body_bytes, max_decoded_bytes=args.max_decoded_bytes,
                        max_record_bytes=args.max_record_bytes)
        proxy = CaptureProxy(upstream=args.upstream, out=args.out, host=args.host, port=args.listen,
                             redact_headers=args.redact_header, limits=limits,
                             warn=lambda line: print(line, file=sys.stderr, flush=True))
        try:
            await proxy.start()
        except OSError as error:  # the listen port in use or not allowed: say so, leave nothing open
            await proxy.stop()
            raise UsageError(str(error)) from None
        print(f"capture proxy listening on {proxy.url} -> {args.upstream}; writing {args.out}", flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, stop.set)
            except (NotImplementedError, RuntimeError):  # pragma: no cover
                pass
        await stop.wait()
        await proxy.stop()
        print(f"captured {proxy.count} exchange(s) into {args.out}", flush=True)
        return 0

    rc = run_async(main())
    if args.trace:
        trace = capture_to_trace(args.out)
        save(trace, args.trace)
        print(f"trace: {len(trace.sessions)} session(s), {len(trace.turns)} turn(s) -> {args.trace}")
    return rc
