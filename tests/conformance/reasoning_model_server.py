"""Issue 40's test endpoint: the reference server (its app, in this process) with a model that behaves
like a real reasoning model where the kit's own scripted model does not, and bugs planted on request:

- its window is not announced (`--no-announce-window`): GET /v1/models says no `max_model_len`;
- the model reasons ~300 tokens (`REASONING`) before each tool call it makes, unless thinking is off;
- a conversation no built-in scenario starts (a real client's session, say) gets its calls made with
  another tool of the request than the one the scripted model picks, with that tool's example arguments
  (so never the calls of the recorded client sessions); a forced tool_choice still holds.

`--plant` (comma-separated) adds bugs: any reference-server fault by name (overflow-bare-400,
overflow-500, parallel-calls-not-disabled, unknown-model-openai-shape, dispatch-late, ...), and
`stall-client-stream`: the first streamed request carrying Claude Code's `x-app: cli` header gets three
writes of its answer and then nothing, never an end (the other requests are answered); `stall-sdk-stream`
the same for the openai SDK's first request, after one write. `always-reasons`
is a behaviour, no bug: the model reasons before each call even when the request turns thinking off (a
model whose template has no off switch); `reasons-long` makes each thought five times as long.

    python -m tests.conformance.reasoning_model_server --port P [--plant NAME,...]
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

import uvicorn

from harnesscheck.reference_server import director, service as service_module
from harnesscheck.reference_server.app import create_app
from harnesscheck.reference_server.config import ServerConfig
from harnesscheck.reference_server.engines.scripted import TimingModel
from harnesscheck.reference_server.events import Part, ToolCall
from harnesscheck.reference_server.faults import FAULTS

# ~300 tokens of the reference tokenizer (29 tokens a sentence)
REASONING = "Let me weigh which step comes first: the file list, then the test run, then the patch. " * 11
PLANTS = ("stall-client-stream", "stall-sdk-stream", "always-reasons", "reasons-long")
LONG = 5  # reasons-long: REASONING this many times (~1,500 tokens: past four times the kit's first budget)


def _other_tool(conv: Any, name: str) -> Any:
    tools = [t for t in conv.tools if t.name != name]
    return tools[-1] if tools else None


def reasoning_model(next_turn: Any, *, always: bool = False, long: bool = False) -> Any:
    reasoning = REASONING * (LONG if long else 1)

    def turn(conv: Any, *, thinking: bool, faults: Any = None) -> list[Part]:
        thinking = thinking or always  # always: no lever turns its reasoning off
        parts = next_turn(conv, thinking=thinking, faults=faults) if faults is not None else \
            next_turn(conv, thinking=thinking)
        own = director._scenario_start(conv)[1] is None and conv.tool_choice.mode not in ("named", "required")
        out: list[Part] = []
        for p in parts:
            if p.kind == "tool_call" and p.call is not None:
                if own and (other := _other_tool(conv, p.call.name)) is not None:
                    args = json.dumps(director.example_arguments(other.parameters, ""), ensure_ascii=False)
                    p = Part(kind="tool_call", call=ToolCall(index=p.call.index, id="", name=other.name,
                                                             arguments=args))
                if thinking and out and out[-1].kind == "reasoning":  # one thought, longer
                    out[-1] = Part(kind="reasoning", text=out[-1].text + " " + reasoning)
                elif thinking:
                    out.append(Part(kind="reasoning", text=reasoning))
            out.append(p)
        return out
    return turn


class StallFirstStream:
    """ASGI middleware: the first POST whose `header` starts with `value` sends `writes` body writes, then
    hangs until the client goes away."""

    def __init__(self, app: Any, header: bytes, value: bytes, writes: int) -> None:
        self.app, self.header, self.value, self.after = app, header, value, writes
        self.done = False

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        headers = dict(scope.get("headers") or []) if scope["type"] == "http" else {}
        if self.done or scope["type"] != "http" or scope.get("method") != "POST" or \
                not headers.get(self.header, b"").startswith(self.value):
            await self.app(scope, receive, send)
            return
        self.done = True
        writes = 0

        async def stalling(message: Any) -> None:
            nonlocal writes
            if message["type"] == "http.response.body":
                writes += 1
                if writes > self.after:
                    await asyncio.sleep(3600)  # silent until the client goes away
            await send(message)
        await self.app(scope, receive, stalling)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--plant", default="", help=f"comma-separated: a fault name or {', '.join(PLANTS)}")
    args = parser.parse_args()
    plants = [p for p in args.plant.split(",") if p]
    unknown = [p for p in plants if p not in FAULTS and p not in PLANTS]
    if unknown:
        raise SystemExit(f"unknown plant(s): {', '.join(unknown)}")
    service_module.next_turn = reasoning_model(service_module.next_turn,  # type: ignore[attr-defined]
                                               always="always-reasons" in plants, long="reasons-long" in plants)
    config = ServerConfig(faults=tuple(p for p in plants if p in FAULTS), context_window=65536, announce_window=False,
                          timing=TimingModel(base_ms=0, prefill_us_per_token=0, decode_ms=0))
    app: Any = create_app(config)
    if "stall-client-stream" in plants:  # Claude Code's first request (its recorded x-app header)
        app = StallFirstStream(app, b"x-app", b"cli", 3)
    if "stall-sdk-stream" in plants:  # the openai SDK's first request (its user agent)
        app = StallFirstStream(app, b"user-agent", b"OpenAI/Python", 1)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
