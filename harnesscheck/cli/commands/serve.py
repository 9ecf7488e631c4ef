"""`harnesscheck serve`: the reference server, flags named as Dynamo names them."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

NAME = "serve"
ORDER = 20
HELP = "serve the reference server (Anthropic Messages, Chat Completions, Responses, models, tokenize)"
DESCRIPTION = """\
Serve the reference server: one streaming pipeline behind the Anthropic Messages, OpenAI Chat
Completions and OpenAI Responses APIs, plus /v1/models, count_tokens and /tokenize. It gets every
contract right by default; --fault NAME reproduces one known bug (see `harnesscheck faults`).

Engines: scripted (default; deterministic output, modelled timing, real prefix cache),
transformers (real compute on a local model dir; see `harnesscheck make-model`), trtllm (GPU).

With --model-path (a Hugging Face model directory or a .gguf file), every engine tokenizes and
renders with the checkpoint's own tokenizer, special tokens, end ids and chat template; a checkpoint
that ships no chat template needs --chat-template FILE. The chat template is probed once at
start-up (does it read reasoning_content, which thinking kwargs does it honour); the decision is
printed on stderr and shown in /v1/models metadata.chat_template.

Exit status: 0 stopped (Ctrl-C, SIGTERM), 2 cannot start (unknown fault, engine set-up, the port
in use or not allowed).
"""


def _bool_flag(add_argument: Callable[..., Any], name: str, default: bool, help: str) -> None:
    """``--NAME`` / ``--no-NAME`` through ``add_argument`` (a parser's or an argument group's)."""
    add_argument(f"--{name}", default=default, action=argparse.BooleanOptionalAction,
                        help=f"{help} (default: {'on' if default else 'off'})")


def add_server_options(parser: argparse.ArgumentParser) -> None:
    """Options shared by `serve` and the commands that start an embedded server."""
    from harnesscheck.reference_server.config import DEFAULT_MODEL_IDS

    g = parser.add_argument_group("reference server")
    g.add_argument("--model-id", action="append", dest="model_ids", metavar="ID[=FAMILY]",
                   help="served model id, repeatable; FAMILY is nemotron, qwen3 or deepseek_r1 (guessed from the id "
                        f"otherwise). Default: {', '.join(DEFAULT_MODEL_IDS)}")
    flag = g.add_argument
    _bool_flag(flag, "enable-anthropic-api", True,
               "serve /v1/messages (off reproduces Dynamo's default: 404)")
    _bool_flag(flag, "strip-anthropic-preamble", True,
               "strip the x-anthropic-billing-header line before tokenizing")
    _bool_flag(flag, "enable-streaming-tool-dispatch", True,
               "Chat: send event: tool_call_dispatch per complete call")
    g.add_argument("--reasoning-parser", default="", help="reasoning parser name, or 'none' "
                   "(default: the model family's: nemotron_deci, qwen3, deepseek_r1)")
    g.add_argument("--tool-call-parser", default="", help="tool-call parser name, or 'none' "
                   "(default: the family's: qwen3_coder, hermes)")
    g.add_argument("--fault", action="append", default=[], metavar="NAME", help="turn on a known bug, repeatable")
    g.add_argument("--engine", default="scripted", choices=["scripted", "transformers", "trtllm"],
                   help="scripted (default: the built-in scenarios with a timing model, CPU), transformers "
                        "(real compute on a checkpoint, --model-path), trtllm (TensorRT-LLM; not verified here)")
    g.add_argument("--model-path", help="checkpoint: a Hugging Face model directory or a .gguf file (its tokenizer "
                   "and chat template for every engine, its weights for transformers/trtllm)")
    g.add_argument("--chat-template", metavar="FILE", help="chat template (a Jinja file, or a built-in name: chatml, "
                   "deepseek_r1, gemma) instead of the checkpoint's; needed when the checkpoint ships none")
    g.add_argument("--engine-option", action="append", default=[], metavar="KEY=VALUE",
                   help="engine setting, repeatable (transformers: mode=scripted|free, device=cpu|cuda, dtype=...)")
    g.add_argument("--ttft-base-ms", type=float, default=10.0,
                   help="scripted timing: fixed cost before token 1 (default: 10 ms; each `bench` sets its own, "
                        "see `harnesscheck bench --help`)")
    g.add_argument("--prefill-us-per-token", type=float, default=40.0,
                   help="scripted timing: cost per uncached prompt token (default: 40 µs)")
    g.add_argument("--decode-ms", type=float, default=2.0,
                   help="scripted timing: interval between output tokens (default: 2 ms)")
    g.add_argument("--block-size", type=int, default=16, help="prefix-cache block size in tokens (default: 16)")
    g.add_argument("--max-concurrency", type=int, default=1024,
                   help="engine slots (concurrent streams; default: 1024)")
    g.add_argument("--max-output-tokens", type=int, default=32768, metavar="N",
                   help="most output tokens per request: a larger max_tokens is served up to N and ends as a "
                        "length finish (a slow real-compute engine on a CPU; default: 32768)")
    g.add_argument("--context-window", type=int, default=None, metavar="N",
                   help="prompt tokens the model takes: a longer prompt is refused in each API's form (Anthropic "
                        "'prompt is too long: N tokens > M maximum', OpenAI code context_length_exceeded), and "
                        "the output limit is cut to the room left; 0: no limit (default: 131072)")
    g.add_argument("--announce-window", action=argparse.BooleanOptionalAction, default=True,
                   help="announce the context window in GET /v1/models (max_model_len, as vLLM and SGLang do); "
                        "off: announced nowhere, as many servers and gateways do (default: on)")
    g.add_argument("--max-body-bytes", type=int, default=32 * 1024 * 1024,
                   help="largest request body, also once decompressed; larger gets 413 (default: 32 MiB)")
    g.add_argument("--prefix-cache-bytes", type=int, default=32 * 1024 * 1024, metavar="BYTES",
                   help="the scripted engine's prefix cache holds at most this many bytes of blocks (512 "
                        "each, what a block costs the process), least recently used leaf first; shown in "
                        "GET /health (default: 32 MiB, 65,536 blocks)")
    g.add_argument("--responses-store-bytes", type=int, default=128 * 1024 * 1024, metavar="BYTES",
                   help="Responses API: how many bytes of stored responses (previous_response_id) to keep, text "
                        "counted in UTF-8 bytes, least recently used evicted first; shown in GET /health "
                        "(default: 128 MiB)")


def config_from_args(args: argparse.Namespace):  # -> ServerConfig
    from harnesscheck.reference_server.config import DEFAULT_MODEL_IDS, ServerConfig
    from harnesscheck.reference_server.engines.scripted import TimingModel

    def parser_name(value: str) -> str | None:
        return None if value == "none" else value

    options = dict(opt.split("=", 1) for opt in args.engine_option if "=" in opt)
    return ServerConfig(
        model_ids=tuple(args.model_ids or DEFAULT_MODEL_IDS),
        enable_anthropic_api=args.enable_anthropic_api,
        strip_anthropic_preamble=args.strip_anthropic_preamble,
        enable_streaming_tool_dispatch=args.enable_streaming_tool_dispatch,
        reasoning_parser=parser_name(args.reasoning_parser),
        tool_call_parser=parser_name(args.tool_call_parser),
        api_key=getattr(args, "api_key", None),
        faults=tuple(args.fault),
        engine=args.engine,
        model_path=args.model_path,
        chat_template=getattr(args, "chat_template", None),
        engine_options=options,
        timing=TimingModel(base_ms=args.ttft_base_ms, prefill_us_per_token=args.prefill_us_per_token,
                           decode_ms=args.decode_ms),
        block_size=args.block_size,
        max_concurrency=args.max_concurrency,
        max_body_bytes=getattr(args, "max_body_bytes", 32 * 1024 * 1024),
        max_output_tokens=getattr(args, "max_output_tokens", 32768),
        **({} if getattr(args, "context_window", None) is None else {"context_window": args.context_window}),
        announce_window=getattr(args, "announce_window", True),
        responses_store_bytes=args.responses_store_bytes,
        prefix_cache_bytes=getattr(args, "prefix_cache_bytes", 32 * 1024 * 1024),
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="listen address (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="listen port; 0 picks a free one (default: 8000)")
    parser.add_argument("--api-key", default=None, metavar="KEY",
                        help="require this key (x-api-key or Authorization: Bearer); env HARNESSCHECK_SERVER_API_KEY")
    parser.add_argument("--log-level", default="warning", choices=["debug", "info", "warning", "error"],
                        help="uvicorn's log level (default: warning)")
    add_server_options(parser)


def fault_banner(names: list[str]) -> list[str]:
    """What `serve` says on start when faults are on: the server breaks contracts on purpose (also
    in /, /health and every /v1/models entry's metadata.faults)."""
    from harnesscheck.reference_server.faults import FAULTS

    names = list(dict.fromkeys(names))
    if not names:
        return []
    lines = [f"harnesscheck reference server: FAULTS ON ({len(names)}), reproducing known bugs on purpose "
             "(/health and /v1/models name them; `harnesscheck faults` lists all):"]
    return lines + [f"  --fault {name}: {FAULTS[name].bug}" for name in names]


def run(args: argparse.Namespace) -> int:
    import errno
    import os
    import socket
    import sys

    import uvicorn

    from harnesscheck.reference_server.app import create_app
    from harnesscheck.reference_server.faults import unknown_problem

    from harnesscheck.errors import UsageError

    problem = unknown_problem(args.fault)
    if problem:
        raise UsageError(problem)
    args.api_key = args.api_key or os.environ.get("HARNESSCHECK_SERVER_API_KEY")
    try:
        app = create_app(config_from_args(args))
    except (ValueError, RuntimeError, ImportError, OSError) as error:  # engine setup: say why, no traceback
        raise UsageError(f"cannot start the {args.engine} engine: {error}") from None
    sock = socket.socket(socket.AF_INET6 if ":" in args.host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((args.host, args.port))
    except OSError as error:
        sock.close()
        hint = "; pick another --port (0 takes a free one)" if error.errno == errno.EADDRINUSE else ""
        raise UsageError(f"cannot listen on {args.host}:{args.port}: {error.strerror or error}{hint}") from None
    host, port = sock.getsockname()[:2]
    # The chat-template decision, once the server can start (a refusal stays one line): stderr, since
    # stdout's first line says where we listen.
    for line in app.state.service.template_report():
        print(f"harnesscheck reference server: {line}", file=sys.stderr, flush=True)
    for line in fault_banner(args.fault):
        print(line, file=sys.stderr, flush=True)
    class _Server(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            # The first stdout line tells a parent process where we listen (used with --port 0). It
            # comes once uvicorn serves and holds the signals: a SIGTERM sent after it always stops us
            # (sent before uvicorn took the signals, it could be lost and leave the server running).
            print(f"harnesscheck reference server listening on http://{host}:{port}", flush=True)

    try:
        config = uvicorn.Config(app, log_level=args.log_level, timeout_graceful_shutdown=2, access_log=False,
                                loop="auto", http="auto")
        _Server(config).run(sockets=[sock])
    except KeyboardInterrupt:  # a stop before uvicorn took the signals, or passed on after its shutdown
        pass
    return 0
