"""Named switches that make the reference server reproduce one known bug each.

Every fault names the bug, where it was seen (an article in shared/seeds or a line of
docs/API_FACTS.md), and the code path it bends. `harnesscheck serve --fault NAME` turns one on;
the fault matrix (tests/fault_matrix) proves that each fault is caught by the checks mapped to it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Fault:
    name: str
    bug: str
    source: str
    apis: tuple[str, ...] = ()  # the wire APIs whose traffic it bends; empty: every API's (`bends`)
    transport: bool = False  # bends the transport only: no check fails, the kit reports the endpoint stalled

    def bends(self, api: str) -> bool:
        """The fault bends ``api``'s traffic (named in ``apis``, or ``apis`` empty: every API's)."""
        return not self.apis or api in self.apis


_ALL = [
    # History rebuild and caching (article 1).
    Fault("flatten-interleaved-reasoning", "history rebuild merges r0 t0 r1 t1 into <think>r0 r1</think> t0 t1",
          "article 1: interleaved reasoning flattened before Dynamo's fix"),
    Fault("truncate-agent-reasoning", "reasoning dropped from agent (tool-calling) turns in history: "
          "truncate_history_thinking left on", "article 1: history thinking truncated; enable_thinking fix"),
    Fault("rewrite-history-reasoning", "reasoning of past turns re-serialised (whitespace normalised) before the next turn",
          "article 1: 167 vs 322 ms when reasoning is rewritten"),
    Fault("trim-reasoning-before-last-query", "reasoning of assistant turns before the last user query dropped from "
          "the history, as Qwen3's template trims it: a plain user turn loses the earlier agent reasoning; within "
          "the agent loop it survives", "issue 41: vLLM with Qwen3's template"),
    Fault("thinking-off-by-default", "thinking only when the client asks for it, though a reasoning parser is "
          "configured (enable_thinking left at the template default)", "article 1: fix 3, enable_thinking=true"),
    Fault("preamble-not-stripped", "x-anthropic-billing-header kept at prompt position 0",
          "article 1: --strip-anthropic-preamble; API_FACTS Anthropic billing header", apis=('anthropic',)),
    Fault("preamble-simple-strip", "strip only when the joined system text starts with the header and a newline "
          "follows (misses the header as the only system block)", "API_FACTS: Dynamo's strip rule",
          apis=('anthropic',)),
    # Usage accounting.
    Fault("message-start-zero-input-tokens", "message_start usage.input_tokens is 0",
          "article 1: Dynamo PR #7234; API_FACTS usage", apis=('anthropic',)),
    Fault("message-start-estimated-input-tokens", "message_start input_tokens is a chars/4 estimate",
          "API_FACTS: total prompt must not be an estimate", apis=('anthropic',)),
    Fault("count-tokens-mismatch", "count_tokens answers a different count than usage",
          "API_FACTS: count_tokens must agree with message_start", apis=('anthropic',)),
    Fault("count-tokens-estimate", "count_tokens answers a local estimate (a quarter of the request body's "
          "length) while the usage counts the rendered prompt",
          "issue 41: an Anthropic-to-Chat gateway counted 129 for a prompt its usage counted 324", apis=('anthropic',)),
    Fault("usage-cache-only-in-final", "message_start reports the whole prompt as input_tokens and no cache "
          "fields; only message_delta splits out cache_read_input_tokens",
          "docs/peers/vllm-0.32.md: vLLM 0.32's Anthropic route (measured)", apis=('anthropic',)),
    Fault("usage-current-turn-only", "prompt usage counts only the current turn's new input (the messages "
          "after the last assistant turn), not the history: a one-turn prompt is counted right",
          "issue 30: endpoints and proxies that count only the new turn (the clients' context meters read near "
          "zero and auto-compaction never fires)"),
    Fault("cache-static-prefix-only", "the prefix cache reuses only the static prefix (system prompt and tools), "
          "never the conversation: a long session re-prefills its whole history every turn (its usage says so)",
          "issue 30: the cache must reuse each turn's prefix over a long session"),
    Fault("usage-cached-outside-prompt", "prompt_tokens / input_tokens count only the uncached part (Anthropic's "
          "accounting in OpenAI's fields) while total_tokens counts the whole prompt",
          "API_FACTS: cached tokens are part of the prompt tokens", apis=('chat', 'responses')),
    # Non-streamed answer shape.
    Fault("nonstream-no-stop-sequence", "the non-streamed message omits its null fields (stop_sequence), as a "
          "server serialising with exclude_none does", "docs/peers/vllm-0.32.md: vLLM 0.32 (measured)",
          apis=('anthropic',)),
    Fault("nonstream-calls-as-text", "non-streamed tool calls rendered as text ('Tool usage: name(arguments)') while "
          "the stop reason still says a call was made (stop_reason tool_use / finish_reason tool_calls)",
          "issue 41: an Anthropic-to-Chat proxy", apis=("anthropic", "chat")),
    Fault("nonstream-no-object", "the non-streamed answer lacks `object` (chat.completion / response)",
          "API_FACTS: the non-streamed answer shape", apis=('chat', 'responses')),
    # Routes and request acceptance.
    Fault("model-slash-404", "GET /v1/models/{id} answers 404 for ids containing '/'",
          "article 1: GET /v1/models/nvidia/... 404"),
    Fault("model-percent-2f-not-decoded", "%2F in a model id is not decoded (the SDKs send it)",
          "API_FACTS: SDKs percent-encode path parameters"),
    Fault("reject-cache-control", "cache_control rejected with 400", "article 1; API_FACTS cache_control",
          apis=('anthropic',)),
    Fault("reject-system-role", "role: system inside messages rejected with 400",
          "API_FACTS: Claude Code sends role system entries", apis=('anthropic',)),
    Fault("bad-input-500", "malformed requests answered with 500 instead of 400", "API_FACTS: errors"),
    Fault("wrong-error-shape", "errors as {'detail': ...} instead of the API's own shape", "API_FACTS: errors"),
    Fault("lenient-input", "malformed input accepted instead of a 400: a message of an unknown role read as the "
          "user's, a non-string function_call_output.output read as its JSON text",
          "issue 35: servers that accept what the API refuses (leniency, SHOULD)"),
    Fault("unknown-model-openai-shape", "any model name served on the generation routes, and an unknown id on "
          "GET /v1/models/{id} answered 404 in OpenAI's error shape even under anthropic-version",
          "issue 40: llama.cpp-style routes behind an Anthropic frontend", apis=('anthropic',)),
    Fault("reject-unknown-fields", "unknown request fields rejected with 400",
          "API_FACTS: unknown-to-you fields must be tolerated"),
    # Tool-call timing.
    Fault("buffer-tool-calls", "tool calls held back until the end of the turn",
          "article 1: buffered tool calls; article 2"),
    Fault("dispatch-missing", "no tool_call_dispatch frame though dispatch is enabled",
          "API_FACTS: Dynamo --enable-streaming-tool-dispatch", apis=('chat',)),
    Fault("dispatch-twice", "tool_call_dispatch sent twice for one call",
          "API_FACTS: sent once per call", apis=('chat',)),
    Fault("dispatch-late", "tool_call_dispatch frames held back until after the chunk carrying finish_reason",
          "issue 40: a dispatch after the finish tells the client nothing the stream did not",
          apis=('chat',)),
    Fault("invalid-tool-json", "tool arguments that do not join to valid JSON (all APIs)",
          "API_FACTS: what breaks real clients"),
    # Anthropic stream grammar.
    Fault("an-block-index-skip", "content block indices skip a number", "API_FACTS: index equals position",
          apis=('anthropic',)),
    Fault("an-delta-type-mismatch", "text_delta inside a tool_use block", "API_FACTS: delta types by block",
          apis=('anthropic',)),
    Fault("an-signature-after-stop", "signature_delta after the thinking block's stop",
          "API_FACTS: signature_delta just before its stop", apis=('anthropic',)),
    Fault("an-missing-block-stop", "a content block is never stopped", "API_FACTS: stream events",
          apis=('anthropic',)),
    Fault("an-delta-unstarted-block", "a content_block_delta for a block whose content_block_start was never sent "
          "(a stray delta before the first block starts)", "API_FACTS: what breaks real clients (Content block not found)",
          apis=('anthropic',)),
    Fault("an-end-turn-after-tool-use", "stop_reason end_turn after tool_use blocks", "API_FACTS: stop_reason",
          apis=('anthropic',)),
    Fault("an-missing-message-stop", "stream ends without message_stop", "API_FACTS: stream events",
          apis=('anthropic',)),
    Fault("an-event-name-mismatch", "SSE event name differs from the data's type", "API_FACTS: event name equals type",
          apis=('anthropic',)),
    Fault("an-usage-missing", "message_delta carries no usage", "API_FACTS: message_delta.usage output_tokens required",
          apis=('anthropic',)),
    Fault("anthropic-models-shape-ignored", "GET /v1/models answers the OpenAI shape even with anthropic-version",
          "API_FACTS: GET /v1/models Anthropic shape", apis=('anthropic',)),
    Fault("openai-models-bare-entries", "GET /v1/models in OpenAI's shape lists bare entries: no object 'list' "
          "around them, no object 'model', created or owned_by in them", "API_FACTS: GET /v1/models, OpenAI's shape",
          apis=('chat', 'responses')),
    Fault("detokenize-drops-special", "detokenize skips special tokens, so tokenize/detokenize does not round-trip",
          "API_FACTS: tokenizer endpoints"),
    # Chat stream grammar.
    Fault("chat-repeat-tool-id-name", "tool-call id and name repeated in later deltas",
          "API_FACTS: the SDK concatenates string fields", apis=('chat',)),
    Fault("chat-finish-stop-after-tool-calls", "finish_reason stop instead of tool_calls", "API_FACTS: finish_reason",
          apis=('chat',)),
    Fault("chat-no-usage-chunk", "include_usage chunk missing", "API_FACTS: stream_options.include_usage",
          apis=('chat',)),
    Fault("chat-no-done", "data: [DONE] missing at the end", "API_FACTS: chat stream end", apis=('chat',)),
    # Responses stream grammar.
    Fault("rs-sequence-gap", "sequence_number skips a value", "API_FACTS: sequence_number increasing by one",
          apis=('responses',)),
    Fault("an-tool-start-no-input", "a streamed tool_use block starts without its input {}, as llama.cpp's "
          "llama-server 11434 starts it", "docs/peers/llama.cpp.md: llama-server's Messages stream",
          apis=('anthropic',)),
    Fault("rs-no-indices", "events without sequence_number, output_index and content_index, as llama.cpp's "
          "llama-server 11434 streams them", "docs/peers/llama.cpp.md: llama-server's Responses stream",
          apis=('responses',)),
    Fault("rs-arguments-done-mismatch", "function_call_arguments.done differs from the joined deltas",
          "API_FACTS: .done equals the concatenated deltas", apis=('responses',)),
    Fault("rs-missing-output-item-done", "response.output_item.done missing", "API_FACTS: Responses events",
          apis=('responses',)),
    Fault("rs-missing-completed", "stream closes without response.completed", "API_FACTS: Codex fails such turns",
          apis=('responses',)),
    Fault("rs-ignore-previous-response-id", "previous_response_id ignored", "API_FACTS: previous_response_id order",
          apis=('responses',)),
    Fault("rs-missing-call-id", "function_call item without call_id", "API_FACTS: Codex drops such calls",
          apis=('responses',)),
    Fault("rs-no-encrypted-content", "reasoning items lack encrypted_content though include asks for it",
          "API_FACTS: include reasoning.encrypted_content", apis=('responses',)),
    Fault("rs-require-input", "a Responses request without input refused with 400 (input is optional)",
          "API_FACTS: request validation (vLLM 0.32 refuses it)", apis=("responses",)),
    Fault("rs-fields-dropped", "Responses request fields (store, parallel_tool_calls, text) dropped from the response",
          "article 1: fields lost inside the server (PR #6089)", apis=('responses',)),
    # tool_choice, parallel calls off, strict arguments, a forced call cut by the output limit (issue 23).
    Fault("ignore-tool-choice", "tool_choice ignored (every mode answered as auto): none still calls, any / "
          "required / a named tool do not force a call", "API_FACTS: tool_choice (the endpoint passes it to the "
          "prompt only)"),
    Fault("parallel-calls-not-disabled", "disable_parallel_tool_use / parallel_tool_calls: false ignored: "
          "the turn still makes several calls", "API_FACTS: tool_choice, parallel tool use"),
    Fault("strict-ignored", "strict: true ignored: a strict tool's arguments do not follow its schema (a "
          "required property missing, one it does not define added)", "issue 23: vLLM 0.32 follows the schema "
          "only with strict (measured)"),
    Fault("forced-cut-raw-markup", "a forced call cut off by the output limit comes back, not streamed, as "
          "the model's raw <tool_call> text (the stream keeps the tool deltas)", "issue 23: vLLM 0.32 "
          "(measured)"),
    # Context overflow: a prompt longer than the context window refused in a form the clients do not
    # recognise (issue 30; docs/API_FACTS.md "Context overflow").
    Fault("overflow-detail-shape", "an over-long prompt refused as {'detail': 'Prompt too long: ...'} (400), "
          "in no API's error shape", "issue 30: servers answering the overflow with their framework's error"),
    Fault("overflow-500", "an over-long prompt answered with a 500 (the API's error shape, no overflow marker)",
          "issue 30: servers failing the request inside the engine"),
    Fault("overflow-bare-400", "an over-long prompt refused with a 400 in the API's shape but without the "
          "overflow marker (no context_length_exceeded code, no 'prompt is too long')",
          "issue 30: a bare 400 the clients cannot tell from any bad request"),
    Fault("overflow-stream-error", "an over-long prompt failed inside the engine: streamed, HTTP 200 and then the "
          "API's own in-stream error (Anthropic event: error api_error, a Chat error chunk, Responses "
          "response.failed server_error), no overflow marker; not streamed, a 500",
          "Dynamo 1.6.1's answer to a 4 MiB prompt (its hand verification, docs/peers/dynamo-1.6.1.md)"),
    # Request shapes and tool kinds the real clients send (issue 30; docs/API_FACTS.md "Request shapes and
    # tool kinds").
    Fault("rs-function-tools-only", "a Responses tool array with any kind but function refused with 400 (\"Only "
          "function tools are supported\"): custom, namespace, web_search, local_shell, tool_search, ...",
          "issue 30: servers answering Codex's tools with 400", apis=("responses",)),
    Fault("rs-custom-tool-dropped", "custom tools (Codex's freeform apply_patch) silently left out: the model "
          "never sees them, a forced custom tool_choice forces nothing", "issue 30: apply_patch never reaches "
          "the model", apis=("responses",)),
    Fault("rs-custom-call-as-function", "a custom tool's call comes back as a function_call item with arguments "
          "{\"input\": ...} instead of a custom_tool_call item", "issue 30: servers that turn custom tools into "
          "functions", apis=("responses",)),
    Fault("rs-narrow-request-schema", "an older Responses request model: input items only message, "
          "function_call, function_call_output and reasoning, each with its id; text.format required",
          "issue 30: custom_tool_call_output, tool_search_call, replayed items without id and text without "
          "format refused", apis=("responses",)),
    Fault("reject-cache-control-extensions", "cache_control accepted only as {\"type\": \"ephemeral\"} on "
          "content blocks: ttl, scope, a top-level cache_control and one on a thinking block refused with 400",
          "issue 30; router-for-me/CLIProxyAPI#714, horselock/claude-code-proxy#14", apis=("anthropic",)),
    Fault("reject-tool-result-image", "image blocks inside tool_result content refused with 400 (text only)",
          "issue 30: screenshots in tool results", apis=("anthropic",)),
    Fault("reject-server-tools", "server tools (web_search_20250305, web_fetch_...) refused with 400 for "
          "lacking input_schema", "issue 30: server tools declared beside client tools", apis=("anthropic",)),
    Fault("server-tools-as-client-tools", "server tools offered to the model as client tools with an empty "
          "schema: the model's call comes back as a client tool_use with input {}", "issue 30: a silent empty "
          "client tool", apis=("anthropic",)),
    Fault("reject-history-thinking", "thinking blocks sent back in an assistant turn refused with 400 (the "
          "request model knows no thinking input block)", "issue 30: thinking blocks from history refused",
          apis=("anthropic",)),
    Fault("no-count-tokens-route", "POST /v1/messages/count_tokens answers 404", "issue 30: a missing count_tokens "
          "route", apis=("anthropic",)),
    Fault("count-tokens-partial", "count_tokens counts the newest message only (no system, tools or earlier "
          "turns)", "issue 30: count_tokens that ignores system and tools", apis=("anthropic",)),
    Fault("chat-history-reasoning-one-name", "an incoming assistant message's reasoning read under "
          "reasoning_content only: reasoning sent as `reasoning` is dropped from the prompt",
          "issue 30: servers read one of the two names", apis=("chat",)),
    Fault("thinking-off-output-as-reasoning", "with thinking turned off (chat_template_kwargs.enable_thinking "
          "false, reasoning_effort none) the whole output is reported as reasoning_content: text and tool "
          "calls, finish_reason stop", "sgl-project/sglang#20586, QwenLM/Qwen3#1297", apis=("chat",)),
    Fault("stream-tool-input-empty", "streamed tool calls carry no arguments ({} / input {}) while the "
          "non-streamed answer is right", "issue 30; router-for-me/CLIProxyAPI#5338"),
    Fault("chat-stream-call-dropped", "a streamed Chat answer's tool call replaced by empty content and "
          "finish_reason stop (the non-streamed answer is right)", "issue 30", apis=("chat",)),
    # Transport (no contract broken: the kit must say "stalled", not fail a rule).
    Fault("stall-stream", "a stream stops sending after two writes and never ends", "issue 22: a stalled endpoint",
          transport=True),
    Fault("reject-compressed-body", "zstd/gzip request bodies (Content-Encoding) rejected",
          "article 1: Codex request compression", apis=('responses',)),
]

FAULTS: dict[str, Fault] = {f.name: f for f in _ALL}


def unknown_problem(names: Iterable[str]) -> str | None:
    """One line naming each fault that does not exist, with the nearest known name, or None."""
    import difflib

    unknown = [n for n in dict.fromkeys(names) if n not in FAULTS]
    if not unknown:
        return None
    said = []
    for name in unknown:
        close = difflib.get_close_matches(name, list(FAULTS), n=1, cutoff=0.6)
        said.append(f"{name} (did you mean {close[0]}?)" if close else name)
    return f"unknown fault{'s' if len(unknown) > 1 else ''}: {', '.join(said)}; `harnesscheck faults` lists them"


def in_server_args(args: Iterable[str]) -> list[str]:
    """The fault names a server command line turns on: `--fault=NAME`, or `--fault` then `NAME`."""
    args = list(args)
    out = [a.split("=", 1)[1] for a in args if a.startswith("--fault=")]
    return out + [b for a, b in zip(args, args[1:], strict=False) if a == "--fault"]


class Faults:
    """The set of active faults; `faults.on("name")` reads like the bug it guards."""

    def __init__(self, names: Iterable[str] = ()) -> None:
        names = list(names)
        unknown = [n for n in names if n not in FAULTS]
        if unknown:
            raise KeyError(f"unknown fault(s) {', '.join(unknown)}; known: {', '.join(sorted(FAULTS))}")
        self.names = frozenset(names)

    def on(self, name: str) -> bool:
        assert name in FAULTS, name  # a typo here would silently disable a fault
        return name in self.names

    def __bool__(self) -> bool:
        return bool(self.names)
