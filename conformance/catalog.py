"""Every conformance check as data: the single list that the pytest suites, the fault matrix and
the report's tables are drawn from (STYLE.md, rule 1).

A check has a stable id (`AN-STREAM-003`: API, contract, number), a title, a level (MUST: a real
client breaks or a documented rule is broken; SHOULD: a fact marked unconfirmed, or a quality
goal), the line of docs/API_FACTS.md it stands on, a remedy hint, the grammar rules it enforces
(for stream checks), and the reference-server faults that must make it fail.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from conformance.outcome import Level

MUST, SHOULD = Level.MUST, Level.SHOULD
APIS = ("anthropic", "chat", "responses")


@dataclass(frozen=True, slots=True)
class Check:
    id: str
    api: str  # anthropic | chat | responses | any
    title: str
    level: Level
    source: str  # the API_FACTS.md (or article) line it stands on
    remedy: str
    faults: tuple[str, ...]  # reference-server faults that this check must catch
    rules: tuple[str, ...] = ()  # grammar rule ids it enforces (stream checks)
    witness: str = ""  # what the check looks at, when it is not the stream grammar
    clients: dict[str, str] = field(default_factory=dict)  # known client impact: name -> verdict

    @property
    def contract(self) -> str:
        return self.id.split("-")[1]


def _c(id: str, api: str, title: str, level: Level, source: str, remedy: str, faults: tuple[str, ...] | str,
       rules: tuple[str, ...] = (), witness: str = "", clients: dict[str, str] | None = None) -> Check:
    faults = (faults,) if isinstance(faults, str) else faults
    return Check(id, api, title, level, source, remedy, faults, rules, witness, clients or {})


CC, CODEX, OC = "Claude Code 2.1.197", "Codex 0.171.0", "OpenClaw 2026.9.6"
BREAKS, OK = "breaks", "unaffected"

CHECKS: list[Check] = [
    # --- Anthropic Messages: stream grammar -------------------------------------------------------
    _c("AN-STREAM-001", "anthropic", "The stream opens with message_start and ends with message_stop", MUST,
       "API_FACTS: Anthropic stream events", "send message_start first and message_stop last, after message_delta",
       "an-missing-message-stop",
       rules=("AN-GRAMMAR-START", "AN-GRAMMAR-MESSAGE-START", "AN-GRAMMAR-ORDER", "AN-GRAMMAR-AFTER-STOP",
              "AN-GRAMMAR-STOP-MISSING"), clients={CC: OK, OC: OK}),
    _c("AN-STREAM-002", "anthropic", "Each content block's index equals its position (0, 1, 2, ...)", MUST,
       "API_FACTS: block index equals the block's position", "number blocks by their position in content[]",
       "an-block-index-skip", rules=("AN-GRAMMAR-INDEX",), clients={CC: OK, OC: OK}),
    _c("AN-STREAM-003", "anthropic", "Every block is started, streamed and stopped; one block open at a time", MUST,
       "API_FACTS: content_block_start / delta / stop per block",
       "close each block with content_block_stop before the next starts; never send deltas after the stop",
       ("an-missing-block-stop", "an-delta-unstarted-block"),
       rules=("AN-GRAMMAR-ONE-OPEN", "AN-GRAMMAR-BLOCK-START", "AN-GRAMMAR-BLOCK-UNKNOWN", "AN-GRAMMAR-BLOCK-CLOSED",
              "AN-GRAMMAR-BLOCK-UNSTOPPED"), clients={CC: BREAKS, OC: OK}),
    _c("AN-STREAM-004", "anthropic", "Delta types match their block (no text_delta in a tool_use block)", MUST,
       "API_FACTS: delta types by block", "send input_json_delta for tool_use, thinking_delta for thinking",
       "an-delta-type-mismatch", rules=("AN-GRAMMAR-DELTA-TYPE",), clients={CC: BREAKS}),
    _c("AN-STREAM-005", "anthropic", "A thinking block gets its signature_delta before its stop", MUST,
       "API_FACTS: signature_delta just before its stop", "emit signature_delta, then content_block_stop",
       "an-signature-after-stop", rules=("AN-GRAMMAR-SIGNATURE",), clients={CC: OK}),
    _c("AN-STREAM-006", "anthropic", "A tool_use block starts complete and its partial_json joins to an object", MUST,
       "API_FACTS: content_block_start of tool_use; concatenated partial_json parses", "stream the input JSON "
       "as fragments of one object; put id and the whole name in content_block_start", "invalid-tool-json",
       rules=("AN-GRAMMAR-TOOL-START", "AN-GRAMMAR-TOOL-JSON"), clients={CC: BREAKS, OC: BREAKS}),
    _c("AN-STREAM-007", "anthropic", "stop_reason is tool_use exactly when the message ends with tool_use blocks",
       MUST, "API_FACTS: stop_reason", "answer stop_reason tool_use after tool calls the client must run",
       "an-end-turn-after-tool-use", rules=("AN-GRAMMAR-STOP-REASON", "AN-GRAMMAR-STOP-TOOL-USE"),
       clients={CC: OK, OC: BREAKS}),
    _c("AN-STREAM-008", "anthropic", "SSE event names equal the data's type; every data line is JSON", MUST,
       "API_FACTS: the SSE event name equals the data's type", "write `event: <type>` for every frame",
       "an-event-name-mismatch",
       rules=("AN-GRAMMAR-EVENT-NAME", "AN-GRAMMAR-JSON", "AN-GRAMMAR-DONE", "AN-GRAMMAR-UNKNOWN-EVENT",
              "AN-GRAMMAR-ERROR-EVENT", "AN-GRAMMAR-AFTER-ERROR"), clients={CC: BREAKS}),
    _c("AN-STREAM-009", "anthropic", "message_delta carries cumulative usage with output_tokens", MUST,
       "API_FACTS: message_delta.usage is cumulative; output_tokens required", "send usage in message_delta",
       "an-usage-missing", rules=("AN-GRAMMAR-DELTA-USAGE",)),
    _c("AN-SDK-001", "anthropic", "The anthropic SDK's stream helper folds every scenario to the non-stream answer",
       MUST, "API_FACTS: SDK accumulate_event", "follow the event grammar; keep streamed and non-streamed "
       "content equal", ("an-block-index-skip", "invalid-tool-json", "an-usage-missing", "an-delta-unstarted-block"),
       witness="anthropic SDK",
       clients={CC: OK, OC: OK}),
    _c("AN-DISPATCH-001", "anthropic", "A tool_use block closes when its call is complete, not at the end of the turn",
       SHOULD, "article 2: content_block_stop != message_stop", "stream tool calls as they are parsed",
       "buffer-tool-calls", witness="frame timing"),
    # --- Anthropic usage, routes, request acceptance, errors -------------------------------------
    _c("AN-USAGE-001", "anthropic", "message_start's prompt total equals count_tokens (not 0, not an estimate)", MUST,
       "API_FACTS: total prompt = input_tokens + cache_creation + cache_read; count_tokens answers the total",
       "fill message_start usage from the real tokenized prompt before the stream starts (Dynamo PR #7234)",
       ("message-start-zero-input-tokens", "message-start-estimated-input-tokens", "count-tokens-mismatch"),
       witness="count_tokens", clients={CC: OK}),
    _c("AN-USAGE-002", "anthropic", "message_start's prompt total equals the final usage's total", MUST,
       "API_FACTS: usage in message_start must agree with the final usage",
       "report the same prompt accounting at the start and the end",
       ("message-start-zero-input-tokens", "message-start-estimated-input-tokens"),
       clients={CC: OK}),
    _c("AN-USAGE-003", "anthropic", "input_tokens of an uncached prompt is not 0 in message_start", MUST,
       "API_FACTS: a message_start total of 0 is a bug (Dynamo PR #7234)", "count the prompt before streaming",
       "message-start-zero-input-tokens",
       clients={CC: OK}),
    _c("AN-ROUTE-001", "anthropic", "GET /v1/models answers the Anthropic list shape when anthropic-version is sent",
       SHOULD, "API_FACTS: GET /v1/models", "answer {data:[{id,type:'model',...}], has_more, first_id, last_id}",
       "anthropic-models-shape-ignored"),
    _c("AN-ROUTE-002", "any", "GET /v1/models/{id} works for an id containing '/', sent raw", MUST,
       "API_FACTS: /v1/models/{model_id} with '/'; article 1: 404 on nvidia/...",
       "route the rest of the path as the id", "model-slash-404"),
    _c("AN-ROUTE-003", "any", "GET /v1/models/{id} works with the '/' percent-encoded as %2F (as the SDKs send)", MUST,
       "API_FACTS: both SDKs percent-encode path parameters", "percent-decode the id",
       ("model-slash-404", "model-percent-2f-not-decoded")),
    _c("AN-REQ-001", "anthropic", "cache_control is accepted on tools, system blocks and message blocks", MUST,
       "API_FACTS: a server that does no caching must still accept cache_control", "accept and ignore it",
       "reject-cache-control", clients={CC: BREAKS, OC: BREAKS}),
    _c("AN-REQ-002", "anthropic", "role: system entries inside messages are accepted", MUST,
       "API_FACTS: Claude Code sends role system entries; servers hoist them", "hoist or render them in place",
       "reject-system-role", clients={CC: BREAKS}),
    _c("AN-REQ-003", "anthropic", "Claude Code's request shape is accepted (?beta=true, betas, adaptive thinking, "
       "context_management, output_config, unknown fields)", MUST, "API_FACTS: what the real clients send",
       "tolerate unknown fields and query strings", ("reject-unknown-fields", "reject-cache-control"),
       clients={CC: BREAKS, OC: BREAKS}),
    _c("AN-ERR-001", "anthropic", "Bad requests get 4xx with the Anthropic error shape, never 5xx", MUST,
       "API_FACTS: Anthropic errors", "validate input; answer {type:error, error:{type,message}}",
       ("bad-input-500", "wrong-error-shape")),
    _c("AN-ERR-002", "any", "An unknown model id gets 404 in the API's error shape", MUST,
       "API_FACTS: unknown id -> 404 not_found_error", "answer 404 not_found_error", "wrong-error-shape"),
    _c("AN-PREAMBLE-001", "anthropic", "A per-session billing header does not defeat prefix-cache reuse", SHOULD,
       "article 1: --strip-anthropic-preamble; 168 / 912 / 169 ms",
       "strip x-anthropic-billing-header before tokenizing", "preamble-not-stripped",
       witness="cache usage, else timing"),
    _c("AN-PREAMBLE-002", "anthropic", "The billing header as the only system block is stripped too", SHOULD,
       "API_FACTS: the header as the only system block is a case the simple strip misses",
       "strip the header line wherever it ends", ("preamble-simple-strip", "preamble-not-stripped"),
       witness="cache usage, else timing"),
    # --- Multi-turn history (article 1) ----------------------------------------------------------
    _c("AN-HIST-001", "anthropic", "Interleaved reasoning and tool calls come back in order (r0 t0 r1 t1)", MUST,
       "article 1: <think>r0</think> t0 <think>r1</think> t1 must not be flattened or stripped on agent turns",
       "rebuild assistant turns part by part; keep reasoning bound to tool calls (truncate_history_thinking=false)",
       ("flatten-interleaved-reasoning", "truncate-agent-reasoning", "invalid-tool-json"),
       witness="/tokenize, cache usage or timing"),
    _c("AN-HIST-002", "anthropic", "Turn N's prompt and output come back verbatim as turn N+1's prefix", SHOULD,
       "DESIGN: turn N's prompt + output is a token prefix of turn N+1's prompt; article 1: 167 vs 322 ms",
       "render history exactly as generated (no reordering, truncation or rewriting)",
       ("truncate-agent-reasoning", "rewrite-history-reasoning"), witness="cache usage, timing or /tokenize"),
    _c("CH-HIST-002", "chat", "Turn N's prompt and output come back verbatim as turn N+1's prefix (Chat)", SHOULD,
       "DESIGN: the prefix property; Chat carries reasoning_content", "keep reasoning_content on agent turns",
       ("truncate-agent-reasoning", "rewrite-history-reasoning"), witness="cache usage, timing or /tokenize"),
    _c("RS-HIST-001", "responses", "Interleaved reasoning items and function calls come back in order", MUST,
       "article 1: interleaved reasoning; API_FACTS: reasoning items with encrypted_content",
       "rebuild reasoning and function_call items in their original order",
       ("flatten-interleaved-reasoning", "truncate-agent-reasoning", "rs-missing-call-id", "invalid-tool-json"),
       witness="/tokenize, cache usage or timing"),
    _c("RS-HIST-002", "responses", "Turn N's prompt and output come back verbatim as turn N+1's prefix (Responses)",
       SHOULD, "DESIGN: the prefix property", "replay reasoning items exactly",
       ("truncate-agent-reasoning", "rewrite-history-reasoning"), witness="cache usage, timing or /tokenize"),
    _c("AN-HIST-003", "anthropic", "Thinking stays on when the client does not turn it off", SHOULD,
       "article 1: with a reasoning parser configured and thinking not disabled, enable_thinking=true",
       "enable thinking unless the request disables it", "thinking-off-by-default",
       witness="thinking blocks with and without the thinking field"),
    # --- Chat Completions -------------------------------------------------------------------------
    _c("CH-STREAM-001", "chat", "Tool-call deltas carry id, type and name only in the first delta of an index", MUST,
       "API_FACTS: the SDK concatenates every string field per index", "send id/name once per index",
       "chat-repeat-tool-id-name", rules=("CH-GRAMMAR-TOOL-FIRST", "CH-GRAMMAR-TOOL-REPEAT", "CH-GRAMMAR-TOOL-INDEX")),
    _c("CH-STREAM-002", "chat", "Tool-call arguments join to a JSON object per index", MUST,
       "API_FACTS: concatenated arguments per index parse as a JSON object", "stream fragments of one object",
       "invalid-tool-json", rules=("CH-GRAMMAR-TOOL-ARGS",), clients={OC: BREAKS}),
    _c("CH-STREAM-003", "chat", "finish_reason is tool_calls when the turn ends in tool calls", MUST,
       "API_FACTS: finish_reason tool_calls", "answer finish_reason tool_calls",
       "chat-finish-stop-after-tool-calls", rules=("CH-GRAMMAR-FINISH-TOOL-CALLS", "CH-GRAMMAR-FINISH-REASON", "CH-GRAMMAR-FINISH-ONCE",
              "CH-GRAMMAR-AFTER-FINISH"),
       clients={OC: OK}),
    _c("CH-STREAM-004", "chat", "stream_options.include_usage adds one usage chunk with choices [] before [DONE]",
       MUST, "API_FACTS: stream_options.include_usage", "send the usage chunk", "chat-no-usage-chunk",
       rules=("CH-GRAMMAR-USAGE-CHUNK",)),
    _c("CH-STREAM-005", "chat", "The stream ends with data: [DONE]; chunks share one id and object type", MUST,
       "API_FACTS: Chat streaming", "end with data: [DONE]", "chat-no-done",
       rules=("CH-GRAMMAR-DONE", "CH-GRAMMAR-OBJECT", "CH-GRAMMAR-ID", "CH-GRAMMAR-JSON", "CH-GRAMMAR-EVENT-NAME",
              "CH-GRAMMAR-CHOICES", "CH-GRAMMAR-ERROR")),
    _c("CH-SDK-001", "chat", "The openai SDK's chat stream helper folds every scenario to the non-stream answer",
       MUST, "API_FACTS: openai-python lib/streaming/_deltas.py", "send id and name once per index",
       ("chat-repeat-tool-id-name", "invalid-tool-json"), witness="openai SDK"),
    _c("CH-DISPATCH-001", "chat", "Tool-call deltas stream as the call is parsed, not at the end of the turn",
       SHOULD, "article 1: buffered vs inline vs dispatch", "stream tool-call deltas inline", "buffer-tool-calls",
       witness="frame timing"),
    _c("CH-DISPATCH-002", "chat", "tool_call_dispatch frames are well formed, once per call, before the end", SHOULD,
       "API_FACTS: Dynamo --enable-streaming-tool-dispatch", "send one dispatch frame per complete call",
       ("dispatch-missing", "dispatch-twice"), witness="tool-dispatch (when offered)"),
    _c("CH-REQ-001", "chat", "nvext.agent_hints and unknown fields are accepted", MUST,
       "API_FACTS: Dynamo request extensions: must be accepted, never rejected", "ignore unknown fields",
       "reject-unknown-fields"),
    _c("CH-ERR-001", "chat", "Bad requests get 4xx with the OpenAI error shape, never 5xx", MUST,
       "API_FACTS: errors", "answer {error:{message,type,param,code}}", ("bad-input-500", "wrong-error-shape")),
    _c("CH-TOKENIZE-001", "any", "tokenize / detokenize round-trip a prompt (when offered)", SHOULD,
       "API_FACTS: tokenizer endpoints", "decode with special tokens kept", "detokenize-drops-special",
       witness="/tokenize"),
    # --- Responses --------------------------------------------------------------------------------
    _c("RS-STREAM-001", "responses", "sequence_number increases by exactly one", MUST,
       "API_FACTS: every event has an integer sequence_number, increasing by one", "number every event",
       "rs-sequence-gap", rules=("RS-GRAMMAR-SEQUENCE",),
       clients={CODEX: OK}),
    _c("RS-STREAM-002", "responses", "Each output item runs added -> parts/deltas -> done, in order", MUST,
       "API_FACTS: Responses event order", "close every item with response.output_item.done",
       "rs-missing-output-item-done", rules=("RS-GRAMMAR-ITEM-ORDER", "RS-GRAMMAR-ITEM-IDS",
                                              "RS-GRAMMAR-ITEM-UNCLOSED", "RS-GRAMMAR-TEXT-DONE",
                                              "RS-GRAMMAR-OUTPUT-INDEX", "RS-GRAMMAR-COMPLETED-OUTPUT")),
    _c("RS-STREAM-003", "responses", "function_call_arguments.done equals the joined deltas and the item", MUST,
       "API_FACTS: .done carries the final arguments, equal to the concatenated deltas", "send the joined text",
       "rs-arguments-done-mismatch", rules=("RS-GRAMMAR-ARGS-DONE",),
       clients={CODEX: OK}),
    _c("RS-STREAM-004", "responses", "The stream ends with response.completed (or failed / incomplete)", MUST,
       "API_FACTS: Codex fails a turn without response.completed", "always send the terminal event",
       "rs-missing-completed", rules=("RS-GRAMMAR-COMPLETED", "RS-GRAMMAR-CREATED", "RS-GRAMMAR-IN-PROGRESS",
                                      "RS-GRAMMAR-USAGE", "RS-GRAMMAR-ERROR", "RS-GRAMMAR-JSON", "RS-GRAMMAR-EVENT-NAME",
                                      "RS-GRAMMAR-UNKNOWN-EVENT"), clients={CODEX: BREAKS, OC: BREAKS}),
    _c("RS-STREAM-005", "responses", "A function_call item has name and call_id at output_item.added", MUST,
       "API_FACTS: function_call item; Codex drops calls without call_id", "send call_id and name at once",
       "rs-missing-call-id", rules=("RS-GRAMMAR-FUNCTION-CALL",), clients={CODEX: BREAKS, OC: BREAKS}),
    _c("RS-STREAM-006", "responses", "function_call arguments join to a JSON object", MUST,
       "API_FACTS: arguments join to valid JSON", "stream fragments of one object", "invalid-tool-json",
       rules=("RS-GRAMMAR-ARGS-JSON",), clients={CODEX: BREAKS, OC: BREAKS}),
    _c("RS-SDK-001", "responses", "The openai SDK's Responses stream helper folds every scenario to the "
       "non-stream answer", MUST, "openai-python responses stream helper", "end streams with response.completed",
       ("rs-missing-completed", "rs-missing-call-id", "invalid-tool-json"), witness="openai SDK",
       clients={CODEX: BREAKS, OC: BREAKS}),
    _c("RS-DISPATCH-001", "responses", "function_call_arguments.done arrives when the call is complete, not at the end",
       SHOULD, "article 2", "stream calls as they are parsed", "buffer-tool-calls", witness="frame timing"),
    _c("RS-STATE-001", "responses", "previous_response_id continues the conversation (prior input, output, new input)",
       MUST, "API_FACTS: previous_response_id order", "store responses and prepend them",
       ("rs-ignore-previous-response-id", "invalid-tool-json"), witness="/tokenize or cache usage"),
    _c("RS-STATE-002", "responses", "Reasoning items carry encrypted_content when include asks for it", SHOULD,
       "API_FACTS: include reasoning.encrypted_content", "return encrypted_content", "rs-no-encrypted-content"),
    _c("RS-REQ-001", "responses", "Codex's request shape is accepted (zstd body, store false, include, "
       "prompt_cache_key, client_metadata, developer item, unknown item fields)", MUST,
       "API_FACTS: what Codex sends; article 1: request compression", "accept Content-Encoding zstd and "
       "unknown fields", ("reject-compressed-body", "reject-unknown-fields"), clients={CODEX: BREAKS}),
    _c("RS-REQ-002", "responses", "store, parallel_tool_calls and text.verbosity are echoed in the response", SHOULD,
       "API_FACTS: request fields that must survive the server", "keep the Responses fields end to end",
       "rs-fields-dropped"),
    _c("RS-ERR-001", "responses", "Bad Responses requests get 4xx with the OpenAI error shape", MUST,
       "API_FACTS: errors", "validate input items", ("bad-input-500", "wrong-error-shape")),
]

BY_ID: dict[str, Check] = {c.id: c for c in CHECKS}
assert len(BY_ID) == len(CHECKS), "duplicate check id"


def get(check_id: str) -> Check:
    try:
        return BY_ID[check_id]
    except KeyError:
        raise KeyError(f"unknown check {check_id!r}") from None


def checks_for_fault(fault: str) -> list[Check]:
    return [c for c in CHECKS if fault in c.faults]
