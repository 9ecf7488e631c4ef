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
--tries times until the model interleaves (turn N's output against turn N+1's prompt).
"""

from __future__ import annotations

import copy
import math
import statistics
import uuid
from collections.abc import Callable
from typing import Any

from harnesscheck.protocol import apis
from harnesscheck.conformance import catalog
from harnesscheck.conformance.session import Session, final_answer, paths_in
from harnesscheck.conformance.verdict import fail, inconclusive, ok_response, skip
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
        try:
            runners[name](hc, api, scenario, turn1)
        except WitnessUnavailable as why:
            reasons.append(f"{name}: {why}")
            continue
        case = "the kit's turn" if runners is KIT_RUNNERS else "the model's turn"
        hc.note(f"{case} ({scenario}): the {name} witness spoke" + (f" ({'; '.join(reasons)})" if reasons else ""))
        return name, reasons
    return "", reasons


def model_turn(hc: Session, api: str, scenario: str, path: str, *, once: bool = False) -> Turn1 | None:
    """Turn 1 as the model answers it, sampled up to --tries times until it takes `path` (once: one
    sample, where the check's path was taken already); None if never."""
    if once:
        body, answer, t = run_turn1(hc, api, scenario)
        return (body, answer) if path in paths_in(t) else None
    (body, answer, _), taken = hc.until_taken((path,), lambda: run_turn1(hc, api, scenario))
    return (body, answer) if taken else None


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


def kit_cache_witness(hc: Session, api: str, scenario: str, turn1: Turn1) -> None:
    """The kit's turn, resumed (X), then X with the answer and one more user turn (Y): Y must read X's
    whole prompt from the cache, or the endpoint renders the kit's turn differently once a later turn
    follows it (past agent reasoning dropped or reformatted)."""
    body, answer = turn1
    resumed = apis.get(api).follow(body, answer, hc.scenario(scenario), 1)
    small = _usage_only(api, resumed)  # only the usage is read (and the short answer goes into the history)
    first = _second(hc, api, resumed, label="kit turn resumed", max_tokens=small)
    prompt_x = usage_of(api, first.json_body() or {})[0]
    later = apis.get(api).follow(resumed, first.json_body() or {}, hc.scenario(scenario), 2)
    later = apis.get(api).append_user(later, "Thanks. Is anything else broken?")
    second = _second(hc, api, later, label="kit turn, one turn later", max_tokens=small)
    cached = usage_of(api, second.json_body() or {})[2]
    if cached == 0:
        repeat = _second(hc, api, later, label="one turn later, repeated (control)", max_tokens=small)
        if usage_of(api, repeat.json_body() or {})[2] == 0:
            raise WitnessUnavailable("the endpoint reports no cached prompt tokens")
    hc.saw(catalog.CACHE_HIT)
    slack = SLACK
    if cached < prompt_x - SLACK:  # the endpoint's cache block may be coarser: a repeat tells
        repeat = _second(hc, api, later, label="one turn later, repeated (cache block)", max_tokens=small)
        slack = cache_slack(cached, usage_of(api, repeat.json_body() or {})[2])
    if cached < prompt_x - slack:
        fail(f"cache witness: one turn after the kit's interleaved turn the endpoint read {cached} prompt "
             f"tokens from the cache, less than the {prompt_x} of the request that ended with that turn, less "
             f"{slack}: the turn was rendered differently once another turn followed it", transcript=second)


def thinking_on(api: str, body: dict[str, Any]) -> dict[str, Any]:
    """The request with thinking turned on, as a resumed reasoning session sends it (the API module's
    switch: Anthropic `thinking`, Responses `reasoning.effort`, none on Chat). A server may drop past
    reasoning when thinking is off; with it on, never."""
    return apis.get(api).thinking_on(body)


def _thinking_asked(body: dict[str, Any]) -> bool:
    return (body.get("thinking") or {}).get("type") in ("enabled", "adaptive") or bool(body.get("reasoning"))


KIT_RUNNERS: dict[str, Runner] = {"tokenize": tokenize_witness, "cache": kit_cache_witness}


def judge_interleaved(hc: Session, api: str, *, kit_scenario: str, model_scenario: str,
                      witnesses: tuple[str, ...]) -> None:
    """Both cases of an interleaved-history check: the kit's own turn, then the model's (up to --tries
    samples). Fails on either; inconclusive (not-exercised) when neither could be judged."""
    scenario = hc.scenario(kit_scenario)
    body = thinking_on(api, fresh_first(hc, api, kit_scenario))
    kit = (body, kit_answer(api, scenario, signature=issued_signature(hc, api, SIGNED)))
    used, kit_reasons = judge(hc, api, kit_scenario, kit, witnesses=witnesses, runners=KIT_RUNNERS)
    if used:
        hc.saw(catalog.KIT_INTERLEAVING)
    # The model's own turn: sampled up to --tries times only while the kit's turn could not be judged
    # (tries are spent where a path was not taken); once where it was.
    turn1 = model_turn(hc, api, model_scenario, catalog.INTERLEAVING, once=bool(used))
    tries = 1 if used else hc.endpoint.tries
    model_reasons = [f"the model did not interleave reasoning and tool calls in {tries} tr{'y' if tries == 1 else 'ies'}"]
    if turn1 is not None:
        model_used, model_reasons = judge(hc, api, model_scenario, turn1, witnesses=witnesses)
        if model_used:
            return
    if not used:
        why = "; ".join(["the kit's turn: " + "; ".join(kit_reasons), "the model's turn: " + "; ".join(model_reasons)])
        if turn1 is None:
            inconclusive(f"not exercised: {why}")
        skip("no witness available: " + why)


def judge_agent_turn(hc: Session, api: str, scenario: str, *, witnesses: tuple[str, ...]) -> None:
    """The verbatim-prefix check on the model's agent turn (reasoning, then a call), up to --tries samples."""
    turn1 = model_turn(hc, api, scenario, catalog.AGENT_TURN)
    if turn1 is None:
        inconclusive(f"not exercised: the model did not reason before a tool call in {hc.endpoint.tries} tries")
    used, reasons = judge(hc, api, scenario, turn1, witnesses=witnesses)
    if not used:
        skip("no witness available: " + "; ".join(reasons))
