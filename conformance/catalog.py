"""Every conformance check as data: the single list that the pytest suites, the fault matrix and
the report's tables are drawn from (STYLE.md, rule 1).

A check has a stable id (`AN-STREAM-003`: API, contract, number), a title, the line of
docs/API_FACTS.md it stands on, a remedy hint and the reference-server faults that must make it
fail. A *rule* is the unit a verdict speaks of: a grammar rule (`AN-GRAMMAR-INDEX`, from
conformance/grammar) or a contract rule (the check's own id, or `ID:part` for a second rule of one
check). ``RULE_CHECK`` is the one table from a rule to the check that fails on it; a check's rules
are read from it. Each rule has a level and the evidence that holds it
(``RULES``): MUST only where the official API reference requires it (``reference:``), an official
SDK breaks (``sdk:``) or a measured real client breaks (``client:``); everything else is SHOULD
(``none:`` says why it is still worth a check). A failing result weighs what its failing rule
weighs; a check's level is the highest level of its rules. ``INFORMATIONAL`` rules are recorded
and shown, never failed (what the references allow).

A check's entry also says how the kit runs it, as keyword fields of ``Check`` (``timing``: it holds
the endpoint alone; ``levers``: which levers may bend its requests; ``judges_refused_history``;
``client_shape`` and ``replays_client``): plugin.py, levers.py, results.py and impact.py read them and
name no check (tests/conformance/test_check_entry.py). docs/architecture.md, "Adding a check", is the
recipe.

Why one module (over 1,100 lines): it is data, the one list every other part reads, and its tables
refer to one another (a check's level is the highest of its rules; a rule's check comes from
RULE_CHECK; a fault's planted rules must fail one of the checks that catch it). Split by API or by
contract, each part would need the others' rules and evidence strings, and the tests that prove the
tables agree (test_coverage.py, test_self_conformance.py) would read several modules for one fact.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from harnesscheck.errors import HarnesscheckError
from harnesscheck.protocol import apis
from harnesscheck.conformance.outcome import Level
from harnesscheck.reference_server.faults import FAULTS

MUST, SHOULD = Level.MUST, Level.SHOULD
# The APIs this catalog's data is written for (their checks, and rules with the evidence of each API's own
# reference): the ones the kit ships, as (check-id prefix, name). An API registered later (apis.register)
# is bound at call time: the families whose rules hold for any API (``GENERIC_FAMILIES``), or a clear
# refusal (``family``); tests/conformance/test_fourth_api.py. ``APIS``: every registered API, read when asked.
SHIPPED: tuple[tuple[str, str], ...] = (("AN", "anthropic"), ("CH", "chat"), ("RS", "responses"))
_PREFIXES = tuple(p for p, _ in SHIPPED)
ANY = "any"  # the `api` of a check that no single API owns (routes, errors, tokenize)


@dataclass(frozen=True, slots=True)
class Rule:
    id: str
    level: Level
    evidence: str  # "reference: ...", "sdk: ...", "client: ..." (MUST) or "none: ..." (SHOULD)

    @property
    def evidence_kind(self) -> str:
        return self.evidence.split(":", 1)[0]


def _r(level: Level, evidence: str) -> tuple[Level, str]:
    return level, evidence


def _turn_rules(p: str) -> dict[str, tuple[Level, str]]:
    """The rules of the TURN family of the API with check-id prefix ``p`` (their evidence holds for any API)."""
    return {
        f"{p}-TURN-001": _r(MUST, "reference: Anthropic and OpenAI errors: a request the server cannot take is a "
                                  "4xx (invalid_request_error); a 5xx says the server itself failed (api_error)"),
        f"{p}-TURN-001:refused": _r(SHOULD, "none: a follow-up built from the endpoint's own complete answer "
                                            "refused with a 4xx stops the agent; no measured client run hit it"),
    }


# References, cited once (docs/API_FACTS.md has the lines).
_AN_FLOW = "reference: Anthropic streaming docs, event flow (message_start, blocks of start/delta/stop, " \
           "message_delta, message_stop)"
_AN_SDK = "sdk: anthropic-sdk-python lib/streaming/_messages.py accumulate_event"
_AN_SDK_SSE = "sdk: anthropic-sdk-python _streaming.py Stream.__stream__ skips SSE events with no event name"
_OA_SDK = "sdk: openai-python _streaming.py / lib/streaming"
_CHAT_REF = "reference: OpenAI Chat Completions streaming (chat.completion.chunk object)"
_RS_REF = "reference: OpenAI Responses streaming events"

_CC, _CX = "Claude Code 2.1.197", "Codex 0.171.0"
_OC = "OpenClaw 2026.9.6"
# the recorded client sessions' checks (test_client_sessions.py) -> whose session
# -> (whose session, the client's key in conformance/impact.json: the entry's client_shape)
_CLIENT_CHECKS = {"AN-CLIENT-001": (_CC, "claude-code"), "AN-CLIENT-002": (f"{_OC} (Messages)", "openclaw"),
                  "RS-CLIENT-001": (f"{_CX} (gpt-5.5 catalog profile)", "codex"),
                  "RS-CLIENT-002": (f"{_CX} (fallback profile)", "codex"),
                  "RS-CLIENT-003": (f"{_OC} (Responses)", "openclaw:responses"),
                  "CH-CLIENT-001": (f"{_OC} (Chat Completions)", "openclaw:chat")}
_PLAIN_TURN = ("none: model-dependent (the seed: dropping thinking on plain turns is right for one model and wrong "
               "for another; Qwen3's template trims reasoning before the last user query); within the agent loop "
               "the check's own rule holds (MUST)")
_ERR_REF = "reference: Anthropic and OpenAI errors: a request the API cannot take is a 4xx in its error shape"
_CTX_RULES: dict[str, tuple[Level, str]] = {
    # docs/API_FACTS.md "Context overflow": measured with agents/clients/overflow.py (a session grown past the
    # reference server's --context-window under each overflow form)
    "AN-CTX-001": _r(MUST, f"{_ERR_REF}; client: {_CC} compacts on the API's own 400 and goes on, but fails the "
                           "run on {'detail': ...} (fault overflow-detail-shape) and, after 10 retries (177 s), "
                           "on a 500 (fault overflow-500)"),
    "AN-CTX-001:marker": _r(MUST, f"client: {_CC} compacts only when the message says 'prompt is too long' (its own "
                                  "test); a 400 in the API's shape without it fails the run (fault overflow-bare-400)"),
    "CH-CTX-001": _r(MUST, f"{_ERR_REF} (OpenAI answers an over-long prompt with a 400, code "
                           "context_length_exceeded); no measured client runs Chat to the window"),
    "CH-CTX-001:marker": _r(SHOULD, "none: OpenAI's code context_length_exceeded; no measured client runs Chat to "
                                    "the window"),
    "RS-CTX-001": _r(MUST, f"{_ERR_REF}; client: {_CX} fails the run when its compaction request is refused as "
                           "{'detail': ...} (fault overflow-detail-shape), and retries a 500 thirty times (~31 s) "
                           "before failing (fault overflow-500)"),
    "RS-CTX-001:marker": _r(MUST, f"client: {_CX} compacts on its own usage meter and, when its compaction "
                                  "request is itself over the window, drops the oldest history item and retries "
                                  "only on the code context_length_exceeded; a 400 without it fails the run (fault "
                                  "overflow-bare-400, measured); an ordinary turn ends on any refusal"),
    "AN-CTX-002": _r(SHOULD, f"none: {_CC}'s context meter reads the usage: counting only the new turn, it never "
                             "compacts on its own, hits the window and compacts on the refusal instead (one refused "
                             "request; fault usage-current-turn-only, measured)"),
    "CH-CTX-002": _r(SHOULD, "none: a context meter fed by the usage compacts too late or never (issue 30); no "
                             "measured client runs Chat to the window"),
    "RS-CTX-002": _r(MUST, f"client: {_CX} (gpt-5.5 and fallback profiles) compacts on its usage meter only: "
                           "counting only the new turn it never compacts and the window ends the turn (fault "
                           "usage-current-turn-only, measured)"),
    "AN-CTX-003": _r(SHOULD, "none: as AN-CTX-002, over a 30-turn session"),
    "CH-CTX-003": _r(SHOULD, "none: as CH-CTX-002, over a 30-turn session"),
    "RS-CTX-003": _r(MUST, f"client: as RS-CTX-002 ({_CX} breaks), over a 30-turn session"),
    "AN-CTX-003:window": _r(MUST, f"{_ERR_REF}; client: as AN-CTX-001, at the end of a session"),
    "CH-CTX-003:window": _r(MUST, f"{_ERR_REF} (as CH-CTX-001, at the end of a session)"),
    "RS-CTX-003:window": _r(MUST, f"{_ERR_REF}; client: as RS-CTX-001, at the end of a session"),
    "AN-CTX-003:marker": _r(MUST, "client: as AN-CTX-001:marker, at the end of a session"),
    "CH-CTX-003:marker": _r(SHOULD, "none: as CH-CTX-001:marker, at the end of a session"),
    "RS-CTX-003:marker": _r(MUST, "client: as RS-CTX-001:marker, at the end of a session"),
    **{f"{p}-CTX-004": _r(SHOULD, "none: a cache-reuse goal (each turn's prompt is the next turn's prefix; article 1)")
       for p in _PREFIXES},
    # the real clients' recorded sessions replayed (test_client_sessions.py; scenarios/clients)
    **{r: lvl for check, (who, _) in _CLIENT_CHECKS.items() for r, lvl in (
        (check, _r(MUST, f"client: {who} sends exactly this request (recorded); a refused request ends its turn "
                         "(CL-ANSWERED, measured: reject-cache-control, reject-system-role, reject-unknown-fields)")),
        (f"{check}:grammar", _r(MUST, "reference: the API's MUST grammar rules (each with its own reference, sdk "
                                      f"or client evidence), on the answers {who} reads")),
        (f"{check}:roundtrip", _r(MUST, f"client: {who} sends the endpoint's answer back in its next request; a "
                                        "call it cannot send back or a refusal of it ends its turn (measured: "
                                        "invalid-tool-json, rs-missing-call-id)")))},
}

_RULE_TABLE: dict[str, tuple[Level, str]] = {
    # --- Anthropic grammar ---
    "AN-GRAMMAR-JSON": _r(MUST, _AN_SDK_SSE + " and parses every data line as JSON"),
    "AN-GRAMMAR-DONE": _r(SHOULD, "none: not Anthropic's framing; the SDK ignores it and Claude Code works against "
                                  "Dynamo 1.6.1, which sends it"),
    "AN-GRAMMAR-EVENT-LINE": _r(MUST, _AN_SDK_SSE),
    "AN-GRAMMAR-EVENT-NAME": _r(MUST, "client: Claude Code 2.1.197 breaks (fault an-event-name-mismatch on delta "
                                      "frames, conformance/impact.json)"),
    "AN-GRAMMAR-START": _r(MUST, _AN_SDK + " raises on events before message_start"),
    "AN-GRAMMAR-MESSAGE-START": _r(MUST, "reference: Anthropic streaming docs, message_start carries a Message with "
                                         "empty content; Usage.input_tokens/output_tokens required"),
    "AN-GRAMMAR-ORDER": _r(MUST, _AN_FLOW),
    "AN-GRAMMAR-INDEX": _r(MUST, _AN_SDK + " indexes the snapshot's content by the event's index"),
    "AN-GRAMMAR-ONE-OPEN": _r(SHOULD, "none: implied by the event flow, not stated; no measured client breaks"),
    "AN-GRAMMAR-BLOCK-START": _r(MUST, _AN_SDK + " appends content_block"),
    "AN-GRAMMAR-BLOCK-UNKNOWN": _r(MUST, "client: Claude Code 2.1.197 'Content block not found' (fault "
                                         "an-delta-unstarted-block)"),
    "AN-GRAMMAR-BLOCK-CLOSED": _r(MUST, "client: Claude Code 2.1.197 prints corrupted text (API_FACTS, measured)"),
    "AN-GRAMMAR-BLOCK-UNSTOPPED": _r(MUST, _AN_FLOW),
    "AN-GRAMMAR-DELTA-TYPE": _r(MUST, "client: Claude Code 2.1.197 breaks (fault an-delta-type-mismatch)"),
    "AN-GRAMMAR-SIGNATURE": _r(SHOULD, "none: the SDK folds a late signature by index; no measured client breaks"),
    "AN-GRAMMAR-SIGNATURE-MISSING": _r(SHOULD, "none: a backend without signatures; Claude Code 2.1.197 sends the "
                                               "empty signature back without trouble"),
    "AN-GRAMMAR-TOOL-START": _r(MUST, "reference: Anthropic streaming docs, tool_use content_block_start has id, "
                                      "name and input {}"),
    "AN-GRAMMAR-TOOL-JSON": _r(MUST, "client: Claude Code 2.1.197 and OpenClaw break (fault invalid-tool-json)"),
    "AN-GRAMMAR-DELTA-USAGE": _r(MUST, _AN_SDK + " reads message_delta.usage.output_tokens"),
    "AN-GRAMMAR-STOP-REASON": _r(MUST, "reference: Anthropic Messages stop_reason values"),
    "AN-GRAMMAR-STOP-TOOL-USE": _r(MUST, "client: OpenClaw 2026.9.6 breaks (fault an-end-turn-after-tool-use)"),
    "AN-GRAMMAR-AFTER-STOP": _r(MUST, _AN_FLOW),
    "AN-GRAMMAR-STOP-MISSING": _r(MUST, _AN_FLOW),
    "AN-GRAMMAR-AFTER-ERROR": _r(SHOULD, "none: an error event ends the stream (streaming docs); what follows is "
                                         "ignored by the SDK"),
    # --- Chat grammar ---
    "CH-GRAMMAR-JSON": _r(MUST, _OA_SDK + " parses every data line as JSON"),
    "CH-GRAMMAR-EVENT-NAME": _r(SHOULD, "none: Chat SSE has no event names; the SDK reads data only"),
    "CH-GRAMMAR-OBJECT": _r(MUST, _CHAT_REF + ": object is always chat.completion.chunk"),
    "CH-GRAMMAR-ID": _r(MUST, _CHAT_REF + ": each chunk has the same id"),
    "CH-GRAMMAR-CHOICES": _r(MUST, _OA_SDK + " chat stream helper folds choices by index"),
    "CH-GRAMMAR-TOOL-INDEX": _r(MUST, _OA_SDK + " lib/streaming/_deltas.py merges tool calls by index"),
    "CH-GRAMMAR-TOOL-FIRST": _r(SHOULD, "none: a late name joins correctly in the SDK; noticed by no measured client"),
    "CH-GRAMMAR-TOOL-REPEAT": _r(MUST, _OA_SDK + " lib/streaming/_deltas.py concatenates every string field "
                                       "(a repeated id or name arrives doubled)"),
    "CH-GRAMMAR-TOOL-ARGS": _r(MUST, "client: OpenClaw 2026.9.6 breaks (fault invalid-tool-json)"),
    "CH-GRAMMAR-FINISH-REASON": _r(MUST, _CHAT_REF + ": finish_reason values"),
    "CH-GRAMMAR-FINISH-ONCE": _r(MUST, _CHAT_REF + ": finish_reason is null until the choice finishes"),
    "CH-GRAMMAR-AFTER-FINISH": _r(SHOULD, "none: content after finish_reason is folded by the SDK"),
    "CH-GRAMMAR-FINISH-TOOL-CALLS": _r(MUST, _CHAT_REF + ": tool_calls if the model called a tool"),
    "CH-GRAMMAR-USAGE-CHUNK": _r(MUST, "reference: OpenAI stream_options.include_usage: an additional chunk before "
                                       "data: [DONE] carries usage"),
    "CH-GRAMMAR-USAGE-CHOICES": _r(SHOULD, "none: the reference says that chunk's choices is always []; the SDK and "
                                           "the measured clients read usage from a chunk with choices too"),
    "CH-GRAMMAR-DONE": _r(MUST, _CHAT_REF + ": the stream is terminated by data: [DONE]"),
    # --- Responses grammar ---
    "RS-GRAMMAR-JSON": _r(MUST, _OA_SDK + " parses every data line as JSON"),
    "RS-GRAMMAR-EVENT-NAME": _r(SHOULD, "none: the openai SDK and Codex dispatch on the data's type"),
    "RS-GRAMMAR-SEQUENCE": _r(SHOULD, "none: the reference gives every event a sequence_number; no SDK or measured "
                                      "client depends on the steps (Codex unaffected by rs-sequence-gap)"),
    "RS-GRAMMAR-CREATED": _r(MUST, _RS_REF + ": response.created opens the stream"),
    "RS-GRAMMAR-IN-PROGRESS": _r(SHOULD, "none: response.in_progress is documented; nothing reads it"),
    "RS-GRAMMAR-OUTPUT-INDEX": _r(MUST, _OA_SDK + " lib/streaming/responses indexes output by output_index"),
    "RS-GRAMMAR-ITEM-ORDER": _r(MUST, "client: Codex 0.171.0 returns an empty answer (fault "
                                      "rs-missing-output-item-done)"),
    "RS-GRAMMAR-ITEM-IDS": _r(MUST, _RS_REF + ": item_id names the output item"),
    "RS-GRAMMAR-ITEM-UNCLOSED": _r(MUST, "client: Codex 0.171.0 returns an empty answer (fault "
                                         "rs-missing-output-item-done)"),
    "RS-GRAMMAR-FUNCTION-CALL": _r(MUST, "client: Codex 0.171.0 drops a call without call_id (fault rs-missing-call-id)"),
    "RS-GRAMMAR-ARGS-DONE": _r(SHOULD, "none: Codex unaffected by rs-arguments-done-mismatch; the SDK keeps the deltas"),
    "RS-GRAMMAR-ARGS-JSON": _r(MUST, "client: Codex 0.171.0 and OpenClaw break (fault invalid-tool-json)"),
    "RS-GRAMMAR-TEXT-DONE": _r(SHOULD, "none: output_text.done repeats the deltas; the SDK keeps the deltas"),
    "RS-GRAMMAR-COMPLETED": _r(MUST, "client: Codex 0.171.0 fails the turn (fault rs-missing-completed)"),
    "RS-GRAMMAR-COMPLETED-OUTPUT": _r(MUST, _OA_SDK + " responses stream helper returns response.completed's response"),
    "RS-GRAMMAR-USAGE": _r(SHOULD, "none: Codex reads usage for its context accounting; no measured break"),
    # --- Contract rules (non-grammar checks: the check's own id, or ID:part) ---
    "AN-STREAM-009": _r(MUST, _AN_SDK + " reads message_delta.usage.output_tokens"),
    "AN-SDK-001": _r(MUST, _AN_SDK + " (MessageStream.get_final_message) on the recorded stream"),
    "AN-SDK-001:nonstream": _r(SHOULD, "none: a streamed and a separate non-streamed answer agree only where the "
                                       "endpoint is deterministic"),
    "AN-DISPATCH-001": _r(SHOULD, "none: article 2, a latency goal (content_block_stop != message_stop)"),
    "AN-USAGE-001": _r(SHOULD, "none: Anthropic documents count_tokens as an estimate; harness context accounting "
                               "(article 1, Dynamo PR #7234)"),
    "AN-USAGE-002": _r(SHOULD, "none: harness context accounting (article 1, Dynamo PR #7234); no measured break in "
                               "a two-turn run"),
    "AN-USAGE-003": _r(SHOULD, "none: harness context accounting (article 1, Dynamo PR #7234); Claude Code "
                               "2.1.197 unaffected by message-start-zero-input-tokens, also over a session that "
                               "reaches its compaction threshold: it compacted where it did with correct usage "
                               "(its meter reads the final usage; API_FACTS 'Context overflow', measured)"),
    "AN-ROUTE-001": _r(SHOULD, "none: Dynamo's behaviour; the SDKs send anthropic-version and read data[].id"),
    "CH-ROUTE-001": _r(MUST, "reference: OpenAI Models, list: {object: 'list', data: [Model]}; the Model object's "
                             "id, created, object ('model') and owned_by are all required (openai-python "
                             "types/model.py, generated from the OpenAPI spec: none Optional)"),
    "AN-ROUTE-002": _r(SHOULD, "none: article 1 (404 on nvidia/...); the SDKs send %2F, raw '/' comes from "
                               "hand-written clients"),
    "AN-ROUTE-003": _r(MUST, "sdk: anthropic and openai SDKs percent-encode path parameters (models.retrieve)"),
    "AN-ROUTE-004": _r(SHOULD, "none: article 1: a harness asks GET /v1/models/{id} for its model at start-up and "
                               "Claude Code got a 404 from Dynamo; not measured to break 2.1.197 here (`claude -p` "
                               "sends no such request)"),
    "AN-REQ-001": _r(MUST, "client: Claude Code 2.1.197 and OpenClaw break (fault reject-cache-control)"),
    "AN-REQ-002": _r(MUST, "client: Claude Code 2.1.197 breaks (fault reject-system-role)"),
    "AN-REQ-003": _r(MUST, "client: Claude Code 2.1.197 breaks (fault reject-unknown-fields)"),
    "AN-ERR-001": _r(MUST, "reference: Anthropic errors (4xx, {type: error, error: {type, message}})"),
    # Accepting a malformed request (a 2xx) is leniency: the references describe what the vendor refuses,
    # and no SDK or client breaks on an answer; a 5xx or a refusal outside the shape stays MUST (above).
    **{f"{p}-ERR-001:lenient": _r(SHOULD, "none: a malformed request answered 2xx breaks no official SDK or "
                                          "measured client (API_FACTS, request validation: accepting is at "
                                          "most SHOULD); the API itself refuses it with a 400")
       for p in _PREFIXES},
    "AN-ERR-002": _r(MUST, "reference: Anthropic and OpenAI errors: an unknown model is 404 not_found"),
    "AN-ERR-002:shape": _r(SHOULD, "none: the Anthropic errors reference gives every error the {type: error, error: "
                                   "{type, message}} shape, but the SDKs raise NotFoundError on the status whatever "
                                   "the body, and no measured client reads a 404's body"),
    "AN-ERR-002:generation": _r(SHOULD, "none: the references answer an unknown model with 404, but serving one "
                                        "model under any name (or another 4xx in shape) accepts a lenient request "
                                        "and breaks no measured client"),
    # a follow-up turn (test_turns.py): a later turn's HTTP error is its own finding, not the earlier turn's
    **{r: v for p in _PREFIXES for r, v in _turn_rules(p).items()},
    "AN-PREAMBLE-001": _r(SHOULD, "none: a cache-reuse goal (article 1: 168 / 912 / 169 ms)"),
    "AN-PREAMBLE-002": _r(SHOULD, "none: a cache-reuse goal (API_FACTS: the header as the only system block)"),
    **{f"AN-PREAMBLE-00{n}:cch": _r(SHOULD, "none: a cache-reuse goal for older clients' header (the article's "
                                            "cc_version=0.2.93; cch=<12 hex>==;); Claude Code 2.1.197 writes no "
                                            "cch (measured)") for n in (1, 2)},
    "AN-HIST-001": _r(MUST, "reference: Anthropic extended thinking with tool use: thinking blocks are passed back "
                            "and must not be rearranged or modified (interleaved thinking)"),
    "AN-HIST-002": _r(SHOULD, "none: a cache-reuse goal (article 1: 167 vs 322 ms)"),
    "CH-HIST-002": _r(SHOULD, "none: a cache-reuse goal (article 1)"),
    "RS-HIST-001": _r(MUST, "reference: OpenAI reasoning guide: reasoning items are passed back with the function "
                            "calls they belong to, in order"),
    "RS-HIST-002": _r(SHOULD, "none: a cache-reuse goal (article 1)"),
    # across a later plain user turn the seed leaves past reasoning to the model (Qwen3's template drops it
    # before the last user query, DeepSeek-R1's on every plain turn); within the agent loop it must survive
    "AN-HIST-001:plain-turn": _r(SHOULD, _PLAIN_TURN),
    "RS-HIST-001:plain-turn": _r(SHOULD, _PLAIN_TURN),
    "AN-HIST-003": _r(SHOULD, "none: article 1, fix 3 (enable_thinking=true with a reasoning parser)"),
    "CH-SDK-001": _r(MUST, _OA_SDK + " chat.completions.stream on the recorded stream"),
    "CH-SDK-001:nonstream": _r(SHOULD, "none: a streamed and a separate non-streamed answer agree only where the "
                                       "endpoint is deterministic"),
    "CH-DISPATCH-001": _r(SHOULD, "none: article 1, buffered vs inline vs dispatch (a latency goal)"),
    "CH-DISPATCH-002": _r(SHOULD, "none: Dynamo's optional tool_call_dispatch extension"),
    "CH-REQ-001": _r(SHOULD, "none: nvext.agent_hints is Dynamo's extension (seeds); OpenAI itself rejects unknown "
                             "top-level fields, and OpenClaw was unaffected by reject-unknown-fields"),
    "CH-ERR-001": _r(MUST, "reference: OpenAI errors ({error: {message, type, param, code}}, 4xx)"),
    "CH-TOKENIZE-001": _r(SHOULD, "none: an optional vLLM/Dynamo route"),
    "RS-SDK-001": _r(MUST, _OA_SDK + " responses.stream on the recorded stream"),
    "RS-SDK-001:nonstream": _r(SHOULD, "none: a streamed and a separate non-streamed answer agree only where the "
                                       "endpoint is deterministic"),
    "RS-DISPATCH-001": _r(SHOULD, "none: article 2, a latency goal"),
    "RS-STATE-001": _r(MUST, "reference: OpenAI Responses previous_response_id continues the conversation"),
    "RS-STATE-002": _r(SHOULD, "none: include reasoning.encrypted_content matters with store: false"),
    "RS-REQ-001": _r(MUST, "client: Codex 0.171.0 breaks (fault reject-unknown-fields)"),
    "RS-REQ-001:zstd": _r(SHOULD, "none: Codex compresses bodies only with ChatGPT auth on the OpenAI provider "
                                  "(openai/codex#18677): a refusal breaks Codex on that path only"),
    "RS-REQ-002": _r(SHOULD, "none: fields lost inside a server (article 1, PR #6089)"),
    "RS-ERR-001": _r(MUST, "reference: OpenAI errors ({error: {message, type, param, code}}, 4xx)"),
    "RS-ERR-001:allowed": _r(SHOULD, "none: the reference documents `input` as optional; no measured client sends "
                                     "a request without it"),
    # tool_choice, parallel tool use off, strict arguments, a forced call cut off (test_tool_choice.py)
    "AN-TOOLS-001": _r(MUST, "reference: Anthropic Messages tool_choice is auto, any, tool or none "
                             "(anthropic-sdk-python types/tool_choice_param.py, from the OpenAPI spec)"),
    "AN-TOOLS-001:forced": _r(MUST, "reference: ToolChoiceAny 'The model will use any available tools'; "
                                    "tool-use docs: with any or tool the assistant message is prefilled with "
                                    "a tool use"),
    "AN-TOOLS-001:named": _r(MUST, "reference: ToolChoiceTool 'The model will use the specified tool with "
                                   "tool_choice.name'"),
    "AN-TOOLS-002": _r(MUST, "reference: ToolChoiceNone 'The model will not be allowed to use tools'"),
    "AN-TOOLS-003": _r(MUST, "reference: disable_parallel_tool_use 'If set to true, the model will output "
                             "at most one tool use' (exactly one with any or tool)"),
    "AN-TOOLS-004": _r(MUST, "reference: Anthropic ToolParam.strict 'When true, guarantees schema "
                             "validation on tool names and inputs' (strict tool use docs)"),
    "AN-TOOLS-005": _r(MUST, "reference: Anthropic stop_reason max_tokens: the request's max_tokens was "
                             "reached"),
    "CH-TOOLS-001": _r(MUST, "reference: OpenAI Chat tool_choice is none, auto, required or a named "
                             "function (openai-python chat/completion_create_params.py, OpenAPI spec)"),
    "CH-TOOLS-001:forced": _r(MUST, "reference: Chat tool_choice 'required means the model must call one "
                                    "or more tools'"),
    "CH-TOOLS-001:named": _r(MUST, "reference: Chat tool_choice 'Specifying a particular tool via "
                                   "{\"type\": \"function\", ...} forces the model to call that tool'"),
    "CH-TOOLS-002": _r(MUST, "reference: Chat tool_choice 'none means the model will not call any tool "
                             "and instead generates a message'"),
    "CH-TOOLS-003": _r(MUST, "reference: parallel_tool_calls (function calling guide: false ensures zero "
                             "or one tool is called)"),
    "CH-TOOLS-004": _r(MUST, "reference: FunctionDefinition.strict 'If set to true, the model will follow "
                             "the exact schema defined in the parameters field'"),
    "CH-TOOLS-005": _r(MUST, "reference: Chat finish_reason length: the maximum number of tokens "
                             "specified in the request was reached"),
    "RS-TOOLS-001": _r(MUST, "reference: OpenAI Responses tool_choice is none, auto, required "
                             "(ToolChoiceOptions) or a function (ToolChoiceFunctionParam), openai-python"),
    "RS-TOOLS-001:forced": _r(MUST, "reference: function calling guide, tool_choice required: call one or "
                                    "more functions"),
    "RS-TOOLS-001:named": _r(MUST, "reference: ToolChoiceFunctionParam 'Use this option to force the model "
                                   "to call a specific function'"),
    "RS-TOOLS-002": _r(MUST, "reference: function calling guide, tool_choice none: the model calls no "
                             "function"),
    "RS-TOOLS-003": _r(MUST, "reference: parallel_tool_calls 'Whether to allow the model to run tool calls "
                             "in parallel' (function calling guide: false ensures zero or one call)"),
    "RS-TOOLS-004": _r(MUST, "reference: FunctionToolParam.strict; function calling guide, strict mode: "
                             "the arguments follow the schema (Responses makes an unmarked tool strict)"),
    "RS-TOOLS-005": _r(MUST, "reference: Responses status incomplete with incomplete_details.reason "
                             "max_output_tokens when the output limit cut the response"),
    **{f"{p}-TOOLS-005:markup": _r(SHOULD, "none: the references define no form for a cut call; tool-call "
                                           "markup as text reaches the user as the answer and differs from "
                                           "the streamed tool deltas (vLLM 0.32, measured); no measured "
                                           "client breaks on it")
       for p in _PREFIXES},
    # usage field by field (test_usage.py) and the non-streamed answer's shape (test_shape.py)
    "AN-USAGE-004": _r(SHOULD, "none: message_delta usage is cumulative (Anthropic streaming docs), and "
                               "anthropic-sdk-python accumulate_event overwrites message_start's split with it; a "
                               "client reading usage at message_start gets another split (vLLM 0.32 measured)"),
    "CH-USAGE-001": _r(MUST, "reference: OpenAI Chat CompletionUsage (openai-python types/completion_usage.py, from "
                             "the OpenAPI spec): total_tokens is 'prompt + completion'"),
    "CH-USAGE-001:cached": _r(MUST, "reference: OpenAI Chat CompletionUsage: prompt_tokens_details is a breakdown of "
                                    "the prompt tokens; cached_tokens are 'cached tokens present in the prompt'"),
    "RS-USAGE-001": _r(SHOULD, "none: the Responses reference calls total_tokens 'the total number of tokens used' "
                               "without a formula (Chat's is prompt + completion); Codex reads it (API_FACTS)"),
    "RS-USAGE-001:cached": _r(MUST, "reference: OpenAI Responses ResponseUsage: input_tokens_details is 'a detailed "
                                    "breakdown of the input tokens', cached_tokens among them"),
    "AN-SHAPE-001": _r(MUST, "reference: Anthropic Messages API, Message requiredProperties (id, type, role, content, "
                             "model, usage), required in anthropic-sdk-python types/message.py and usage.py too"),
    "AN-SHAPE-001:stop": _r(SHOULD, "none: the reference requires stop_reason (never null when not streaming) and "
                                    "stop_sequence (nullable), but anthropic-sdk-python types/message.py defaults both "
                                    "to None, so a message without them parses; no measured client reads them"),
    "AN-SHAPE-001:calls": _r(MUST, "reference: Anthropic stop_reason 'tool_use': the model invoked one or more tools, "
                                   "whose tool_use blocks the client runs and answers with tool_result blocks"),
    "CH-SHAPE-001:calls": _r(MUST, "reference: Chat finish_reason 'tool_calls' if the model called a tool: the calls "
                                   "are message.tool_calls, which the client runs"),
    "CH-SHAPE-001": _r(MUST, "reference: OpenAI ChatCompletion (id, object, created, model, choices with index, "
                             "message, finish_reason), required in openai-python types/chat/chat_completion.py too"),
    "RS-SHAPE-001": _r(MUST, "reference: OpenAI Responses Response (id, object, created_at, model, output and each "
                             "item's fields), required in openai-python types/responses/response.py too"),
    "RS-SHAPE-001:status": _r(SHOULD, "none: openai-python types/responses/response.py makes status and usage "
                                      "optional, so a response without them parses; Codex reads usage (API_FACTS)"),
    # the context window and usage across turns (test_context.py; API_FACTS "Context overflow", measured
    # with the real clients by agents/clients/overflow.py)
    **_CTX_RULES,
}

# Request shapes and tool kinds the real clients send (issue 30: test_request_shapes.py, test_tool_kinds.py;
# docs/API_FACTS.md "Request shapes and tool kinds").
_RULE_TABLE.update({
    "RS-TOOLKIND-001": _r(MUST, "reference: openai-python types/responses/tool_param.py ToolParam: function, custom, "
                                "namespace, web_search, local_shell, tool_search and image_generation are Responses "
                                "tools (Codex 0.171.0 sends them: codex-rs tools/src/tool_spec.rs)"),
    "RS-TOOLKIND-002": _r(MUST, "reference: function calling guide, custom tools: the call is a custom_tool_call "
                                "output item whose input is the model's text (openai-python "
                                "response_custom_tool_call.py); a custom tool_choice (ToolChoiceCustomParam) "
                                "forces it"),
    "RS-TOOLKIND-002:call-id": _r(MUST, "client: Codex 0.171.0 drops a call without call_id (fault "
                                        "rs-missing-call-id), custom tool calls as function calls"),
    "RS-TOOLKIND-002:stream": _r(SHOULD, "none: response.custom_tool_call_input.done carries 'the complete input "
                                         "data' (openai-python response_custom_tool_call_input_done_event.py); the "
                                         "SDK and Codex take the call from output_item.done"),
    "RS-TOOLKIND-003": _r(MUST, "reference: openai-python response_input_item_param.py (openai-openapi InputItem): "
                                "custom_tool_call, custom_tool_call_output, tool_search_call and tool_search_output "
                                "are input items"),
    "RS-TOOLKIND-003:ids": _r(MUST, "reference: openai-python response_input_item_param.py: an assistant message "
                                    "(EasyInputMessageParam: role, content) and a function_call "
                                    "(ResponseFunctionToolCallParam) need no id or status; Codex replays them so"),
    **{f"{p}-TOOLS-006": _r(MUST, f"reference: {strict} makes the arguments follow the schema and {forced} forces "
                                  "the call; the streamed arguments are what a client runs")
       for p, strict, forced in (("AN", "ToolParam.strict ('guarantees schema validation on tool names and inputs')",
                                  "tool_choice any"),
                                 ("CH", "FunctionDefinition.strict", "tool_choice required"),
                                 ("RS", "FunctionToolParam.strict", "tool_choice required"))},
    "AN-REQ-004": _r(MUST, "reference: anthropic-sdk-python CacheControlEphemeralParam ttl '5m' | '1h'; "
                           "MessageCreateParams.cache_control (top level: 'applies a cache_control marker to the last "
                           "cacheable block')"),
    "AN-REQ-004:scope": _r(SHOULD, "none: Claude Code 2.1.197 sends cache_control scope 'global' (its binary); not in "
                                   "the SDK's types, refused by the API without Claude Code's beta "
                                   "(horselock/claude-code-proxy#14)"),
    "AN-REQ-004:thinking": _r(SHOULD, "none: Claude Code puts cache_control on a thinking block it sends back "
                                      "(router-for-me/CLIProxyAPI#714, Vertex refused it); ThinkingBlockParam has "
                                      "no cache_control"),
    "AN-REQ-005": _r(MUST, "reference: anthropic-sdk-python ToolResultBlockParam content: text, image, document and "
                           "search_result blocks"),
    "AN-REQ-006": _r(MUST, "reference: anthropic-sdk-python ToolUnionParam: web_search_20250305 and "
                           "web_fetch_20250910 are Messages tools, declared beside client tools"),
    "AN-REQ-006:client": _r(MUST, "reference: Anthropic web search and web fetch tool docs: server tools run on the "
                                  "API's side, their calls come back as server_tool_use blocks with their result "
                                  "blocks, never as tool_use blocks the client must run"),
    "AN-REQ-007": _r(MUST, "reference: Anthropic extended thinking with tool use: the last assistant turn's thinking "
                           "blocks are passed back with their signatures (ThinkingBlockParam: 'exactly as returned "
                           "by the API')"),
    "AN-USAGE-005": _r(MUST, "reference: anthropic-sdk-python MessageTokensCount.input_tokens 'The total number of "
                             "tokens across the provided list of messages, system prompt, and tools'"),
    "AN-USAGE-005:route": _r(SHOULD, "none: Claude Code 2.1.197 calls POST /v1/messages/count_tokens?beta=true "
                                     "(beta.messages.countTokens, its binary) for its context accounting; no "
                                     "measured break on a 404"),
    "CH-HIST-003": _r(SHOULD, "none: the Chat reference names no reasoning field; servers emit reasoning_content or "
                              "reasoning and clients send back either: the other name loses the reasoning silently"),
    "CH-REQ-002": _r(MUST, "reference: openai-python chat/completion_create_params.py reasoning_effort"),
    "CH-REQ-002:kwargs": _r(SHOULD, "none: chat_template_kwargs is vLLM's and SGLang's extension (OpenAI refuses "
                                    "unknown fields); deployments send enable_thinking false"),
    "CH-REQ-002:tools": _r(MUST, "reference: Chat tool_choice 'required means the model must call one or more "
                                 "tools': the call is a tool call with thinking off too"),
    "RS-REQ-003": _r(MUST, "reference: openai-python responses/response_text_config_param.py: format and "
                           "verbosity are optional; Codex sends text with verbosity only (API_FACTS)"),
    "RS-REQ-003:probe": _r(MUST, "reference: OpenAI errors: a request the API does not take is a 4xx "
                                 "{error: {message, type, param, code}} (max_output_tokens below 16: "
                                 "integer_below_min_value), never a 5xx"),
})

RULES: dict[str, Rule] = {rid: Rule(rid, level, evidence) for rid, (level, evidence) in _RULE_TABLE.items()}

# The one join of the two id spaces: the check that fails on each rule. A grammar rule (from
# conformance/grammar) fails the stream check that judges it, listed here; a contract rule is named after its
# check (ID, or ID:part for a second rule of one check). Every rule fails exactly one check (test_coverage.py).
_GRAMMAR_CHECK: dict[str, str] = {
    **dict.fromkeys(("AN-GRAMMAR-START", "AN-GRAMMAR-MESSAGE-START", "AN-GRAMMAR-ORDER",
                    "AN-GRAMMAR-AFTER-STOP", "AN-GRAMMAR-STOP-MISSING"), "AN-STREAM-001"),
    **dict.fromkeys(("AN-GRAMMAR-INDEX",), "AN-STREAM-002"),
    **dict.fromkeys(("AN-GRAMMAR-ONE-OPEN", "AN-GRAMMAR-BLOCK-START", "AN-GRAMMAR-BLOCK-UNKNOWN",
                    "AN-GRAMMAR-BLOCK-CLOSED", "AN-GRAMMAR-BLOCK-UNSTOPPED"), "AN-STREAM-003"),
    **dict.fromkeys(("AN-GRAMMAR-DELTA-TYPE",), "AN-STREAM-004"),
    **dict.fromkeys(("AN-GRAMMAR-SIGNATURE", "AN-GRAMMAR-SIGNATURE-MISSING"), "AN-STREAM-005"),
    **dict.fromkeys(("AN-GRAMMAR-TOOL-START", "AN-GRAMMAR-TOOL-JSON"), "AN-STREAM-006"),
    **dict.fromkeys(("AN-GRAMMAR-STOP-REASON", "AN-GRAMMAR-STOP-TOOL-USE"), "AN-STREAM-007"),
    **dict.fromkeys(("AN-GRAMMAR-EVENT-NAME", "AN-GRAMMAR-JSON", "AN-GRAMMAR-DONE", "AN-GRAMMAR-EVENT-LINE",
                    "AN-GRAMMAR-AFTER-ERROR"), "AN-STREAM-008"),
    **dict.fromkeys(("AN-GRAMMAR-DELTA-USAGE",), "AN-STREAM-009"),
    **dict.fromkeys(("CH-GRAMMAR-TOOL-FIRST", "CH-GRAMMAR-TOOL-REPEAT", "CH-GRAMMAR-TOOL-INDEX"), "CH-STREAM-001"),
    **dict.fromkeys(("CH-GRAMMAR-TOOL-ARGS",), "CH-STREAM-002"),
    **dict.fromkeys(("CH-GRAMMAR-FINISH-TOOL-CALLS", "CH-GRAMMAR-FINISH-REASON", "CH-GRAMMAR-FINISH-ONCE",
                    "CH-GRAMMAR-AFTER-FINISH"), "CH-STREAM-003"),
    **dict.fromkeys(("CH-GRAMMAR-USAGE-CHUNK", "CH-GRAMMAR-USAGE-CHOICES"), "CH-STREAM-004"),
    **dict.fromkeys(("CH-GRAMMAR-DONE", "CH-GRAMMAR-OBJECT", "CH-GRAMMAR-ID", "CH-GRAMMAR-JSON",
                    "CH-GRAMMAR-EVENT-NAME", "CH-GRAMMAR-CHOICES"), "CH-STREAM-005"),
    **dict.fromkeys(("RS-GRAMMAR-SEQUENCE",), "RS-STREAM-001"),
    **dict.fromkeys(("RS-GRAMMAR-ITEM-ORDER", "RS-GRAMMAR-ITEM-IDS", "RS-GRAMMAR-ITEM-UNCLOSED",
                    "RS-GRAMMAR-TEXT-DONE", "RS-GRAMMAR-OUTPUT-INDEX", "RS-GRAMMAR-COMPLETED-OUTPUT"),
                    "RS-STREAM-002"),
    **dict.fromkeys(("RS-GRAMMAR-ARGS-DONE",), "RS-STREAM-003"),
    **dict.fromkeys(("RS-GRAMMAR-COMPLETED", "RS-GRAMMAR-CREATED", "RS-GRAMMAR-IN-PROGRESS",
                    "RS-GRAMMAR-USAGE", "RS-GRAMMAR-JSON", "RS-GRAMMAR-EVENT-NAME"), "RS-STREAM-004"),
    **dict.fromkeys(("RS-GRAMMAR-FUNCTION-CALL",), "RS-STREAM-005"),
    **dict.fromkeys(("RS-GRAMMAR-ARGS-JSON",), "RS-STREAM-006"),
}
# Rules the Chat validator reports on Dynamo's tool_call_dispatch frames: CH-DISPATCH-002
# (test_dispatch.py) judges those frames itself, so these fail no check (they have no RULES entry); the
# Responses validator's custom-tool input rule is judged by RS-TOOLKIND-002 (its :stream rule) alone.
UNJUDGED = frozenset({"CH-DISPATCH-SHAPE", "CH-DISPATCH-ONCE", "CH-DISPATCH-MATCH", "CH-DISPATCH-EARLY",
                      "CH-DISPATCH-LATE", "CH-DISPATCH-MISSING", "RS-GRAMMAR-CUSTOM-INPUT"})
RULE_CHECK: dict[str, str] = {**_GRAMMAR_CHECK, **{r: r.split(":")[0] for r in RULES if r not in _GRAMMAR_CHECK}}

# Recorded and shown, never failed: the references allow them (docs/API_FACTS.md).
# RS-GRAMMAR-EVENT-LINE: a Responses stream without `event:` lines works for the openai SDK and
# Codex, which dispatch on the data's type.
INFORMATIONAL = frozenset({"AN-GRAMMAR-UNKNOWN-EVENT", "AN-GRAMMAR-ERROR-EVENT", "RS-GRAMMAR-UNKNOWN-EVENT",
                           "RS-GRAMMAR-ERROR-EVENT", "CH-GRAMMAR-ERROR", "CH-GRAMMAR-UNKNOWN-EVENT",
                           "RS-GRAMMAR-EVENT-LINE"})


# The paths a rule needs the endpoint to take before a pass means anything (any one of them; a rule
# not named needs none): a rule that saw none of its paths is inconclusive, never a pass. Paths are
# seen in the answers of one check (session.paths_in) or marked by the check (kit-interleaving: the
# kit built the interleaved turn itself).
TOOL_USE, PARALLEL, THINKING = "tool-use", "parallel-calls", "thinking"
INTERLEAVING, KIT_INTERLEAVING, AGENT_TURN, CACHE_HIT = ("interleaving", "kit-interleaving", "agent-turn",
                                                         "cache-hit")
DETERMINISTIC = "deterministic"  # two answers to one request at temperature 0 can be compared
CUT_CALL = "cut-call"  # marked by test_tool_choice.py: a forced call's answer reached the output limit
CONTEXT_WINDOW = "context-window"  # marked by test_context.py: the endpoint announces the model's context window
# marked by test_client_sessions.py: a recorded client request went with the endpoint's own answer in it
CLIENT_ROUNDTRIP = "client-roundtrip"
CACHE_WRITE = "cache-write"  # marked by test_usage.py: the usage reported prompt tokens written to the cache
# marked by test_dispatch.py: a streamed tool call completed before reasoning or text the model said after it
OUTPUT_AFTER_CALL = "output-after-call"
PATHS = (TOOL_USE, PARALLEL, THINKING, INTERLEAVING, KIT_INTERLEAVING, AGENT_TURN, CACHE_HIT, DETERMINISTIC,
         OUTPUT_AFTER_CALL, CACHE_WRITE, CUT_CALL, CONTEXT_WINDOW, CLIENT_ROUNDTRIP)
RULE_PATHS: dict[str, tuple[str, ...]] = {
    **{r: (TOOL_USE,) for r in ("AN-GRAMMAR-TOOL-START", "AN-GRAMMAR-TOOL-JSON", "AN-GRAMMAR-STOP-TOOL-USE",
                                "CH-GRAMMAR-TOOL-FIRST", "CH-GRAMMAR-TOOL-REPEAT", "CH-GRAMMAR-TOOL-ARGS",
                                "CH-GRAMMAR-FINISH-TOOL-CALLS", "RS-GRAMMAR-FUNCTION-CALL", "RS-GRAMMAR-ARGS-DONE",
                                "RS-GRAMMAR-ARGS-JSON")},
    "CH-GRAMMAR-TOOL-INDEX": (PARALLEL,),  # one call has one index: nothing to keep apart
    "AN-GRAMMAR-SIGNATURE": (THINKING,), "AN-GRAMMAR-SIGNATURE-MISSING": (THINKING,),
    "AN-HIST-001": (KIT_INTERLEAVING, INTERLEAVING), "RS-HIST-001": (KIT_INTERLEAVING, INTERLEAVING),
    "AN-HIST-001:plain-turn": (KIT_INTERLEAVING,), "RS-HIST-001:plain-turn": (KIT_INTERLEAVING,),
    "AN-HIST-002": (AGENT_TURN,), "CH-HIST-002": (AGENT_TURN,), "RS-HIST-002": (AGENT_TURN,),
    # a streamed and a separate non-streamed answer are compared only where the endpoint answers one
    # request the same way twice (test_sdk.py); a sampling endpoint leaves these rules unjudged
    **{f"{c}:nonstream": (DETERMINISTIC,) for c in ("AN-SDK-001", "CH-SDK-001", "RS-SDK-001")},
    # usage field by field: only a reported cache read (or write) tells the fields apart
    "AN-USAGE-004": (CACHE_HIT, CACHE_WRITE), "CH-USAGE-001:cached": (CACHE_HIT,), "RS-USAGE-001:cached": (CACHE_HIT,),
    # a later tool call proves nothing: calls held to the end of the turn still stream one after the other
    **{f"{a}-DISPATCH-001": (OUTPUT_AFTER_CALL,) for a in _PREFIXES},
    # tool_choice none and parallel tool use off mean something only where the same request called (twice);
    # strict arguments need a call; the cut-call rules an answer that reached the output limit
    **{f"{a}-TOOLS-{n}": paths for a in _PREFIXES
       for n, paths in (("002", (TOOL_USE,)), ("003", (PARALLEL,)), ("004", (TOOL_USE,)),
                        ("005", (CUT_CALL,)), ("005:markup", (CUT_CALL,)))},
    # an over-long prompt means something only against the window the endpoint announces; the session's
    # cache rule only where the endpoint reports cached tokens
    **{r: (CONTEXT_WINDOW,) for p in _PREFIXES for r in (f"{p}-CTX-001", f"{p}-CTX-001:marker",
                                                                   f"{p}-CTX-003:window", f"{p}-CTX-003:marker")},
    **{f"{p}-CTX-004": (CACHE_HIT,) for p in _PREFIXES},
}
# issue 30: cache_control on a sent-back thinking block, and the thinking blocks sent back, need a turn that thought
RULE_PATHS.update({"AN-REQ-004:thinking": (THINKING,), "AN-REQ-007": (THINKING,)})

# What the model did instead, by the path it did not take (the inconclusive message's words).
_NOT_TAKEN = {TOOL_USE: "the model made no tool call", THINKING: "the model did not think",
              INTERLEAVING: "the model did not interleave reasoning and tool calls",
              KIT_INTERLEAVING: "the kit's interleaved turn was not judged",
              AGENT_TURN: "the model did not reason before a tool call", CACHE_HIT: "no prompt tokens came from the cache",
              CACHE_WRITE: "no prompt tokens were written to the cache",
              DETERMINISTIC: "the endpoint answered the same request differently each time",
              OUTPUT_AFTER_CALL: "no tool call was followed by reasoning or text",
              CUT_CALL: "the output limit cut no forced call (it ended first, or reasoning used it up)",
              CONTEXT_WINDOW: "no context window known, and the endpoint took the far prompt (give --context-window)",
              CLIENT_ROUNDTRIP: "the endpoint answered the recorded session another way (no round trip)"}


def coverage(check: Check, seen: set[str] | frozenset[str]) -> dict[str, list[str]]:
    """For each of the check's rules that needs a path, the paths of its own it saw ([] : not exercised)."""
    return {r: sorted(set(RULE_PATHS[r]) & seen) for r in check.own_rules if r in RULE_PATHS}


def unexercised(check: Check, seen: set[str] | frozenset[str]) -> list[str]:
    """The check's rules that need a path and saw none of theirs."""
    return [r for r in check.own_rules if r in RULE_PATHS and not set(RULE_PATHS[r]) & seen]


def not_exercised_reason(check: Check, seen: set[str] | frozenset[str]) -> str:
    """'not exercised: the model made one call (CH-GRAMMAR-TOOL-INDEX needs parallel-calls)'."""
    rules = unexercised(check, seen)
    needed = list(dict.fromkeys(p for r in rules for p in RULE_PATHS[r]))
    words = []
    for path in needed:
        if path == PARALLEL:
            words.append("the model made one call" if TOOL_USE in seen else "the model made no tool call")
        else:
            words.append(_NOT_TAKEN[path])
    wants = "; ".join(f"{r} needs {' or '.join(RULE_PATHS[r])}" for r in rules)
    return f"not exercised: {', '.join(dict.fromkeys(words))} ({wants})"


def rule(rule_id: str) -> Rule:
    try:
        return RULES[rule_id]
    except KeyError:
        raise KeyError(f"unknown rule {rule_id!r}") from None


# A check's `timing`: why it holds the endpoint alone while it runs (with other checks' requests in flight,
# queueing and other prompts' prefill would move its timings); every other check judges content or order,
# which concurrent requests do not change (the dispatch checks judge frame order, not the clock).
TIMING_WITNESS = "timing witness"  # conformance/witnesses.py timing_witness: turn 2's time to the last token,
# returned vs cached vs rewritten, median of 8 sessions (taken when --witness timing, or auto without tokenize/cache)
PREFIX_CACHE_TIMING = "prefix-cache timing"  # test_preamble.py: without cache reads, TTFT of new headers vs repeats
TIMINGS = (TIMING_WITNESS, PREFIX_CACHE_TIMING)
# A check's `levers` (conformance/levers.py): which levers may bend its requests.
LEVERS_ALL = "all"  # every lever toward the paths its rules need
LEVERS_UNFORCED = "unforced"  # it judges what the model does unforced: no lever that forces the call
LEVERS_OWN_FORCING = "own-forcing"  # it sends its own forced choice: only the thinking-off levers
LEVERS_NONE = "none"  # it judges the endpoint's default when the client asks nothing: no lever at all
LEVER_POLICIES = (LEVERS_ALL, LEVERS_UNFORCED, LEVERS_OWN_FORCING, LEVERS_NONE)


@dataclass(frozen=True, slots=True)
class Check:
    id: str
    api: str  # one of APIS, or ANY
    title: str
    level: Level  # the highest level of its rules
    source: str  # the API_FACTS.md (or article) line it stands on
    remedy: str
    faults: tuple[str, ...]  # reference-server faults that this check must catch
    witness: str = ""  # what the check looks at, when it is not the stream grammar
    # -- how the kit runs it (read by plugin.py, levers.py, results.py, impact.py; no table keyed by its id) --
    timing: str = ""  # why its verdict rests on time measured at the endpoint (it holds it alone); "" for none
    levers: str = "all"  # LEVERS_ALL, LEVERS_UNFORCED, LEVERS_OWN_FORCING or LEVERS_NONE (conformance/levers.py)
    judges_refused_history: bool = False  # it judges the refusal of a history carrying a broken call itself
    client_shape: str = ""  # the real client whose own request shape it sends (conformance/impact.json's key)
    replays_client: bool = False  # it replays that client's own recorded session (test_client_sessions.py)

    def __post_init__(self) -> None:
        if self.levers not in LEVER_POLICIES:
            raise ValueError(f"{self.id}: unknown lever policy {self.levers!r} (one of {LEVER_POLICIES})")
        if self.timing and self.timing not in TIMINGS:
            raise ValueError(f"{self.id}: unknown timing {self.timing!r} (one of {TIMINGS})")

    @property
    def contract(self) -> str:
        return self.id.split("-")[1]

    def holds_endpoint_alone(self, witness: str) -> bool:
        """Whether the check must hold the endpoint alone (its verdict rests on time measured there): a
        history check not when --witness forces a witness that measures no time (tokenize, cache)."""
        if self.timing == TIMING_WITNESS and witness in ("tokenize", "cache"):
            return False
        return bool(self.timing)

    def runs_with(self, apis: set[str] | frozenset[str]) -> bool:
        """Whether a run over these APIs takes the check: its API is one of them, or it has none (ANY)."""
        return self.api in apis or self.api == ANY

    @property
    def rules(self) -> tuple[str, ...]:
        """The grammar rules it judges (a stream check; RULE_CHECK), in the table's order."""
        return tuple(r for r, check_id in _GRAMMAR_CHECK.items() if check_id == self.id)

    @property
    def own_rules(self) -> tuple[str, ...]:
        """The rules its verdict speaks of: its grammar rules, else its contract rules (ID, ID:part).
        A stream check also fails on its contract rule (its id) when a stream could not be judged at
        all (a refused request): AN-STREAM-009 is the one stream check that rule has an entry for."""
        return self.rules or tuple(r for r, check_id in RULE_CHECK.items()
                                   if check_id == self.id and r not in _GRAMMAR_CHECK)

    def level_of(self, rule_id: str | None) -> Level:
        """The level a failure of ``rule_id`` weighs (the check's own rule when None or not a rule)."""
        if rule_id in RULES:
            return RULES[rule_id].level
        return RULES[self.id].level if self.id in RULES else self.level

    def weight_of(self, rules: list[str]) -> Level:
        """What a failure of these rules weighs: MUST if any of them is a MUST rule."""
        levels = [self.level_of(r) for r in rules] or [self.level]
        return MUST if MUST in levels else SHOULD

    @property
    def evidence(self) -> dict[str, str]:
        return {r: f"{RULES[r].level}: {RULES[r].evidence}" for r in self.own_rules}


def _highest(*rule_ids: str) -> Level:
    """MUST when one of the rules is MUST, else SHOULD (a check's level from its rules)."""
    return MUST if any(RULES[r].level == MUST for r in rule_ids) else SHOULD


# The faults that break the context checks (test_context.py): the overflow forms (and every error response
# bent by bad-input-500 / wrong-error-shape), and usage that leaves the history out (Chat and Responses also
# when cached tokens are counted outside the prompt: the uncached rest is about the new turn's input).
# The faults each recorded client session fails under (measured: the client checks alone, run against every
# fault; the request-shape faults where the client sends that shape, the MUST grammar faults where its
# answers take that path, the round trip where the answer cannot come back; the request-shape and
# tool-kind faults of issue 30 are added below).
_AN_STREAM_FAULTS = ("an-block-index-skip", "an-delta-type-mismatch", "an-delta-unstarted-block",
                     "an-end-turn-after-tool-use", "an-event-name-mismatch", "an-missing-block-stop",
                     "an-missing-message-stop", "an-usage-missing", "invalid-tool-json", "an-tool-start-no-input")
_RS_STREAM_FAULTS = ("invalid-tool-json", "rs-missing-call-id", "rs-missing-completed", "rs-missing-output-item-done",
                     "rs-no-indices")
_CLIENT_FAULTS: dict[str, tuple[str, ...]] = {
    "AN-CLIENT-001": (*_AN_STREAM_FAULTS, "reject-cache-control", "reject-system-role", "reject-unknown-fields"),
    "AN-CLIENT-002": (*_AN_STREAM_FAULTS, "reject-cache-control"),  # OpenClaw sends no thinking back
    "RS-CLIENT-001": (*_RS_STREAM_FAULTS, "reject-unknown-fields"),
    "RS-CLIENT-002": (*_RS_STREAM_FAULTS, "reject-unknown-fields"),
    "RS-CLIENT-003": _RS_STREAM_FAULTS,
    "CH-CLIENT-001": ("chat-finish-stop-after-tool-calls", "chat-no-done", "chat-no-usage-chunk",
                      "chat-repeat-tool-id-name", "invalid-tool-json"),
}
# issue 30, request shapes and tool kinds: the recorded sessions carry what these faults refuse (Codex's
# custom / namespace / web_search tools, id-less replayed items; Claude Code's thinking blocks sent back)
_more: tuple[str, ...]  # in the loops below: one id or several
for _check, _more in (("RS-CLIENT-001", ("rs-function-tools-only", "rs-narrow-request-schema")),
                      ("RS-CLIENT-002", ("rs-function-tools-only",)), ("RS-CLIENT-003", ("rs-narrow-request-schema",)),
                      ("AN-CLIENT-001", ("reject-history-thinking",))):
    _CLIENT_FAULTS[_check] = (*_CLIENT_FAULTS[_check], *_more)
_OVERFLOW_FAULTS = ("overflow-detail-shape", "overflow-500", "overflow-bare-400", "overflow-stream-error",
                    "bad-input-500", "wrong-error-shape")


def _bending(api: str, *faults: str) -> tuple[str, ...]:
    """Those of ``faults`` that bend ``api``'s traffic (the fault's own ``apis``)."""
    return tuple(f for f in faults if FAULTS[f].bends(api))


_USAGE_FAULTS = {p: _bending(api, "usage-current-turn-only", "usage-cached-outside-prompt")
                 for p, api in SHIPPED}


def _c(id: str, api: str, title: str, level: Level, source: str, remedy: str, faults: tuple[str, ...] | str,
       witness: str = "", **props: Any) -> Check:
    """One entry; ``props`` are the Check's keyword fields on how the kit runs it (timing, levers, ...)."""
    faults = (faults,) if isinstance(faults, str) else faults
    return Check(id, api, title, level, source, remedy, faults, witness, **props)


def _turn_family(p: str, api: str) -> list[Check]:
    """The TURN family of an API (test_turns.py): a follow-up turn is answered, never with a 5xx."""
    return [_c(f"{p}-TURN-001", api, "A follow-up turn is answered, never with a 5xx (the history of the endpoint's "
               "own answer; a tool call whose arguments are not JSON, as a cut call leaves them)", MUST,
               "API_FACTS: errors; a cut call's arguments do not parse", "answer a malformed history with a 4xx in "
               "the API's error shape; take the history of your own answers", ("bad-input-500", "wrong-error-shape"),
               judges_refused_history=True)]


CHECKS: list[Check] = [
    # --- Anthropic Messages: stream grammar -------------------------------------------------------
    _c("AN-STREAM-001", "anthropic", "The stream opens with message_start and ends with message_stop", MUST,
       "API_FACTS: Anthropic stream events", "send message_start first and message_stop last, after message_delta",
       "an-missing-message-stop"),
    _c("AN-STREAM-002", "anthropic", "Each content block's index equals its position (0, 1, 2, ...)", MUST,
       "API_FACTS: block index equals the block's position", "number blocks by their position in content[]",
       "an-block-index-skip"),
    _c("AN-STREAM-003", "anthropic", "Every block is started, streamed and stopped; one block open at a time", MUST,
       "API_FACTS: content_block_start / delta / stop per block",
       "close each block with content_block_stop before the next starts; never send deltas after the stop",
       ("an-missing-block-stop", "an-delta-unstarted-block")),
    _c("AN-STREAM-004", "anthropic", "Delta types match their block (no text_delta in a tool_use block)", MUST,
       "API_FACTS: delta types by block", "send input_json_delta for tool_use, thinking_delta for thinking",
       "an-delta-type-mismatch"),
    _c("AN-STREAM-005", "anthropic", "A thinking block gets its signature_delta before its stop", SHOULD,
       "API_FACTS: signature_delta just before its stop", "emit signature_delta, then content_block_stop",
       "an-signature-after-stop"),
    _c("AN-STREAM-006", "anthropic", "A tool_use block starts complete and its partial_json joins to an object", MUST,
       "API_FACTS: content_block_start of tool_use; concatenated partial_json parses", "stream the input JSON "
       "as fragments of one object; put id and the whole name in content_block_start",
       ("invalid-tool-json", "an-tool-start-no-input")),
    _c("AN-STREAM-007", "anthropic", "stop_reason is tool_use exactly when the message ends with tool_use blocks",
       MUST, "API_FACTS: stop_reason", "answer stop_reason tool_use after tool calls the client must run",
       "an-end-turn-after-tool-use"),
    _c("AN-STREAM-008", "anthropic", "SSE event names equal the data's type; every data line is JSON", MUST,
       "API_FACTS: the SSE event name equals the data's type", "write `event: <type>` for every frame",
       "an-event-name-mismatch"),
    _c("AN-STREAM-009", "anthropic", "message_delta carries cumulative usage with output_tokens", MUST,
       "API_FACTS: message_delta.usage is cumulative; output_tokens required", "send usage in message_delta",
       "an-usage-missing"),
    _c("AN-SDK-001", "anthropic", "The anthropic SDK's stream helper folds every scenario to the non-stream answer",
       MUST, "API_FACTS: SDK accumulate_event", "follow the event grammar; keep streamed and non-streamed "
       "content equal", ("an-block-index-skip", "invalid-tool-json", "an-usage-missing", "an-delta-unstarted-block",
                         "reject-history-thinking"),  # its turn 1 sends the thinking blocks back
       witness="anthropic SDK"),
    _c("AN-DISPATCH-001", "anthropic", "A tool_use block closes when its call is complete, not at the end of the turn",
       SHOULD, "article 2: content_block_stop != message_stop", "stream tool calls as they are parsed",
       "buffer-tool-calls", witness="frame timing"),
    # --- Anthropic usage, routes, request acceptance, errors -------------------------------------
    _c("AN-USAGE-001", "anthropic", "count_tokens agrees with the usage, and message_start's prompt total equals it "
       "(not 0, not an estimate)", SHOULD,
       "API_FACTS: total prompt = input_tokens + cache_creation + cache_read; count_tokens answers the total",
       "fill message_start usage from the real tokenized prompt before the stream starts (Dynamo PR #7234)",
       ("message-start-zero-input-tokens", "message-start-estimated-input-tokens", "count-tokens-mismatch",
        "count-tokens-estimate"), witness="count_tokens, cross-checked with the non-streamed usage"),
    _c("AN-USAGE-002", "anthropic", "message_start's prompt total equals the final usage's total", SHOULD,
       "API_FACTS: usage in message_start must agree with the final usage",
       "report the same prompt accounting at the start and the end",
       ("message-start-zero-input-tokens", "message-start-estimated-input-tokens")),
    _c("AN-USAGE-003", "anthropic", "input_tokens of an uncached prompt is not 0 in message_start", SHOULD,
       "API_FACTS: a message_start total of 0 is a bug (Dynamo PR #7234)", "count the prompt before streaming",
       "message-start-zero-input-tokens"),
    _c("AN-ROUTE-001", "anthropic", "GET /v1/models answers the Anthropic list shape when anthropic-version is sent",
       SHOULD, "API_FACTS: GET /v1/models", "answer {data:[{id,type:'model',...}], has_more, first_id, last_id}",
       "anthropic-models-shape-ignored"),
    _c("CH-ROUTE-001", "chat", "GET /v1/models answers OpenAI's list shape without anthropic-version (object "
       "'list'; each model with id, object 'model', created and owned_by)", MUST,
       "API_FACTS: GET /v1/models, OpenAI's shape", "answer {object: 'list', data: [{id, object: 'model', created, "
       "owned_by}]} to a client that sends no anthropic-version", "openai-models-bare-entries"),
    _c("AN-ROUTE-002", "any", "GET /v1/models/{id} works for an id containing '/', sent raw", SHOULD,
       "API_FACTS: /v1/models/{model_id} with '/'; article 1: 404 on nvidia/...",
       "route the rest of the path as the id", "model-slash-404"),
    _c("AN-ROUTE-003", "any", "GET /v1/models/{id} works with the '/' percent-encoded as %2F (as the SDKs send)", MUST,
       "API_FACTS: both SDKs percent-encode path parameters", "percent-decode the id",
       ("model-slash-404", "model-percent-2f-not-decoded")),
    _c("AN-REQ-001", "anthropic", "cache_control is accepted on tools, system blocks and message blocks", MUST,
       "API_FACTS: a server that does no caching must still accept cache_control", "accept and ignore it",
       ("reject-cache-control", "reject-cache-control-extensions")),  # its request carries ttl 1h
    _c("AN-REQ-002", "anthropic", "role: system entries inside messages are accepted", MUST,
       "API_FACTS: Claude Code sends role system entries; servers hoist them", "hoist or render them in place",
       "reject-system-role"),
    _c("AN-REQ-003", "anthropic", "Claude Code's request shape is accepted (?beta=true, betas, adaptive thinking, "
       "context_management, output_config, unknown fields)", MUST, "API_FACTS: what the real clients send",
       "tolerate unknown fields and query strings", ("reject-unknown-fields", "reject-cache-control"),
       client_shape="claude-code"),
    _c("AN-ERR-001", "anthropic", "Bad requests get 4xx with the Anthropic error shape, never 5xx", MUST,
       "API_FACTS: Anthropic errors", "validate input; answer {type:error, error:{type,message}}",
       ("bad-input-500", "wrong-error-shape", "lenient-input")),
    _c("AN-ROUTE-004", "any", "GET /v1/models/{id} answers the model the endpoint serves", SHOULD,
       "API_FACTS: GET /v1/models/{model_id} -> one model; article 1: the 404 a harness hit at start-up",
       "serve GET /v1/models/{id} (decoding %2F) for every model in the list",
       ("model-slash-404", "model-percent-2f-not-decoded")),
    _c("AN-ERR-002", "any", "An unknown model id gets 404 in the API's error shape (the retrieve route and the "
       "generation routes)", MUST, "API_FACTS: unknown id -> 404 not_found_error", "answer 404 not_found_error",
       ("wrong-error-shape", "unknown-model-openai-shape")),
    _c("AN-PREAMBLE-001", "anthropic", "A per-session billing header does not defeat prefix-cache reuse", SHOULD,
       "article 1: --strip-anthropic-preamble; 168 / 912 / 169 ms",
       "strip x-anthropic-billing-header before tokenizing", "preamble-not-stripped",
       witness="cache usage, else timing", timing=PREFIX_CACHE_TIMING),
    _c("AN-PREAMBLE-002", "anthropic", "The billing header as the only system block is stripped too", SHOULD,
       "API_FACTS: the header as the only system block is a case the simple strip misses",
       "strip the header line wherever it ends", ("preamble-simple-strip", "preamble-not-stripped"),
       witness="cache usage, else timing", timing=PREFIX_CACHE_TIMING),
    # --- Multi-turn history (article 1) ----------------------------------------------------------
    _c("AN-HIST-001", "anthropic", "Interleaved reasoning and tool calls come back in order (r0 t0 r1 t1)", MUST,
       "article 1: <think>r0</think> t0 <think>r1</think> t1 must not be flattened or stripped on agent turns",
       "rebuild assistant turns part by part; keep reasoning bound to tool calls (truncate_history_thinking=false)",
       ("flatten-interleaved-reasoning", "truncate-agent-reasoning", "reject-history-thinking",
        "trim-reasoning-before-last-query"), witness="/tokenize, cache usage or timing", timing=TIMING_WITNESS),
    _c("AN-HIST-002", "anthropic", "Turn N's prompt and output come back verbatim as turn N+1's prefix", SHOULD,
       "DESIGN: turn N's prompt + output is a token prefix of turn N+1's prompt; article 1: 167 vs 322 ms",
       "render history exactly as generated (no reordering, truncation or rewriting)",
       ("truncate-agent-reasoning", "rewrite-history-reasoning"), witness="cache usage, timing or /tokenize", timing=TIMING_WITNESS),
    _c("CH-HIST-002", "chat", "Turn N's prompt and output come back verbatim as turn N+1's prefix (Chat)", SHOULD,
       "DESIGN: the prefix property; Chat carries reasoning_content", "keep reasoning_content on agent turns",
       ("truncate-agent-reasoning", "rewrite-history-reasoning"), witness="cache usage, timing or /tokenize", timing=TIMING_WITNESS),
    _c("RS-HIST-001", "responses", "Interleaved reasoning items and function calls come back in order", MUST,
       "article 1: interleaved reasoning; API_FACTS: reasoning items with encrypted_content",
       "rebuild reasoning and function_call items in their original order",
       ("flatten-interleaved-reasoning", "truncate-agent-reasoning", "rs-missing-call-id",
        "trim-reasoning-before-last-query"), witness="/tokenize, cache usage or timing", timing=TIMING_WITNESS),
    _c("RS-HIST-002", "responses", "Turn N's prompt and output come back verbatim as turn N+1's prefix (Responses)",
       SHOULD, "DESIGN: the prefix property", "replay reasoning items exactly",
       ("truncate-agent-reasoning", "rewrite-history-reasoning"), witness="cache usage, timing or /tokenize", timing=TIMING_WITNESS),
    _c("AN-HIST-003", "anthropic", "Thinking stays on when the client does not turn it off", SHOULD,
       "article 1: with a reasoning parser configured and thinking not disabled, enable_thinking=true",
       "enable thinking unless the request disables it", "thinking-off-by-default",
       witness="thinking blocks with and without the thinking field", levers=LEVERS_NONE),  # no lever may ask
    # --- Chat Completions -------------------------------------------------------------------------
    _c("CH-STREAM-001", "chat", "Tool-call deltas carry id, type and name only in the first delta of an index", MUST,
       "API_FACTS: the SDK concatenates every string field per index", "send id/name once per index",
       "chat-repeat-tool-id-name"),
    _c("CH-STREAM-002", "chat", "Tool-call arguments join to a JSON object per index", MUST,
       "API_FACTS: concatenated arguments per index parse as a JSON object", "stream fragments of one object",
       "invalid-tool-json"),
    _c("CH-STREAM-003", "chat", "finish_reason is tool_calls when the turn ends in tool calls", MUST,
       "API_FACTS: finish_reason tool_calls", "answer finish_reason tool_calls",
       "chat-finish-stop-after-tool-calls"),
    _c("CH-STREAM-004", "chat", "stream_options.include_usage adds one usage chunk with choices [] before [DONE]",
       MUST, "API_FACTS: stream_options.include_usage", "send the usage chunk", "chat-no-usage-chunk"),
    _c("CH-STREAM-005", "chat", "The stream ends with data: [DONE]; chunks share one id and object type", MUST,
       "API_FACTS: Chat streaming", "end with data: [DONE]", "chat-no-done"),
    _c("CH-SDK-001", "chat", "The openai SDK's chat stream helper folds every scenario to the non-stream answer",
       MUST, "API_FACTS: openai-python lib/streaming/_deltas.py", "send id and name once per index",
       "chat-repeat-tool-id-name", witness="openai SDK"),
    _c("CH-DISPATCH-001", "chat", "Tool-call deltas stream as the call is parsed, not at the end of the turn",
       SHOULD, "article 1: buffered vs inline vs dispatch", "stream tool-call deltas inline", "buffer-tool-calls",
       witness="frame timing"),
    _c("CH-DISPATCH-002", "chat", "tool_call_dispatch frames are well formed, once per call, before the end", SHOULD,
       "API_FACTS: Dynamo --enable-streaming-tool-dispatch", "send one dispatch frame per complete call",
       ("dispatch-missing", "dispatch-twice", "dispatch-late"), witness="tool-dispatch (when offered)"),
    _c("CH-REQ-001", "chat", "nvext.agent_hints (Dynamo's request extension) is accepted", SHOULD,
       "API_FACTS: Dynamo request extensions: must be accepted, never rejected", "ignore unknown fields",
       "reject-unknown-fields"),
    _c("CH-ERR-001", "chat", "Bad requests get 4xx with the OpenAI error shape, never 5xx", MUST,
       "API_FACTS: errors", "answer {error:{message,type,param,code}}",
       ("bad-input-500", "wrong-error-shape", "lenient-input")),
    _c("CH-TOKENIZE-001", "any", "tokenize / detokenize round-trip a prompt (when offered)", SHOULD,
       "API_FACTS: tokenizer endpoints", "decode with special tokens kept", "detokenize-drops-special",
       witness="/tokenize"),
    # --- Responses --------------------------------------------------------------------------------
    _c("RS-STREAM-001", "responses", "sequence_number increases by exactly one", SHOULD,
       "API_FACTS: every event has an integer sequence_number, increasing by one", "number every event",
       ("rs-sequence-gap", "rs-no-indices")),
    _c("RS-STREAM-002", "responses", "Each output item runs added -> parts/deltas -> done, in order", MUST,
       "API_FACTS: Responses event order", "close every item with response.output_item.done",
       ("rs-missing-output-item-done", "rs-no-indices")),
    _c("RS-STREAM-003", "responses", "function_call_arguments.done equals the joined deltas and the item", SHOULD,
       "API_FACTS: .done carries the final arguments, equal to the concatenated deltas", "send the joined text",
       "rs-arguments-done-mismatch"),
    _c("RS-STREAM-004", "responses", "The stream ends with response.completed (or failed / incomplete)", MUST,
       "API_FACTS: Codex fails a turn without response.completed", "always send the terminal event",
       "rs-missing-completed"),
    _c("RS-STREAM-005", "responses", "A function_call item has name and call_id at output_item.added", MUST,
       "API_FACTS: function_call item; Codex drops calls without call_id", "send call_id and name at once",
       "rs-missing-call-id"),
    _c("RS-STREAM-006", "responses", "function_call arguments join to a JSON object", MUST,
       "API_FACTS: arguments join to valid JSON", "stream fragments of one object", "invalid-tool-json"),
    _c("RS-SDK-001", "responses", "The openai SDK's Responses stream helper folds every scenario to the "
       "non-stream answer", MUST, "openai-python responses stream helper", "end streams with response.completed",
       ("rs-missing-completed", "rs-missing-call-id", "rs-no-indices"), witness="openai SDK"),
    _c("RS-DISPATCH-001", "responses", "function_call_arguments.done arrives when the call is complete, not at the end",
       SHOULD, "article 2", "stream calls as they are parsed", "buffer-tool-calls", witness="frame timing"),
    _c("RS-STATE-001", "responses", "previous_response_id continues the conversation (prior input, output, new input)",
       MUST, "API_FACTS: previous_response_id order", "store responses and prepend them",
       ("rs-ignore-previous-response-id", "invalid-tool-json", "usage-current-turn-only"),  # the usage witness
       witness="/tokenize or cache usage"),  # reads a prompt counted without its stored history as a lost one
    _c("RS-STATE-002", "responses", "Reasoning items carry encrypted_content when include asks for it", SHOULD,
       "API_FACTS: include reasoning.encrypted_content", "return encrypted_content", "rs-no-encrypted-content"),
    _c("RS-REQ-001", "responses", "Codex's request shape is accepted (store false, include, prompt_cache_key, "
       "client_metadata, developer item, unknown item fields; a zstd body)", MUST,
       "API_FACTS: what Codex sends; article 1: request compression", "accept Content-Encoding zstd and "
       "unknown fields", ("reject-compressed-body", "reject-unknown-fields"), client_shape="codex"),
    _c("RS-REQ-002", "responses", "store, parallel_tool_calls and text.verbosity are echoed in the response", SHOULD,
       "API_FACTS: request fields that must survive the server", "keep the Responses fields end to end",
       "rs-fields-dropped"),
    _c("RS-ERR-001", "responses", "Bad Responses requests get 4xx with the OpenAI error shape; a request with "
       "only instructions (input is optional) is answered", MUST, "API_FACTS: errors; request validation",
       "validate input items as the reference does; accept a request without input",
       ("bad-input-500", "wrong-error-shape", "rs-require-input", "lenient-input")),
    # --- tool_choice, parallel tool use off, strict arguments, a forced call cut off ---------------
    *[c for p, api in SHIPPED for c in (
        _c(f"{p}-TOOLS-001", api, "Every tool_choice mode is accepted; required / any and a named tool "
           "force the call", MUST, "API_FACTS: tool_choice",
           "honour tool_choice (force the call by guided decoding, not the prompt)",
           ("ignore-tool-choice", *_bending(api, "nonstream-calls-as-text")), levers=LEVERS_OWN_FORCING),
        _c(f"{p}-TOOLS-002", api, "tool_choice none makes no tool call", MUST, "API_FACTS: tool_choice",
           "parse no tool calls when tool_choice is none", "ignore-tool-choice",
           levers=LEVERS_UNFORCED),  # judged where the same request under auto called
        _c(f"{p}-TOOLS-003", api, "Parallel tool use turned off makes at most one call", MUST,
           "API_FACTS: tool_choice, parallel tool use", "keep the first call when parallel tool use is off",
           "parallel-calls-not-disabled", levers=LEVERS_UNFORCED),
        _c(f"{p}-TOOLS-004", api, "A strict tool's call arguments follow its JSON schema", MUST,
           "API_FACTS: strict function arguments", "constrain the arguments of strict tools to their schema",
           ("strict-ignored", "invalid-tool-json"), witness="jsonschema"),
        _c(f"{p}-TOOLS-005", api, "A forced call cut off by the output limit says so and keeps its "
           "structure (no tool-call markup as text), streamed and not", MUST,
           "API_FACTS: a forced call cut off by the limit", "answer the cut call as a (partial) tool call, "
           "in both forms", ("forced-cut-raw-markup", *_bending(api, "nonstream-calls-as-text")),
           levers=LEVERS_OWN_FORCING))],
    # --- a follow-up turn is answered, never with a 5xx (test_turns.py) ---------------------------
    *[c for p, api in SHIPPED for c in _turn_family(p, api)],
    # --- Usage field by field, the non-streamed answer's shape (all APIs) ------------------------
    _c("AN-USAGE-004", "anthropic", "message_start splits the prompt into input, cache read and cache creation "
       "tokens as the final usage does", SHOULD, "API_FACTS: message_delta usage is cumulative; the split of "
       "message_start", "report the cached part in message_start too (the cache lookup precedes the first token)",
       "usage-cache-only-in-final", witness="cache usage"),
    _c("CH-USAGE-001", "chat", "Usage adds up: cached tokens within prompt_tokens, total_tokens = prompt + completion",
       MUST, "API_FACTS: CompletionUsage", "count cached tokens inside prompt_tokens",
       "usage-cached-outside-prompt", witness="cache usage"),
    _c("RS-USAGE-001", "responses", "Usage adds up: cached tokens within input_tokens, total_tokens = input + output",
       MUST, "API_FACTS: ResponseUsage", "count cached tokens inside input_tokens", "usage-cached-outside-prompt",
       witness="cache usage"),
    _c("AN-SHAPE-001", "anthropic", "The non-streamed message has the fields the reference requires (stop_sequence "
       "too, null allowed), and the tool_use blocks its stop_reason names", MUST, "API_FACTS: the non-streamed answer",
       "send null fields as null (no exclude_none); send calls as tool_use blocks, never as text",
       ("nonstream-no-stop-sequence", "nonstream-calls-as-text")),
    _c("CH-SHAPE-001", "chat", "The non-streamed chat.completion has id, object, created, model and choices with "
       "index, message and finish_reason, and the tool_calls its finish_reason names", MUST,
       "API_FACTS: the non-streamed answer", "send every required field; send calls as tool_calls, never as text",
       ("nonstream-no-object", "nonstream-calls-as-text")),
    _c("RS-SHAPE-001", "responses", "The non-streamed response has id, object, created_at, model, complete output "
       "items, status and usage", MUST, "API_FACTS: the non-streamed answer", "send every required field",
       ("nonstream-no-object", "rs-missing-call-id")),
    # --- the context window and usage across turns (test_context.py) ----------------------------
    *[c for p, api in SHIPPED for c in (
        _c(f"{p}-CTX-001", api, "An over-long prompt is refused with a 400 in the API's error shape carrying the "
           "overflow marker (Anthropic 'prompt is too long', OpenAI context_length_exceeded)",
           _highest(f"{p}-CTX-001", f"{p}-CTX-001:marker"),
           "API_FACTS: Context overflow", "refuse a prompt longer than the window with the API's own 400 "
           "(what the clients compact on)", _OVERFLOW_FAULTS),
        _c(f"{p}-CTX-002", api, "Usage on every turn of a 10-turn agent session counts the whole prompt, "
           "history included", RULES[f"{p}-CTX-002"].level, "API_FACTS: Usage across turns",
           "report the whole prompt's tokens (cached ones included) on every turn", _USAGE_FAULTS[p]),
        _c(f"{p}-CTX-003", api, "A 30-turn agent session: usage grows turn by turn as the prompt does, and at the "
           "window the refusal is the one the clients recognise",
           _highest(f"{p}-CTX-003", f"{p}-CTX-003:window", f"{p}-CTX-003:marker"),
           "API_FACTS: Usage across turns; Context overflow", "count the history in usage; refuse past the "
           "window with the API's own 400", _USAGE_FAULTS[p] + _OVERFLOW_FAULTS),
        _c(f"{p}-CTX-004", api, "A 30-turn agent session: the prefix cache reuses each turn's prompt as the next "
           "turn's prefix", SHOULD, "DESIGN: the prefix property, over a long session",
           "render history exactly as generated, so each turn's prompt is cached for the next",
           "cache-static-prefix-only", witness="cache usage"))],
    # --- the real clients' recorded sessions, replayed (test_client_sessions.py) ------------------
    *[_c(check, api, f"{who}'s recorded tool session replays: every request accepted, every answer in the "
         "grammar, each answer carried back in the client's form and accepted", MUST,
         "API_FACTS: what the real clients send (scenarios/clients, captured from the clients)",
         "accept what the client sends; answer so that it can send the answer back", _CLIENT_FAULTS[check],
         witness="recorded client requests", client_shape=shape, replays_client=True)
      for check, (who, shape), api in ((c, w, apis.by_prefix(c[:2]).NAME)
                                       for c, w in _CLIENT_CHECKS.items())],
]

# --- Request shapes and tool kinds the real clients send (issue 30) ----------------------------------
CHECKS += [
    _c("RS-TOOLKIND-001", "responses", "Codex's mixed tool array is accepted: function, custom (Lark and regex "
       "grammars), namespace, web_search, local_shell, tool_search, image_generation (what the endpoint cannot "
       "run is left out, not refused)", MUST, "API_FACTS: request shapes and tool kinds",
       "accept every kind of ToolParam; leave out the tools you cannot run", "rs-function-tools-only"),
    _c("RS-TOOLKIND-002", "responses", "A custom tool reaches the model and its call comes back as a custom_tool_call "
       "item (its input the text), streamed as custom_tool_call_input.delta / .done", MUST,
       "API_FACTS: request shapes and tool kinds (custom tools)", "offer custom tools to the model; answer their "
       "calls as custom_tool_call items", ("rs-custom-tool-dropped", "rs-custom-call-as-function",
                                          "rs-function-tools-only", "rs-missing-call-id")),
    _c("RS-TOOLKIND-003", "responses", "custom_tool_call / _output, tool_search_call / _output and replayed items "
       "without id or status are accepted as input", MUST, "API_FACTS: request shapes and tool kinds",
       "accept every InputItem type; make id and status optional where the reference does",
       "rs-narrow-request-schema"),
    *[_c(f"{p}-TOOLS-006", api, "A streamed forced call of a strict tool carries its arguments: they follow the "
         "tool's schema (no empty input, no call lost from the stream)", MUST,
         "API_FACTS: request shapes and tool kinds (streamed tool arguments)",
         "stream each call's arguments as the non-streamed answer has them",
         ("stream-tool-input-empty", "invalid-tool-json", "strict-ignored",
          *_bending(api, "chat-stream-call-dropped")),
         witness="jsonschema", levers=LEVERS_OWN_FORCING) for p, api in SHIPPED],
    _c("AN-REQ-004", "anthropic", "cache_control with ttl 1h, with scope, at the top level and on a sent-back "
       "thinking block is accepted", MUST, "API_FACTS: request shapes and tool kinds (cache_control)",
       "accept and ignore every form of cache_control", ("reject-cache-control-extensions",
                                                          "reject-cache-control")),
    _c("AN-REQ-005", "anthropic", "Images (base64 image blocks) inside tool_result content are accepted", MUST,
       "API_FACTS: request shapes and tool kinds", "accept image blocks in tool results (render a placeholder)",
       "reject-tool-result-image"),
    _c("AN-REQ-006", "anthropic", "Server tools declared beside client tools run or are left out: never a 400, "
       "never a client tool_use for them", MUST, "API_FACTS: request shapes and tool kinds (server tools)",
       "leave out the server tools you cannot run", ("reject-server-tools", "server-tools-as-client-tools")),
    _c("AN-REQ-007", "anthropic", "Thinking blocks sent back in history with their signatures are accepted (their "
       "order: AN-HIST-001)", MUST, "API_FACTS: thinking blocks are sent back", "take thinking blocks in "
       "assistant turns as input", "reject-history-thinking"),
    _c("AN-USAGE-005", "anthropic", "POST /v1/messages/count_tokens?beta=true is served and counts the system "
       "prompt, the tools and the whole history", MUST, "API_FACTS: count_tokens",
       "serve count_tokens on the rendered prompt of the whole request", ("no-count-tokens-route",
                                                                          "count-tokens-partial"),
       witness="count_tokens"),
    _c("CH-HIST-003", "chat", "History reasoning reaches the prompt under reasoning_content and under reasoning",
       SHOULD, "API_FACTS: Chat history reasoning under two names", "read both names on incoming assistant "
       "messages", "chat-history-reasoning-one-name", witness="/tokenize or cache usage"),
    _c("CH-REQ-002", "chat", "chat_template_kwargs.enable_thinking false and reasoning_effort are accepted; tool "
       "calls are still parsed", MUST, "API_FACTS: request shapes and tool kinds", "turn thinking off in the "
       "template and the reasoning parser alike", ("thinking-off-output-as-reasoning", "reject-unknown-fields",
                                                   "nonstream-calls-as-text")),
    _c("RS-REQ-003", "responses", "text without format is accepted; a max_output_tokens 1 probe is answered or "
       "refused in OpenAI's error shape", MUST, "API_FACTS: what Codex sends; what the references allow",
       "make text.format optional; refuse out-of-range values with a 4xx", ("rs-narrow-request-schema",
                                                                              "bad-input-500", "wrong-error-shape")),
]

BY_ID: dict[str, Check] = {c.id: c for c in CHECKS}
assert len(BY_ID) == len(CHECKS), "duplicate check id"


def get(check_id: str) -> Check:
    try:
        return BY_ID[check_id]
    except KeyError:
        if bind():  # a check of an API registered since: bound now
            return get(check_id)
        raise KeyError(f"unknown check {check_id!r}") from None


def has(check_id: str) -> bool:
    """The catalog holds the check (an API registered since bound first): a test module parametrized over the
    registry takes an API's check only where the catalog has it (a registered API gets GENERIC_FAMILIES)."""
    return check_id in BY_ID or (bind() and check_id in BY_ID)


# --- a registered API's checks (issue 44: real registration) ------------------------------------------
# The families any API registered with apis.register gets from its module alone: their rules' evidence holds
# for every API (family -> (its rules, its checks), by check-id prefix and API name). Every other family
# stands on the API's own reference (its rule levels and evidence written in RULES for each API): for an
# API this catalog was not written for, ``family`` refuses it, naming what to write.
GENERIC_FAMILIES: dict[str, tuple[Callable[[str], dict[str, tuple[Level, str]]],
                                  Callable[[str, str], list[Check]]]] = {"TURN": (_turn_rules, _turn_family)}
_BOUND: dict[str, tuple[str, ...]] = {}  # API name -> the check ids bound for it


class UnboundFamily(HarnesscheckError, KeyError):
    """A check family the catalog cannot build for a registered API (the message says what it takes)."""

    def __str__(self) -> str:  # KeyError's str() would quote the message
        return str(self.args[0]) if self.args else ""


def family(api: str, contract: str) -> list[Check]:
    """The checks of family ``contract`` ("TURN", "TOOLS", ...) of a registered API: those this catalog
    holds for a shipped API, built from ``GENERIC_FAMILIES`` for one registered later; UnboundFamily when
    the family needs rules written for the API (KeyError from the registry for an API not registered)."""
    module = apis.get(api)
    if (module.PREFIX, api) in SHIPPED:
        found = [c for c in CHECKS if c.api == api and c.contract == contract]
        if not found:
            raise UnboundFamily(f"no {contract} checks for {api}")
        return found
    if contract not in GENERIC_FAMILIES:
        raise UnboundFamily(
            f"the {contract} checks of the registered API {api!r} ({module.PREFIX}) stand on its own reference: "
            f"write their rules first (catalog.RULES: {module.PREFIX}-{contract}-NNN with its level and evidence, "
            f"and the checks beside the shipped APIs' own); a registered API gets "
            f"{', '.join(sorted(GENERIC_FAMILIES))} from its module alone")
    return GENERIC_FAMILIES[contract][1](module.PREFIX, api)


def bind() -> bool:
    """Bring the catalog's tables (CHECKS, BY_ID, RULES, RULE_CHECK) in line with the registry: the generic
    families of each API registered since, in place (every reader of the tables sees them), and the checks
    of an API no longer registered out. True when something changed."""
    changed = False
    for name in [n for n in _BOUND if n not in apis.APIS]:
        gone = set(_BOUND.pop(name))
        CHECKS[:] = [c for c in CHECKS if c.id not in gone]
        for table in (BY_ID, RULES, RULE_CHECK):
            for key in [k for k in table if k.split(":")[0] in gone]:
                del table[key]
        changed = True
    shipped = {name for _, name in SHIPPED}
    for name, module in apis.APIS.items():
        if name in shipped or name in _BOUND:
            continue
        bound: list[Check] = []
        for contract, (rules, _build) in GENERIC_FAMILIES.items():
            for rid, (level, evidence) in rules(module.PREFIX).items():
                RULES[rid] = Rule(rid, level, evidence)
                RULE_CHECK[rid] = rid.split(":")[0]
            bound += family(name, contract)
        CHECKS.extend(bound)
        BY_ID.update({c.id: c for c in bound})
        _BOUND[name] = tuple(c.id for c in bound)
        changed = True
    return changed


def __getattr__(name: str) -> Any:
    if name == "APIS":  # the checked APIs: every registered one, read when asked
        return apis.names()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def checks_for_fault(fault: str) -> list[Check]:
    return [c for c in CHECKS if fault in c.faults]


# The rules each reference-server fault plants (what a client run under the fault measures). A
# verdict on a failing rule comes from the faults that plant it (conformance/impact.py).
PLANTED: dict[str, tuple[str, ...]] = {
    "flatten-interleaved-reasoning": ("AN-HIST-001", "RS-HIST-001"),
    "truncate-agent-reasoning": ("AN-HIST-001", "RS-HIST-001", "AN-HIST-002", "CH-HIST-002", "RS-HIST-002"),
    "rewrite-history-reasoning": ("AN-HIST-002", "CH-HIST-002", "RS-HIST-002"),
    "trim-reasoning-before-last-query": ("AN-HIST-001:plain-turn", "RS-HIST-001:plain-turn"),
    "thinking-off-by-default": ("AN-HIST-003",),
    "preamble-not-stripped": ("AN-PREAMBLE-001", "AN-PREAMBLE-002", "AN-PREAMBLE-001:cch", "AN-PREAMBLE-002:cch"),
    "preamble-simple-strip": ("AN-PREAMBLE-002", "AN-PREAMBLE-002:cch"),
    "message-start-zero-input-tokens": ("AN-USAGE-001", "AN-USAGE-002", "AN-USAGE-003"),
    "message-start-estimated-input-tokens": ("AN-USAGE-001", "AN-USAGE-002"),
    "count-tokens-mismatch": ("AN-USAGE-001",),
    "count-tokens-estimate": ("AN-USAGE-001",),
    "model-slash-404": ("AN-ROUTE-002", "AN-ROUTE-003", "AN-ROUTE-004"),
    "model-percent-2f-not-decoded": ("AN-ROUTE-003", "AN-ROUTE-004"),
    "reject-cache-control": ("AN-REQ-001",),  # AN-REQ-003 fails too (Claude Code's shape carries cache_control),
    # but a client measured under this fault speaks for cache_control, not for the rest of that shape
    "reject-system-role": ("AN-REQ-002",),
    "bad-input-500": ("AN-ERR-001", "CH-ERR-001", "RS-ERR-001"),
    "wrong-error-shape": ("AN-ERR-001", "AN-ERR-002", "CH-ERR-001", "RS-ERR-001"),
    "lenient-input": ("AN-ERR-001:lenient", "CH-ERR-001:lenient", "RS-ERR-001:lenient"),
    "reject-unknown-fields": ("AN-REQ-003", "CH-REQ-001", "RS-REQ-001"),
    "buffer-tool-calls": ("AN-DISPATCH-001", "CH-DISPATCH-001", "RS-DISPATCH-001"),
    "dispatch-missing": ("CH-DISPATCH-002",),
    "dispatch-twice": ("CH-DISPATCH-002",),
    "dispatch-late": ("CH-DISPATCH-002",),
    "unknown-model-openai-shape": ("AN-ERR-002:generation", "AN-ERR-002:shape"),
    "invalid-tool-json": ("AN-GRAMMAR-TOOL-JSON", "CH-GRAMMAR-TOOL-ARGS", "RS-GRAMMAR-ARGS-JSON"),
    "an-block-index-skip": ("AN-GRAMMAR-INDEX",),
    "an-delta-type-mismatch": ("AN-GRAMMAR-DELTA-TYPE",),
    "an-signature-after-stop": ("AN-GRAMMAR-SIGNATURE",),
    "an-missing-block-stop": ("AN-GRAMMAR-BLOCK-UNSTOPPED", "AN-GRAMMAR-ONE-OPEN"),
    "an-delta-unstarted-block": ("AN-GRAMMAR-BLOCK-UNKNOWN",),
    "an-end-turn-after-tool-use": ("AN-GRAMMAR-STOP-TOOL-USE",),
    "an-missing-message-stop": ("AN-GRAMMAR-STOP-MISSING",),
    "an-event-name-mismatch": ("AN-GRAMMAR-EVENT-NAME",),
    "an-usage-missing": ("AN-GRAMMAR-DELTA-USAGE", "AN-STREAM-009"),
    "anthropic-models-shape-ignored": ("AN-ROUTE-001",),
    "openai-models-bare-entries": ("CH-ROUTE-001",),
    "detokenize-drops-special": ("CH-TOKENIZE-001",),
    "chat-repeat-tool-id-name": ("CH-GRAMMAR-TOOL-REPEAT",),
    "chat-finish-stop-after-tool-calls": ("CH-GRAMMAR-FINISH-TOOL-CALLS",),
    "chat-no-usage-chunk": ("CH-GRAMMAR-USAGE-CHUNK",),
    "chat-no-done": ("CH-GRAMMAR-DONE",),
    "rs-sequence-gap": ("RS-GRAMMAR-SEQUENCE",),
    "rs-no-indices": ("RS-GRAMMAR-SEQUENCE", "RS-GRAMMAR-OUTPUT-INDEX"),
    "an-tool-start-no-input": ("AN-GRAMMAR-TOOL-START",),
    "rs-arguments-done-mismatch": ("RS-GRAMMAR-ARGS-DONE",),
    "rs-missing-output-item-done": ("RS-GRAMMAR-ITEM-ORDER", "RS-GRAMMAR-ITEM-UNCLOSED"),
    "rs-missing-completed": ("RS-GRAMMAR-COMPLETED",),
    "rs-ignore-previous-response-id": ("RS-STATE-001",),
    "rs-missing-call-id": ("RS-GRAMMAR-FUNCTION-CALL",),
    "rs-no-encrypted-content": ("RS-STATE-002",),
    "rs-fields-dropped": ("RS-REQ-002",),
    "rs-require-input": ("RS-ERR-001:allowed",),
    "reject-compressed-body": ("RS-REQ-001:zstd",),
    "ignore-tool-choice": tuple(f"{p}-TOOLS-{r}" for p in _PREFIXES
                                for r in ("001:forced", "001:named", "002")),
    "parallel-calls-not-disabled": ("AN-TOOLS-003", "CH-TOOLS-003", "RS-TOOLS-003"),
    "strict-ignored": ("AN-TOOLS-004", "CH-TOOLS-004", "RS-TOOLS-004"),
    "forced-cut-raw-markup": ("AN-TOOLS-005:markup", "CH-TOOLS-005:markup", "RS-TOOLS-005:markup"),
    "usage-cache-only-in-final": ("AN-USAGE-004",),
    "usage-cached-outside-prompt": ("CH-USAGE-001:cached", "RS-USAGE-001:cached", "CH-USAGE-001", "RS-USAGE-001"),
    "nonstream-no-stop-sequence": ("AN-SHAPE-001:stop",),
    "nonstream-no-object": ("CH-SHAPE-001", "RS-SHAPE-001"),
    "nonstream-calls-as-text": ("AN-SHAPE-001:calls", "CH-SHAPE-001:calls"),
    **{f: tuple(f"{p}-CTX-{r}" for p in _PREFIXES
                for r in ("001", "001:marker", "003:window", "003:marker"))
       for f in ("overflow-detail-shape", "overflow-500", "overflow-stream-error")},
    "overflow-bare-400": tuple(f"{p}-CTX-{r}" for p in _PREFIXES for r in ("001:marker", "003:marker")),
    "usage-current-turn-only": tuple(f"{p}-CTX-{n}" for p in _PREFIXES for n in ("002", "003")),
    "cache-static-prefix-only": tuple(f"{p}-CTX-004" for p in _PREFIXES),
}

PLANTED.update({  # issue 30: request shapes and tool kinds
    "rs-function-tools-only": ("RS-TOOLKIND-001",),
    "rs-custom-tool-dropped": ("RS-TOOLKIND-002",),
    "rs-custom-call-as-function": ("RS-TOOLKIND-002",),
    "rs-narrow-request-schema": ("RS-TOOLKIND-003", "RS-TOOLKIND-003:ids", "RS-REQ-003"),
    "reject-cache-control-extensions": ("AN-REQ-004", "AN-REQ-004:scope", "AN-REQ-004:thinking"),
    "reject-tool-result-image": ("AN-REQ-005",),
    "reject-server-tools": ("AN-REQ-006",),
    "server-tools-as-client-tools": ("AN-REQ-006:client",),
    "reject-history-thinking": ("AN-REQ-007",),
    "no-count-tokens-route": ("AN-USAGE-005:route",),
    "count-tokens-partial": ("AN-USAGE-005",),
    "chat-history-reasoning-one-name": ("CH-HIST-003",),
    "thinking-off-output-as-reasoning": ("CH-REQ-002:tools",),
    "stream-tool-input-empty": ("AN-TOOLS-006", "CH-TOOLS-006", "RS-TOOLS-006"),
    "chat-stream-call-dropped": ("CH-TOOLS-006",),
})
for _fault, _more in (("reject-unknown-fields", ("CH-REQ-002:kwargs",)), ("bad-input-500", ("RS-REQ-003:probe",)),
                      ("wrong-error-shape", ("RS-REQ-003:probe",)),
                      # the tool-kind and streamed-argument checks judge what these faults break too
                      ("invalid-tool-json", ("AN-TOOLS-006", "CH-TOOLS-006", "RS-TOOLS-006")),
                      ("strict-ignored", ("AN-TOOLS-006", "CH-TOOLS-006", "RS-TOOLS-006")),
                      ("rs-missing-call-id", ("RS-TOOLKIND-002:call-id",))):
    PLANTED[_fault] = (*PLANTED[_fault], *_more)


# Checks that send a real client's own request shape (API_FACTS: what the real clients send; the entry's
# client_shape): when the endpoint refuses that request for its own limits, that client would break on this
# deployment. Read from the entries (kept for readers of the table).
CLIENT_SHAPES: dict[str, str] = {c.id: c.client_shape for c in CHECKS if c.client_shape}


def faults_planting(rule_id: str) -> list[str]:
    """The reference-server faults whose violation includes ``rule_id``."""
    return [f for f, rules in PLANTED.items() if rule_id in rules]
