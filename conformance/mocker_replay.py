"""The kit's scripted outputs for Dynamo's CPU mocker: every scenario turn's model output (scenarios/data),
rendered in the served model's own format (the reasoning and tool-call markup its parsers read) and
tokenized with its own tokenizer, written as the mocker's replay trace. The peer profile `--peer
dynamo-mocker` (conformance/levers.py) then names each request's scenario turn in Dynamo's
`nvext.annotations` (`output_replay_id:hc-SCENARIO-TURN`), and the mocker plays that output instead of
random tokens: its answers take the scenarios' paths (reasoning, one call, parallel calls, an end token)
and the frontend's parsers, streams and routes are judged on them.

The mocker takes tokens, not text (Dynamo 1.6.1 `--response-replay-trace-path`: one JSON line per output,
`request_id` the key, `output_token_ids`, `output_length`, `input_length`, `hash_ids`, `timestamp`; a row
keyed by any other field is "not found" and the mocker samples at random).

    python -m harnesscheck.conformance.mocker_replay MODEL_DIR OUT.jsonl [--reasoning-parser qwen3]
        [--tool-call-parser hermes]
    python -m dynamo.mocker --model-path MODEL_DIR ... --response-replay-trace-path OUT.jsonl

MODEL_DIR is the folder the mocker serves (its tokenizer.json and tokenizer_config.json); the parsers are
the ones the frontend runs for it (the reference server's renderers write their formats: reasoning
`deepseek_r1`, `qwen3`, `nemotron_deci`; tools `hermes`, `qwen3_coder`).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from harnesscheck.conformance.levers import replay_key

__all__ = ["scripted_outputs", "scripted_texts", "write_trace"]


def scripted_texts(reasoning_parser: str = "qwen3", tool_parser: str = "hermes") -> dict[str, str]:
    """Every scenario turn's output as the model writes it (raw text, markup included), by replay key."""
    from harnesscheck.reference_server.conversation import ToolSpec
    from harnesscheck.reference_server.events import Part, ToolCall
    from harnesscheck.reference_server.parsers import get_reasoning_parser, get_tool_parser
    from harnesscheck.reference_server.parsers.stream import render_parts
    from harnesscheck.scenarios.loader import load_all

    out: dict[str, str] = {}
    for scenario in load_all().values():
        tools = [ToolSpec(t["name"], t.get("description", ""), t.get("parameters") or {"type": "object"})
                 for t in scenario.tools]
        for turn_index, turn in enumerate(scenario.turns):
            parts, calls = [], 0
            for part in turn.model:
                if part.kind == "tool_call":
                    parts.append(Part("tool_call", call=ToolCall(calls, f"call_{calls}", part.name, part.arguments)))
                    calls += 1
                else:
                    parts.append(Part(part.kind, part.text))
            reasoning = get_reasoning_parser(reasoning_parser)()
            tool = get_tool_parser(tool_parser)(tools=tools, id_factory=lambda i: f"call_{i}")
            # as the model writes it before its end token: no trailing whitespace (Qwen3's own template ends
            # a call at `</tool_call>`, a text at its last word)
            out[replay_key(scenario.id, turn_index)] = render_parts(parts, reasoning, tool).rstrip()
    return out


def scripted_outputs(model_dir: str | Path, *, reasoning_parser: str = "qwen3",
                     tool_parser: str = "hermes") -> dict[str, list[int]]:
    """`scripted_texts` tokenized with the model folder's tokenizer.json, each ended by its end-of-turn
    token (tokenizer_config.json `eos_token`, else `<|im_end|>`), by replay key."""
    from tokenizers import Tokenizer

    folder = Path(model_dir)
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    config_file = folder / "tokenizer_config.json"
    config = json.loads(config_file.read_text(encoding="utf-8")) if config_file.exists() else {}
    eos = config.get("eos_token")
    eos = eos.get("content") if isinstance(eos, dict) else eos
    end = tokenizer.token_to_id(eos) if isinstance(eos, str) else None
    if end is None:
        end = tokenizer.token_to_id("<|im_end|>")
    texts = scripted_texts(reasoning_parser, tool_parser)
    return {key: tokenizer.encode(text, add_special_tokens=False).ids + ([end] if end is not None else [])
            for key, text in texts.items()}


def write_trace(path: str | Path, outputs: Mapping[str, Sequence[int]]) -> Path:
    """The mocker's replay trace: one row per key with its output token ids."""
    path = Path(path)
    with path.open("w", encoding="utf-8") as f:
        for i, (key, ids) in enumerate(outputs.items()):
            f.write(json.dumps({"request_id": key, "timestamp": i, "input_length": 16, "hash_ids": [i],
                                "output_length": len(ids), "output_token_ids": list(ids)}) + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harnesscheck.conformance.mocker_replay",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("model_dir", help="the model folder the mocker serves (tokenizer.json)")
    parser.add_argument("out", help="the trace file to write (JSON lines)")
    parser.add_argument("--reasoning-parser", default="qwen3", help="the frontend's reasoning parser (qwen3)")
    parser.add_argument("--tool-call-parser", default="hermes", help="the frontend's tool-call parser (hermes)")
    args = parser.parse_args(argv)
    outputs = scripted_outputs(args.model_dir, reasoning_parser=args.reasoning_parser,
                               tool_parser=args.tool_call_parser)
    write_trace(args.out, outputs)
    print(f"wrote {len(outputs)} scripted outputs to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
