"""The form of a violation: what an endpoint did wrong, in a word, so that a failing rule is charged with
a real client's measurement only when the fault measured planted the same thing (issue 39).

A rule names a contract; a fault breaks it one way. A 400 refusal of a forced call is not malformed
tool JSON, though both fail ``AN-TOOLS-006``; a wrong ``output_index`` is not a missing
``output_item.done``, though both fail ``RS-GRAMMAR-ITEM-ORDER``. So a failure's form is read from
what was seen:

- the failing exchange's HTTP status first: ``refused`` (4xx), ``server-error`` (5xx), ``no-answer``
  (no status: the connection failed);
- else, for the rules that name several violations (``SPLITS``), the finding's own words pick the
  form (``no-match`` when none of them fits: matched with no measurement);
- else ``answered``: the endpoint answered and broke the rule the one way the rule names.

``PLANTED_FORMS`` gives each reference-server fault the form(s) of what it plants (beside
``catalog.PLANTED``, the rules): a measurement of that fault speaks for a failing rule only when the
rule is planted by it *and* the failure's form is one of these (``conformance.impact.verdicts_for``).
The fault matrix proves the table: under each fault, the checks that fail on a rule it plants fail in
one of its forms (``fault_matrix.FaultRun.problems``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["ANSWERED", "FORMS", "NO_ANSWER", "NO_MATCH", "PLANTED_FORMS", "REFUSED", "SERVER_ERROR", "SPLITS",
           "form_of", "planted_forms", "seen"]

REFUSED, SERVER_ERROR, NO_ANSWER, ANSWERED, NO_MATCH = "refused", "server-error", "no-answer", "answered", "no-match"
ITEM_NOT_DONE, UNKNOWN_ITEM = "item-not-done", "unknown-item"
FIELD_MISSING, FIELD_CHANGED, NUMBER_GAP, NUMBER_START = "field-missing", "field-changed", "number-gap", "number-start"
EVENT_MISSING, AFTER_END = "event-missing", "after-end"
CHOICE_IGNORED, CALL_DROPPED = "choice-ignored", "call-dropped"
ARGS_NOT_JSON, ARGS_SCHEMA, UNDECLARED_TOOL = "args-not-json", "args-schema", "undeclared-tool"
STREAM_ERROR = "stream-error"

#: What each form means, in the words a client line uses ("not measured for this violation: ...").
FORMS: dict[str, str] = {
    REFUSED: "a request refused (HTTP 4xx)", SERVER_ERROR: "a server error (HTTP 5xx)",
    NO_ANSWER: "no answer (the connection failed)", ANSWERED: "an answer that breaks the rule",
    NO_MATCH: "a violation no fault plants",
    ITEM_NOT_DONE: "an item never closed (output_item.done missing)",
    UNKNOWN_ITEM: "an event for an item never added (a wrong output_index)",
    FIELD_MISSING: "a field missing from an event", FIELD_CHANGED: "a field changed between events",
    NUMBER_GAP: "a sequence number skipped", NUMBER_START: "a sequence that starts wrong",
    EVENT_MISSING: "the terminal event missing", AFTER_END: "an event after the terminal event",
    CHOICE_IGNORED: "a forced tool choice answered with text", CALL_DROPPED: "a tool call lost from the stream",
    ARGS_NOT_JSON: "tool arguments that are not JSON", ARGS_SCHEMA: "tool arguments against the tool's schema",
    UNDECLARED_TOOL: "a call of a tool the request does not declare",
    STREAM_ERROR: "an error inside a 200 stream",
}

#: Rules that name several violations: (rule pattern, ((pattern of the finding's words, form), ...)).
SPLITS: tuple[tuple[re.Pattern[str], tuple[tuple[re.Pattern[str], str], ...]], ...] = tuple(
    (re.compile(rule), tuple((re.compile(words), form) for words, form in forms)) for rule, forms in (
        ("RS-GRAMMAR-ITEM-ORDER$", ((r"added while item .* is open|done without function_call_arguments.done",
                                     ITEM_NOT_DONE), (r"which was never added", UNKNOWN_ITEM))),
        ("RS-GRAMMAR-SEQUENCE$", ((r"without an integer sequence_number", FIELD_MISSING),
                                  (r"^sequence_number \S+ after", NUMBER_GAP),
                                  (r"^first sequence_number", NUMBER_START))),
        ("RS-GRAMMAR-COMPLETED$", ((r"ended without", EVENT_MISSING), (r"after the terminal", AFTER_END))),
        ("AN-GRAMMAR-TOOL-START$", ((r"^tool_use start without its input", FIELD_MISSING),)),
        ("RS-GRAMMAR-OUTPUT-INDEX$", ((r"without an integer (?:output|content)_index", FIELD_MISSING),)),
        ("RS-GRAMMAR-FUNCTION-CALL$", ((r"added without", FIELD_MISSING), (r"changed between", FIELD_CHANGED))),
        # the streamed forced call of a strict tool (test_tool_kinds.py)
        (r"^[A-Z]+-TOOLS-006$", ((r"has no tool call.*answered with text", CHOICE_IGNORED),
                                 (r"has no tool call", CALL_DROPPED), (r"not JSON", ARGS_NOT_JSON),
                                 # input that did not parse, kept as text by the fold (Anthropic)
                                 (r"do not follow its schema: .* is not of type 'object'", ARGS_NOT_JSON),
                                 (r"do not follow its schema", ARGS_SCHEMA),
                                 (r"a tool the request does not declare", UNDECLARED_TOOL))),
        # the over-long prompt (test_context.py): refused after a 200, inside the stream, or taken
        (r"^[A-Z]+-CTX-(001|001:marker|003:window|003:marker)$", ((r"inside a 200 stream", STREAM_ERROR),
                                                                  (r"", ANSWERED))),
    ))


def form_of(rule: str, words: str, status: int | None = 200) -> str:
    """The form of a failure of ``rule``: ``words`` are what it said (the finding's message, or the
    failure's), ``status`` the HTTP status of the failing exchange (None: no answer at all)."""
    if status is None:
        return NO_ANSWER
    if status >= 500:
        return SERVER_ERROR
    if status >= 400:
        return REFUSED
    for pattern, forms in SPLITS:
        if pattern.search(rule):
            return next((form for words_pattern, form in forms if words_pattern.search(words)), NO_MATCH)
    return ANSWERED


def seen(rule: str, form: str, words: str) -> str:
    """'AN-TOOLS-006: a request refused (HTTP 4xx) (HTTP 400)': what a client line says was seen. A refusal's or
    an error's own text is the check's message, printed once with the check: the line keeps only its status."""
    text = " ".join(words.split())[:160]
    if form == ANSWERED and text:  # the rule and the words say it
        return f"{rule}: {text}"
    status = re.search(r"\bHTTP \d{3}\b", text) if form in (REFUSED, SERVER_ERROR) else None
    if status or form in (REFUSED, SERVER_ERROR):
        text = status.group(0) if status else ""
    return f"{rule}: {FORMS.get(form, form)}" + (f" ({text})" if text else "")


def _forms(*names: str) -> tuple[str, ...]:
    return names


#: Per reference-server fault, the form(s) of the violations it plants (catalog.PLANTED has the rules).
PLANTED_FORMS: dict[str, tuple[str, ...]] = {
    # an answer that breaks the rule the fault plants (a stream, a body, a count, a history)
    **dict.fromkeys((
        "flatten-interleaved-reasoning", "truncate-agent-reasoning", "rewrite-history-reasoning",
        "thinking-off-by-default", "preamble-not-stripped", "preamble-simple-strip",
        "message-start-zero-input-tokens", "message-start-estimated-input-tokens", "count-tokens-mismatch",
        "usage-cache-only-in-final", "usage-current-turn-only", "cache-static-prefix-only",
        "usage-cached-outside-prompt", "nonstream-no-stop-sequence", "nonstream-no-object", "lenient-input",
        "buffer-tool-calls", "dispatch-missing", "dispatch-twice", "an-block-index-skip",
        "an-delta-type-mismatch", "an-signature-after-stop", "an-missing-block-stop", "an-delta-unstarted-block",
        "an-end-turn-after-tool-use", "an-missing-message-stop", "an-event-name-mismatch", "an-usage-missing",
        "anthropic-models-shape-ignored", "openai-models-bare-entries", "detokenize-drops-special", "chat-repeat-tool-id-name",
        "chat-finish-stop-after-tool-calls", "chat-no-usage-chunk", "chat-no-done", "rs-arguments-done-mismatch",
        "rs-ignore-previous-response-id", "rs-no-encrypted-content", "rs-fields-dropped", "parallel-calls-not-disabled",
        "forced-cut-raw-markup", "server-tools-as-client-tools", "count-tokens-partial",
        "chat-history-reasoning-one-name", "thinking-off-output-as-reasoning", "rs-custom-tool-dropped",
        "rs-custom-call-as-function", "count-tokens-estimate", "dispatch-late", "trim-reasoning-before-last-query",
        "nonstream-calls-as-text"), _forms(ANSWERED)),
    # a request refused (4xx): the request shapes and routes the fault refuses
    **dict.fromkeys((
        "model-slash-404", "model-percent-2f-not-decoded", "reject-cache-control", "reject-system-role",
        "reject-unknown-fields", "rs-require-input", "reject-compressed-body", "rs-function-tools-only",
        "rs-narrow-request-schema", "reject-cache-control-extensions", "reject-tool-result-image",
        "reject-server-tools", "reject-history-thinking", "no-count-tokens-route", "overflow-detail-shape",
        "overflow-bare-400", "unknown-model-openai-shape"), _forms(REFUSED)),
    "wrong-error-shape": _forms(REFUSED, SERVER_ERROR),  # the API's refusal in another shape (a 404 too)
    "bad-input-500": _forms(SERVER_ERROR),
    "overflow-500": _forms(SERVER_ERROR),
    "overflow-stream-error": _forms(STREAM_ERROR),
    "invalid-tool-json": _forms(ANSWERED, ARGS_NOT_JSON),
    "stream-tool-input-empty": _forms(ANSWERED, ARGS_SCHEMA),
    "strict-ignored": _forms(ANSWERED, ARGS_SCHEMA),
    "chat-stream-call-dropped": _forms(ANSWERED, CALL_DROPPED),
    "ignore-tool-choice": _forms(ANSWERED),
    "rs-sequence-gap": _forms(NUMBER_GAP),
    "rs-no-indices": _forms(FIELD_MISSING),
    "an-tool-start-no-input": _forms(FIELD_MISSING),
    "rs-missing-output-item-done": _forms(ANSWERED, ITEM_NOT_DONE),
    "rs-missing-completed": _forms(EVENT_MISSING),
    "rs-missing-call-id": _forms(ANSWERED, FIELD_MISSING),
}


def planted_forms(fault: str) -> tuple[str, ...]:
    """The forms of what ``fault`` plants (() for a fault that plants none: a transport fault)."""
    return PLANTED_FORMS.get(fault, ())


def unknown_forms(names: Iterable[str]) -> list[str]:
    """Forms named in ``PLANTED_FORMS`` that ``FORMS`` does not define (a test keeps this empty)."""
    return sorted({f for n in names for f in planted_forms(n)} - set(FORMS))
