"""Witnesses that turn N's reasoning and tool calls come back verbatim, in order, in turn N+1's
prompt. Strongest first; `--witness` forces one, `auto` takes the strongest the endpoint offers:

1. tokenize: the chat-form /tokenize rendering of turn N+1's history starts with turn N's prompt
   and holds turn N's parts (r0, t0, r1, t1) in order after it;
2. cache: turn N+1 reads at least turn N's prompt plus output from the prefix cache, less SLACK
   tokens of block granularity, or less the endpoint's own cache block where the counts it reports
   (the turn and a repeat of it) share a coarser one (`cache_slack`: vLLM on CPU caches whole blocks of
   128 tokens);
3. timing: turn N+1's time to first token with the history as the endpoint returned it costs about
   what a fully cached repeat costs, far less than with the reasoning deliberately rewritten (a
   paired Wilcoxon test shows the rewrite is slower, so prefix reuse is measurable at all).

No history check passes without presence shown (issue 41): the cache and timing witnesses see that the
history is rendered the same each time, not that the reasoning is in it, so where one of them spoke the
presence witness speaks too: turn N+1 sent with and without turn N's reasoning (all else the same, thinking
on), whose prompt usage must differ by about the reasoning's size (at least PRESENCE_SHARE of chars/4).
Reasoning the endpoint itself emitted and then absent from the next prompt fails the check (ReasoningAbsent,
named as a drop, with the hop where the kit can tell); only the kit's reasoning absent while the model never
reasons is inconclusive. The tokenize witness sees the parts themselves (a rendering with none of turn N's
reasoning is the same ReasoningAbsent).

A witness that cannot be used raises WitnessUnavailable; the check then tries the next one (auto)
or is skipped (forced), saying why. A witness proves it works before it testifies: the tokenize
witness is used only after the route tokenized a known non-empty conversation in the chat form into
a non-empty list of ids and /detokenize gave text holding it back (a route that takes another form,
e.g. `{"content": ...}`, answers the chat form with no tokens: no witness). The result's notes say
which witness spoke (and why the stronger ones could not).

The interleaved-history checks judge two cases. First the kit's own turn: the kit builds
r0 t0 r1 t1 from the scenario's script, with the tool results, as a resumed session sends it back
(thinking blocks carry a signature the endpoint issued, where it issued one), so the rebuild is
judged whether or not the model ever interleaves; the tokenize witness sees its order, the cache
witness whether it is rendered the same once a later turn follows it (a template that drops or
reformats past agent reasoning), timing has no kit case. Then the model's own turn, sampled up to
--tries times until the model interleaves (turn N's output against turn N+1's prompt). The kit's cache case
is the agent loop going on (the kit's turn once more, with its results: the check's own rule); the case
across a later plain user turn is judged apart (`plain_turn_case`, `<ID>:plain-turn`, SHOULD: the seed
leaves it to the model, unless the model's own template keeps the reasoning there).
"""

from __future__ import annotations

import copy
import json
import math
import statistics
import uuid
from collections.abc import Callable
from typing import Any

from harnesscheck.protocol import apis
from harnesscheck.conformance import catalog
from harnesscheck.conformance.session import Session, final_answer, paths_in
from harnesscheck.conformance.verdict import CheckFailed, fail, inconclusive, ok_response, skip
from harnesscheck.protocol.wire.transcript import Transcript
from harnesscheck.stats import wilcoxon_test

WITNESSES = ("tokenize", "cache", "timing")
TOKENIZE_PREFIXES = ("/v1", "")  # the tokenize routes are probed under both
SLACK = 64  # tokens: block granularity plus the end-of-turn marker
MAX_BLOCK = 256  # tokens: the coarsest cache block of the serving stacks (vLLM on CPU: 128, or 256)
TIMING_PAIRS = 8  # sessions; Wilcoxon p < 0.05 survives a pair the wrong way
TIMING_SHARE = 0.35  # the share of a full rewrite's extra cost that verbatim history may still pay


Turn1 = tuple[dict[str, Any], dict[str, Any]]  # turn 1's request body and its (folded) answer


class WitnessUnavailable(Exception):
    pass


# -- shared pieces ---------------------------------------------------------------------------------

def fresh_first(hc: Session, api: str, scenario: str) -> dict[str, Any]:
    """Turn 1 with a unique first system line, so no other request warmed its cache."""
    body = apis.get(api).first(hc.scenario(scenario), hc.endpoint.model)
    return apis.get(api).with_system_prefix(body, f"[session {uuid.uuid4().hex}]\n")


def run_turn1(hc: Session, api: str, scenario: str) -> tuple[dict[str, Any], dict[str, Any], Transcript]:
    body = fresh_first(hc, api, scenario)
    t = hc.post(api, apis.get(api).PATH, body, stream=True, label="turn 1")
    ok_response(t, "turn 1")
    answer = final_answer(api, t)
    if answer is None:
        fail("turn 1's stream folds to no answer", transcript=t)
    return body, answer, t


def parts_of(api: str, answer: dict[str, Any]) -> list[tuple[str, str]]:
    """(kind, text) in model order: "reasoning" and its text, or "tool" and the call's name."""
    return [("tool" if kind == "tool_call" else kind, text) for kind, text in apis.get(api).parts(answer)
            if kind != "text"]


def usage_of(api: str, answer: dict[str, Any]) -> tuple[int, int, int]:
    """(prompt total, output tokens, cached prompt tokens) in each API's accounting."""
    return apis.get(api).usage_tokens(answer)


def rewritten(api: str, answer: dict[str, Any]) -> dict[str, Any]:
    """The answer with its first reasoning edited at its start (so everything after is new to the
    cache), as a client or server that rewrites history would send it."""
    edited = apis.get(api).rewritten(answer)
    if edited is None:
        raise WitnessUnavailable("the model's turn has no reasoning to rewrite")
    return edited


def _usage_only(api: str, body: dict[str, Any]) -> int | None:
    """The output limit of a request whose answer only its usage is read from: the API's smallest, unless
    the request thinks with a budget (Anthropic: max_tokens must exceed budget_tokens): then its own."""
    return None if (body.get("thinking") or {}).get("budget_tokens") else apis.get(api).MIN_OUTPUT_TOKENS


def cache_slack(cached: int, repeat: int) -> int:
    """The shortfall the cache witness forgives, from the cached counts of a request and of its repeat:
    SLACK, or the endpoint's cache block where both counts share a coarser one (their greatest common
    divisor, at most MAX_BLOCK): a server caching whole 128-token blocks reads 128 of a verbatim 254."""
    block = math.gcd(cached, repeat) if cached > 0 and repeat > 0 else 0
    return max(SLACK, block) if block <= MAX_BLOCK else SLACK


def _second(hc: Session, api: str, body: dict[str, Any], *, label: str, max_tokens: int | None = None) -> Transcript:
    body = copy.deepcopy(body)
    body["stream"] = False
    body.pop("stream_options", None)
    if max_tokens:
        body[apis.get(api).MAX_TOKENS_FIELD] = max_tokens
    t = hc.post(api, apis.get(api).PATH, body, label=label)
    ok_response(t, label)
    return t


# -- witnesses -------------------------------------------------------------------------------------

PROBE_TEXT = "Witness probe: 15 * 23 = 345, and the word harnesscheck."
_PROVEN: dict[tuple[str, str], tuple[str, str]] = {}  # (url, model) -> (prefix, "") or ("", why not)


def _tokens(t: Transcript) -> list[int] | None:
    """The token ids of a tokenize answer, or None when it holds no non-empty list of integers."""
    tokens = (t.json_body() or {}).get("tokens") if isinstance(t.json_body(), dict) else None
    ok = isinstance(tokens, list) and tokens and all(isinstance(x, int) and not isinstance(x, bool) for x in tokens)
    return tokens if ok else None


def _detokenized(hc: Session, prefix: str, tokens: list[int], label: str) -> Transcript:
    return hc.post("chat", f"{prefix}/detokenize", {"model": hc.endpoint.model, "tokens": tokens}, label=label)


def tokenize_route(hc: Session) -> str:
    """The prefix ("/v1" or "") whose chat-form /tokenize proved it works: a known non-empty conversation
    became a non-empty list of ids and /detokenize gave text holding it back. WitnessUnavailable, with
    what the route answered, otherwise. Proven once per endpoint and model."""
    key = (hc.endpoint.url, hc.endpoint.model)
    if key not in _PROVEN:
        _PROVEN[key] = _prove(hc)
    prefix, why = _PROVEN[key]
    if why:
        raise WitnessUnavailable(why)
    return prefix


def _prove(hc: Session) -> tuple[str, str]:
    payload = {"model": hc.endpoint.model, "messages": [{"role": "user", "content": PROBE_TEXT}],
               "add_generation_prompt": True}
    for prefix in TOKENIZE_PREFIXES:  # vLLM serves /tokenize without /v1
        where = f"{prefix}/tokenize"
        t = hc.post("chat", where, payload, label=f"tokenize witness probe (chat form, {where})")
        if t.status in (404, 405):
            continue
        if not t.ok:
            return "", f"chat-form {where} refused a known conversation: HTTP {t.status} {t.text_body()[:120]}"
        tokens = _tokens(t)
        if tokens is None:
            return "", (f"{where} answered the chat form of a non-empty conversation with no token ids "
                        f"({t.text_body()[:120]}): it does not speak that form")
        back = _detokenized(hc, prefix, tokens, f"tokenize witness probe (detokenize, {prefix or 'no /v1'})")
        if back.status in (404, 405):
            return "", f"the endpoint offers {where} but no {prefix}/detokenize"
        text = (back.json_body() or {}).get("prompt") if isinstance(back.json_body(), dict) else None
        if not back.ok or not isinstance(text, str) or PROBE_TEXT not in text:
            return "", (f"{prefix}/detokenize did not give the probe conversation back (HTTP {back.status}: "
                        f"{back.text_body()[:120]})")
        return prefix, ""
    return "", "the endpoint offers no chat-form /v1/tokenize or /tokenize"


def _rendered(hc: Session, api: str, body: dict[str, Any], *, add_generation_prompt: bool) -> str:
    prefix = tokenize_route(hc)
    payload: dict[str, Any] = {"model": hc.endpoint.model, "add_generation_prompt": add_generation_prompt,
                               "tools": body.get("tools")}
    if _thinking_asked(body):  # the template renders as the request would (vLLM's chat_template_kwargs)
        payload["chat_template_kwargs"] = {"enable_thinking": True}
    payload.update(apis.get(api).tokenize_fields(body))
    t = hc.post("chat", f"{prefix}/tokenize", payload, label=f"tokenize (chat form, {prefix or 'no /v1'})")
    if t.status == 400:
        raise WitnessUnavailable(f"chat-form {prefix}/tokenize refused this history shape: {t.text_body()[:160]}")
    ok_response(t, "tokenize")
    tokens = _tokens(t)
    if tokens is None:
        raise WitnessUnavailable(f"chat-form {prefix}/tokenize gave no token ids for this history: "
                                 f"{t.text_body()[:160]}")
    back = _detokenized(hc, prefix, tokens, "detokenize")
    ok_response(back, "detokenize")
    return (back.json_body() or {}).get("prompt", "")


def tokenize_witness(hc: Session, api: str, scenario: str, turn1: Turn1) -> None:
    body, answer = turn1
    parts = parts_of(api, answer)
    before = _rendered(hc, api, body, add_generation_prompt=True)
    after_body = apis.get(api).follow(body, answer, hc.scenario(scenario), 1)
    after = _rendered(hc, api, after_body, add_generation_prompt=True)
    # The generation prompt may carry an opened <think>; compare up to the last user text.
    stem = before[: before.rfind(hc.scenario(scenario).trigger)]
    if not after.startswith(stem):
        fail("turn 2's rendered prompt does not start with turn 1's prompt", transcript=hc.attached[-1][1])
    cursor = len(stem)
    reasoning = [text.strip() for kind, text in parts if kind == "reasoning"]
    if reasoning and not any(text in after[cursor:] for text in reasoning):
        raise ReasoningAbsent("tokenize witness: turn 2's rendered history holds none of turn 1's reasoning",
                              hc.attached[-1][1])
    for kind, text in parts:
        at = after.find(text.strip(), cursor)
        if at < 0:
            what = "reasoning" if kind == "reasoning" else f"tool call {text}"
            fail(f"tokenize witness: turn 2's rendered history lacks or reorders the {what} of turn 1; expected "
                 f"{' -> '.join(k + ':' + t.strip()[:24] for k, t in parts)} in order", transcript=hc.attached[-1][1])
        cursor = at + len(text.strip())


def cache_witness(hc: Session, api: str, scenario: str, turn1: Turn1) -> None:
    body, answer = turn1
    prompt1, output1, _ = usage_of(api, answer)
    follow = apis.get(api).follow(body, answer, hc.scenario(scenario), 1)
    small = _usage_only(api, follow)  # only the usage is read
    second = _second(hc, api, follow, label="turn 2 (history kept)", max_tokens=small)
    _, _, cached2 = usage_of(api, second.json_body() or {})
    if cached2 == 0:
        repeat = _second(hc, api, follow, label="turn 2 repeated (control)", max_tokens=small)
        if usage_of(api, repeat.json_body() or {})[2] == 0:
            raise WitnessUnavailable("the endpoint reports no cached prompt tokens")
    slack = SLACK
    if cached2 < prompt1 + output1 - SLACK:  # the endpoint's cache block may be coarser: its repeat tells
        repeat = _second(hc, api, follow, label="turn 2 repeated (cache block)", max_tokens=small)
        slack = cache_slack(cached2, usage_of(api, repeat.json_body() or {})[2])
    if cached2 < prompt1 + output1 - slack:
        fail(f"cache witness: turn 2 read {cached2} prompt tokens from the cache; turn 1's prompt ({prompt1}) plus "
             f"output ({output1}) less {slack} is {prompt1 + output1 - slack}: the history did not come back "
             "verbatim", transcript=second)


def _ttft_ms(t: Transcript) -> float:
    if t.timings.end_ns is None:
        return float("nan")
    # A non-stream answer of the API's smallest output (1 token; 16 on Responses): prefill plus a
    # fixed, small number of decode steps, the same in the three requests compared.
    return t.timings.end_ns / 1e6


def timing_witness(hc: Session, api: str, scenario: str, turn1: Turn1) -> None:
    """Per session: turn 2 as returned (first time), the same again (now fully cached), and turn 2
    with its reasoning rewritten at the start (everything from there recomputed). If the history
    came back verbatim, the first turn 2 costs about what the repeat costs: only the new tail
    (tool results) is computed. Judged on the share of the rewrite's extra cost that it pays."""
    kept, repeat, edited = [], [], []
    cap = apis.get(api).MIN_OUTPUT_TOKENS
    for n in range(TIMING_PAIRS):  # the given turn 1 first, then fresh sessions
        body, answer = turn1 if n == 0 else run_turn1(hc, api, scenario)[:2]
        follow = apis.get(api).follow(body, answer, hc.scenario(scenario), 1)
        other = apis.get(api).follow(body, rewritten(api, answer), hc.scenario(scenario), 1)
        kept.append(_ttft_ms(_second(hc, api, follow, label="turn 2, history as returned", max_tokens=cap)))
        repeat.append(_ttft_ms(_second(hc, api, follow, label="turn 2 again (cached)", max_tokens=cap)))
        edited.append(_ttft_ms(_second(hc, api, other, label="turn 2, reasoning rewritten", max_tokens=cap)))
    med_kept, med_repeat, med_edited = (statistics.median(x) for x in (kept, repeat, edited))
    control = wilcoxon_test(repeat, edited)  # ranks: one load spike does not decide the verdict
    if not (control.p_value < 0.05 and med_edited - med_repeat > 2.0):
        raise WitnessUnavailable(f"no measurable prefix reuse (rewritten {med_edited:.1f} ms vs repeat "
                                 f"{med_repeat:.1f} ms, Wilcoxon p = {control.p_value:.3f})")
    share = (med_kept - med_repeat) / (med_edited - med_repeat)
    if share > TIMING_SHARE:
        fail(f"timing witness: turn 2 with the history as returned took {med_kept:.1f} ms (median) vs {med_repeat:.1f}"
             f" ms once cached and {med_edited:.1f} ms with its reasoning rewritten: it paid {share:.0%} of a "
             "rewrite's recompute, so the returned history was not reused verbatim", transcript=hc.attached[-3][1])


# -- presence: does turn N's reasoning reach turn N+1's prompt at all? --------------------------------

CHARS_PER_TOKEN = 4  # a rough size of the reasoning in tokens, from its characters
PRESENCE_SHARE = 0.25  # the differential must show at least this share of that size (tokenizers differ)


class ReasoningAbsent(Exception):
    """The presence witness found turn N+1's prompt no longer with turn N's reasoning than without it."""

    def __init__(self, message: str, transcript: Transcript) -> None:
        super().__init__(message)
        self.message, self.transcript = message, transcript


def reasoning_chars(api: str, answer: dict[str, Any]) -> int:
    return sum(len(text) for kind, text in apis.get(api).parts(answer) if kind == "reasoning")


def presence_witness(hc: Session, api: str, scenario: str, turn1: Turn1) -> str:
    """Turn N+1 sent twice, with and without turn N's reasoning parts (everything else the same, thinking
    on): the prompt totals the endpoint reports must differ by about the reasoning's size. Returns what it
    saw; ReasoningAbsent when they do not differ so, WitnessUnavailable when it cannot be measured (no
    reasoning in turn N, no prompt usage). The cache and timing witnesses see that the history is rendered
    the same each time, not that the reasoning is in it: a gateway that drops every thinking block sent back
    renders it the same each time."""
    body, answer = turn1
    bare = apis.get(api).without_reasoning(answer)
    if bare is None:
        raise WitnessUnavailable("turn N has no reasoning to leave out")
    body, sc = thinking_on(api, body), hc.scenario(scenario)
    kept, left = apis.get(api).follow(body, answer, sc, 1), apis.get(api).follow(body, bare, sc, 1)
    small = _usage_only(api, kept)
    with_t = _second(hc, api, kept, label="turn 2 with turn 1's reasoning (presence witness)", max_tokens=small)
    without_t = _second(hc, api, left, label="turn 2 without turn 1's reasoning (presence witness)", max_tokens=small)
    with_, without = usage_of(api, with_t.json_body() or {})[0], usage_of(api, without_t.json_body() or {})[0]
    if with_ <= 0 or without <= 0:
        raise WitnessUnavailable(f"the endpoint reports no prompt usage ({with_} and {without} prompt tokens), so "
                                 "the presence of the reasoning cannot be measured")
    size = max(1, reasoning_chars(api, answer) // CHARS_PER_TOKEN)
    need = max(1, int(size * PRESENCE_SHARE))
    seen = (f"turn 2's prompt has {with_} tokens with turn 1's reasoning and {without} without it (the reasoning "
            f"is about {size} tokens, chars/4)")
    if with_ - without < need:
        raise ReasoningAbsent(f"presence witness: {seen}: the reasoning sent back never reaches the model's prompt",
                              with_t)
    return "presence witness: " + seen


Runner = Callable[[Session, str, str, Turn1], None]
RUNNERS: dict[str, Runner] = {"tokenize": tokenize_witness, "cache": cache_witness, "timing": timing_witness}


def judge(hc: Session, api: str, scenario: str, turn1: Turn1, *, witnesses: tuple[str, ...] = WITNESSES,
          runners: dict[str, Runner] = RUNNERS) -> tuple[str, list[str]]:
    """Run the forced witness, or the strongest available one, on turn 1; return the witness used
    ("" when none could be used) and why each other one could not."""
    forced = hc.endpoint.witness
    order = [forced] if forced != "auto" else list(witnesses)
    reasons = []
    for name in order:
        if name not in witnesses or name not in runners:
            reasons.append(f"{name}: this case has no {name} witness")
            continue
        if name == "timing" and hc.endpoint.quick:
            reasons.append("timing: left out by --quick")
            continue
        # No pass without presence shown: the tokenize witness sees the parts in the rendering; the others
        # see only that it is the same each time, so the presence witness speaks after them (its requests
        # would warm the cache they read), and before their failure, whose cause it may name: ReasoningAbsent
        # goes to the caller, which knows whose reasoning it was.
        try:
            runners[name](hc, api, scenario, turn1)
        except WitnessUnavailable as why:
            reasons.append(f"{name}: {why}")
            continue
        except CheckFailed:
            if name != "tokenize":
                try:
                    presence_witness(hc, api, scenario, turn1)
                except WitnessUnavailable:
                    pass
            raise
        try:
            present = "" if name == "tokenize" else presence_witness(hc, api, scenario, turn1)
        except WitnessUnavailable as why:
            reasons.append(f"{name}: presence not shown ({why})")
            continue
        case = "the kit's turn" if runners is KIT_RUNNERS else "the model's turn"
        hc.note(f"{case} ({scenario}): the {name} witness spoke" + (f"; {present}" if present else "")
                + (f" ({'; '.join(reasons)})" if reasons else ""))
        return name, reasons
    return "", reasons


def model_turn(hc: Session, api: str, scenario: str, path: str, *, once: bool = False) -> tuple[Turn1 | None, Turn1]:
    """Turn 1 as the model answers it, sampled up to --tries times until it takes `path` (once: one
    sample, where the check's path was taken already): that turn (None if never), and the last sample."""
    if once:
        body, answer, t = run_turn1(hc, api, scenario)
        return ((body, answer) if path in paths_in(t) else None), (body, answer)
    (body, answer, _), taken = hc.until_taken((path,), lambda: run_turn1(hc, api, scenario))
    return ((body, answer) if taken else None), (body, answer)


# -- the kit's own interleaved turn ----------------------------------------------------------------

SIGNED = "interleaved"  # a scenario whose shared stream holds thinking blocks (the grammar checks judge it too)


def issued_signature(hc: Session, api: str, scenario: str) -> str:
    """A thinking signature the endpoint issued (from the scenario's shared stream), else ""."""
    if not apis.get(api).SIGNS_THINKING:
        return ""
    answer = final_answer(api, hc.stream(api, scenario)) or {}
    return next((b.get("signature") or "" for b in answer.get("content") or [] if b.get("type") == "thinking"
                 and b.get("signature")), "")


def kit_answer(api: str, scenario: Any, *, signature: str = "") -> dict[str, Any]:
    """The scenario's scripted turn 0 (r0 t0 r1 t1) as the API's answer, built by the kit (ValueError
    where one answer cannot interleave them: Chat)."""
    return apis.get(api).kit_answer(scenario, signature=signature)


def _cache_read(hc: Session, api: str, body: dict[str, Any], label: str, small: int | None) -> tuple[int, int, Transcript]:
    """(cached prompt tokens, the slack forgiven, the transcript) of `body`; WitnessUnavailable where the
    endpoint reports no cached tokens even for a repeat."""
    t = _second(hc, api, body, label=label, max_tokens=small)
    cached = usage_of(api, t.json_body() or {})[2]
    repeat: Transcript | None = None
    if cached == 0:
        repeat = _second(hc, api, body, label=f"{label}, repeated (control)", max_tokens=small)
        if usage_of(api, repeat.json_body() or {})[2] == 0:
            raise WitnessUnavailable("the endpoint reports no cached prompt tokens")
    hc.saw(catalog.CACHE_HIT)
    repeat = repeat or _second(hc, api, body, label=f"{label}, repeated (cache block)", max_tokens=small)
    total, _, again = usage_of(api, repeat.json_body() or {})
    slack = cache_slack(cached, again)
    if again < total - slack:  # the same request again, not reused: the cache cannot speak of the history
        raise WitnessUnavailable(f"the same request repeated read {again} of its {total} prompt tokens from the "
                                 "cache: the cache does not reuse a whole prompt")
    return cached, slack, t


def _once_more(answer: dict[str, Any]) -> dict[str, Any]:
    """The kit's turn again, its call ids made new (a second step of the same agent loop)."""
    return json.loads(json.dumps(answer).replace("_kit", "_kit2_"))


def kit_cache_witness(hc: Session, api: str, scenario: str, turn1: Turn1) -> None:
    """Within the agent loop: the kit's turn resumed with its tool results (X), then X with the kit's turn
    once more and its results (no user query between): the second must read X's whole prompt from the
    cache, or the endpoint renders the kit's turn differently once the loop goes on (past agent reasoning
    dropped or reformatted). The case across a later plain user turn is `plain_turn_case`."""
    body, answer = turn1
    resumed = apis.get(api).follow(body, answer, hc.scenario(scenario), 1)
    small = _usage_only(api, resumed)  # only the usage is read
    first = _second(hc, api, resumed, label="kit turn resumed", max_tokens=small)
    prompt_x = usage_of(api, first.json_body() or {})[0]
    loop = apis.get(api).follow(resumed, _once_more(answer), hc.scenario(scenario), 1)
    cached, slack, second = _cache_read(hc, api, loop, "kit turn, one more step of the agent loop", small)
    if cached < prompt_x - slack:
        fail(f"cache witness: one more step of the agent loop after the kit's interleaved turn read {cached} prompt "
             f"tokens from the cache, less than the {prompt_x} of the request that ended with that turn's tool "
             f"results, less {slack}: the turn was rendered differently once the loop went on", transcript=second)


PLAIN_USER = "Thanks. Is anything else broken?"


def plain_turn_case(hc: Session, api: str, scenario: str, turn1: Turn1) -> str:
    """Across a later plain user turn: the kit's turn resumed (X), its answer, then a plain user message (Y):
    does Y read X's whole prompt from the cache? The seed leaves this to the model (a template may drop
    reasoning before the last user query, as Qwen3's does), so a miss fails `<ID>:plain-turn` (SHOULD) and
    says so, unless the model's own template, where the endpoint renders it through /tokenize, keeps the
    reasoning there: then the endpoint departs from its model (the check's own rule, MUST). Returns what it
    saw; WitnessUnavailable where the cache cannot tell."""
    body, answer = turn1
    sc = hc.scenario(scenario)
    resumed = apis.get(api).follow(body, answer, sc, 1)
    small = _usage_only(api, resumed)
    first = _second(hc, api, resumed, label="kit turn resumed (plain-turn case)", max_tokens=small)
    prompt_x = usage_of(api, first.json_body() or {})[0]
    later = apis.get(api).append_user(apis.get(api).follow(resumed, first.json_body() or {}, sc, 2), PLAIN_USER)
    cached, slack, second = _cache_read(hc, api, later, "kit turn, after a later plain user turn", small)
    if cached >= prompt_x - slack:
        return "the kit's turn kept across a later plain user turn"
    miss = (f"cache witness: after a later plain user turn the endpoint read {cached} prompt tokens from the cache, "
            f"less than the {prompt_x} of the request that ended with the kit's turn's tool results, less {slack}: "
            "the earlier reasoning was dropped or re-rendered once a plain user turn followed")
    try:
        rendered = _rendered(hc, api, later, add_generation_prompt=True)
    except WitnessUnavailable:
        rendered = ""
    kept = bool(rendered) and all(text.strip() in rendered for kind, text in parts_of(api, answer) if kind == "reasoning")
    if kept:
        fail(miss + "; the model's own template (/tokenize) keeps that reasoning, so the endpoint departs from its "
             "model", transcript=second)
    fail(miss + " (SHOULD: whether reasoning survives a plain user turn depends on the model; within the agent loop "
         "it must, and did)", transcript=second, rule=f"{hc.check_id}:plain-turn")


def thinking_on(api: str, body: dict[str, Any]) -> dict[str, Any]:
    """The request with thinking turned on, as a resumed reasoning session sends it (the API module's
    switch: Anthropic `thinking`, Responses `reasoning.effort`, none on Chat). A server may drop past
    reasoning when thinking is off; with it on, never."""
    return apis.get(api).thinking_on(body)


def _thinking_asked(body: dict[str, Any]) -> bool:
    return (body.get("thinking") or {}).get("type") in ("enabled", "adaptive") or bool(body.get("reasoning"))


KIT_RUNNERS: dict[str, Runner] = {"tokenize": tokenize_witness, "cache": kit_cache_witness}


def _dropped(hc: Session, api: str, absent: ReasoningAbsent, whose: str, turn1: Turn1) -> str:
    """The failure's message: whose reasoning, and the hop that drops it where the kit can tell (a non-streamed
    answer to turn 1 without the reasoning its stream carried: a hop that converts answers, a gateway)."""
    body, answer = turn1
    request = {k: v for k, v in body.items() if k != "stream_options"} | {"stream": False}
    plain = hc.post(api, apis.get(api).PATH, request, label="turn 1 not streamed (is its reasoning there?)")
    said = plain.json_body() if plain.ok and isinstance(plain.json_body(), dict) else None
    lost = said is not None and not any(kind == "reasoning" for kind, _ in parts_of(api, said))
    hop = ("the non-streamed answer to turn 1 carries no reasoning while its stream did: a hop converting the "
           "answers (a gateway in front of the model) loses it, and the reasoning sent back with them" if lost else
           "a hop between the client and the model drops the reasoning sent back: a gateway converting the API, or "
           "a template that leaves it out")
    return (f"{absent.message}: {whose} reasoning, emitted by this endpoint with thinking on, is absent from the "
            f"next turn's prompt ({hop})")


def judge_interleaved(hc: Session, api: str, *, kit_scenario: str, model_scenario: str,
                      witnesses: tuple[str, ...]) -> None:
    """Both cases of an interleaved-history check: the kit's own turn, then the model's (up to --tries
    samples), and, where the kit's turn was judged, the case across a later plain user turn (SHOULD).
    Fails on either; inconclusive (not-exercised) when neither could be judged. Reasoning that never
    reaches the next prompt (the presence witness) fails at MUST where the endpoint itself emitted it;
    where the model never reasons and only the kit's reasoning is dropped, the check is inconclusive."""
    scenario = hc.scenario(kit_scenario)
    body = thinking_on(api, fresh_first(hc, api, kit_scenario))
    kit = (body, kit_answer(api, scenario, signature=issued_signature(hc, api, SIGNED)))
    kit_absent: ReasoningAbsent | None = None
    try:
        used, kit_reasons = judge(hc, api, kit_scenario, kit, witnesses=witnesses, runners=KIT_RUNNERS)
    except ReasoningAbsent as absent:
        used, kit_reasons, kit_absent = "", [absent.message], absent
    if used:
        hc.saw(catalog.KIT_INTERLEAVING)
    # The model's own turn: sampled up to --tries times only while the kit's turn could not be judged
    # (tries are spent where a path was not taken); once where it was.
    turn1, last = model_turn(hc, api, model_scenario, catalog.INTERLEAVING, once=bool(used))
    tries = 1 if used else hc.endpoint.tries
    model_reasons = [f"the model did not interleave reasoning and tool calls in {tries} tr{'y' if tries == 1 else 'ies'}"]
    model_used = ""
    if turn1 is not None:
        try:
            model_used, model_reasons = judge(hc, api, model_scenario, turn1, witnesses=witnesses)
        except ReasoningAbsent as absent:
            fail(_dropped(hc, api, absent, "the model's own interleaved", turn1), transcript=absent.transcript)
    own = ""  # what became of the model's own (not interleaved) reasoning, where only the kit's was dropped
    if turn1 is None and kit_absent is not None and any(kind == "reasoning" for kind, _ in parts_of(api, last[1])):
        try:  # the model reasoned without interleaving: does its own reasoning come back?
            own = "the model's own reasoning came back (" + presence_witness(hc, api, model_scenario, last) + ")"
        except ReasoningAbsent as absent:
            fail(_dropped(hc, api, absent, "the model's own", last), transcript=absent.transcript)
        except WitnessUnavailable as unavailable:
            own = f"whether the model's own reasoning comes back cannot be measured ({unavailable})"
    if kit_absent is not None and not model_used:
        inconclusive(f"not exercised: {kit_absent.message} (the kit's turn); "
                     + (f"{own}, but the model never interleaved reasoning and tool calls" if own else
                        f"the model never reasoned in {tries} tr{'y' if tries == 1 else 'ies'}, so whether this "
                        "endpoint keeps reasoning it emits cannot be told"))
    if used:
        try:
            hc.note(plain_turn_case(hc, api, kit_scenario, kit))
        except WitnessUnavailable as unavailable:
            hc.note(f"the plain-user-turn case not judged: {unavailable}")
    if model_used:
        if kit_absent is not None:
            hc.note(f"the kit's turn: {kit_absent.message} (the model's own reasoning came back: the endpoint keeps "
                    "what it emitted)")
        return
    if not used:
        why = "; ".join(["the kit's turn: " + "; ".join(kit_reasons), "the model's turn: " + "; ".join(model_reasons)])
        if turn1 is None:
            inconclusive(f"not exercised: {why}")
        skip("no witness available: " + why)


def judge_agent_turn(hc: Session, api: str, scenario: str, *, witnesses: tuple[str, ...]) -> None:
    """The verbatim-prefix check on the model's agent turn (reasoning, then a call), up to --tries samples;
    the model's own reasoning absent from the next prompt (the presence witness) fails it."""
    turn1, _ = model_turn(hc, api, scenario, catalog.AGENT_TURN)
    if turn1 is None:
        inconclusive(f"not exercised: the model did not reason before a tool call in {hc.endpoint.tries} tries")
    try:
        used, reasons = judge(hc, api, scenario, turn1, witnesses=witnesses)
    except ReasoningAbsent as absent:
        fail(_dropped(hc, api, absent, "the model's own agent-turn", turn1), transcript=absent.transcript)
    if not used:
        skip("no witness available: " + "; ".join(reasons))
