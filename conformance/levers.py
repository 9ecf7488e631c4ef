"""The levers the kit pulls, in order, to drive a rule down the model path it needs before it says
"not exercised" (issue 35), and the peer profiles that replace the model's own choice.

A rule that needs a path (catalog.RULE_PATHS: a tool call, parallel calls, thinking, ...) is judged
only on an answer that took it. A small or random model, or a reasoning model that spends the whole
output limit thinking, seldom takes it by chance; the APIs and the servers offer levers that make it
far likelier. `Session.until_taken` samples the check's request as the check built it first, then
pulls the levers of `ladder` one more each try (cumulatively: a lever the endpoint refused with a 4xx
is dropped, and its `fallback` tried instead), then samples the strongest accepted set for the
remaining `--tries`:

1. a plain prompt that names the tool (or asks to think, or for two calls);
2. `tool_choice` forcing a call (Anthropic `any`, OpenAI `required`): never where a rule judges what
   the model does unforced (a catalog entry's `levers=LEVERS_UNFORCED`: the checks that judge `none` and
   parallel-off "where the same request under auto called");
3. thinking turned off the API's own way (Anthropic `thinking: {"type": "disabled"}`, Chat
   `reasoning_effort: "none"`, Responses `reasoning: {"effort": "none"}`; "minimal" where "none" is
   refused, as the models before gpt-5.1 refuse it), then through `chat_template_kwargs:
   {"enable_thinking": false}` (vLLM's and SGLang's template switch), then Qwen3's `/no_think` in the user's
   words (a stack with no API field for it): a reasoning model whose reasoning never ends before the limit
   (vLLM constrains a forced call only after it) then answers;
4. for the thinking paths the same switches turned on instead (Anthropic `enabled` with a budget,
   `reasoning_effort` / `reasoning.effort` "high" with a summary, `enable_thinking: true`);
5. an assistant prefill, where the API allows one (Anthropic: the last message is the assistant's start);
6. more tries of the strongest set;
7. where tries were cut by the output limit before the path (a model still reasoning), the levers of the last
   cut try with a larger budget: the output limit times GROWTH each try, up to BUDGET_CAP (`grown`, recorded
   as `budget-xN`; a conversation keeps the limit its opening answer grew to, as a client keeps its
   max_tokens). A budget is never why a path was not taken while a larger one was allowed (issue 40).

Output after a call (reasoning or text after a call, in the same turn: the dispatch rules) takes only the
first: levers 2, 3 and 5 would each take away what it looks for. A check that sends its own forced choice and
judges the forced answer (its catalog entry's `levers=LEVERS_OWN_FORCING`) takes only lever 3, thinking off:
the forcing is the check's, words naming the tool would let an endpoint that ignores it pass, and a prefill
would answer in the forced call's place.

A lever only ever adds to a request: it never changes a field the check set (a check that sends its
own `tool_choice` or `thinking` keeps it); the forced choice and the prefill bend only the opening
request of a sample, while the prompt's words and the thinking switches stay on every later turn of it
(the history holds the first user message as it was sent, and a client keeps its thinking setting), so
a history check compares the turns the endpoint really saw; and it never changes what a rule judges. That is why a *named* forced tool is not a lever on Chat: vLLM and, per
API_FACTS, OpenAI-compatible servers answer it `finish_reason: "stop"`, which CH-GRAMMAR-FINISH-TOOL-CALLS
would then have to excuse; `required` keeps `tool_calls`. Every answer a lever produced is marked with
the levers in its check's result (results.json `levers`), and an inconclusive result lists what was
tried and what came back.

Peer profiles (`--peer NAME`) bend every generation request for one kind of endpoint: `dynamo-mocker`
sends Dynamo's `nvext: {"annotations": ["output_replay_id:hc-SCENARIO-TURN"]}` so that Dynamo's CPU
mocker plays the kit's own scripted output of that scenario turn (token ids in the mocker's trace,
written by `conformance/mocker_replay.py`) instead of random tokens; a request that forces a tool is
left alone (the mocker cannot force; a scripted call would be the kit obeying for it).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from harnesscheck.protocol import apis
from harnesscheck.conformance import catalog, options
from harnesscheck.conformance.catalog import AGENT_TURN, INTERLEAVING, OUTPUT_AFTER_CALL, PARALLEL, THINKING, TOOL_USE

__all__ = ["BUDGET_CAP", "GROWTH", "LADDER", "PEERS", "THINKING_OFF", "Lever", "allowed", "bend",
           "bounded", "budget_of", "came_back", "cut_by_limit", "grown", "is_opening", "ladder", "peer_bend",
           "plays_forced", "policy", "replay_key", "room_to_grow",
           "scenario_turn", "tried_words"]

Body = dict[str, Any]
_CALL_PATHS = frozenset({TOOL_USE, PARALLEL, OUTPUT_AFTER_CALL})
_THINK_PATHS = frozenset({THINKING, AGENT_TURN, INTERLEAVING})
# Output after a call (reasoning or text after it, in the same turn) takes only the words: a forced answer
# is the call and nothing after it (vLLM and SGLang constrain a `required` answer to the calls' JSON),
# thinking off removes the reasoning that would follow a call, and a prefill answers in its place.
_BARE_CALL_PATHS = _CALL_PATHS - {OUTPUT_AFTER_CALL}


@dataclass(frozen=True, slots=True)
class Lever:
    name: str
    words: str  # what it is, in the inconclusive message
    paths: frozenset[str]  # the paths it drives toward
    member: str = ""  # the API module's member that does it (None there: never pulled on that API)
    forcing: bool = False  # forces the call: left out where a rule judges what the model does unforced
    fallback: str = ""  # tried only when the lever of this name was refused (4xx)
    conversation: bool = False  # a setting a client keeps on every turn (thinking): not only the opening request

    def applies(self, api: str) -> bool:
        """The API has this lever (its module's ``member`` is not None; a lever of no member: every API)."""
        return not self.member or getattr(apis.get(api), self.member, None) is not None


LADDER: tuple[Lever, ...] = (  # in the order pulled; a path takes the ones whose `paths` name it
    Lever("name-the-tool", "a plain prompt that names the tool (or asks to think)", _CALL_PATHS | _THINK_PATHS,
          conversation=True),  # the words stay in the first user message of every later turn, as sent
    Lever("thinking-on", "thinking on the API's way (thinking enabled / reasoning effort high)", _THINK_PATHS,
          member="lever_thinking_on", conversation=True),
    Lever("thinking-on-template", "chat_template_kwargs enable_thinking true", _THINK_PATHS, conversation=True),
    Lever("tool-choice-required", "tool_choice forcing a call (any / required)", _BARE_CALL_PATHS | {AGENT_TURN},
          forcing=True),
    Lever("thinking-off", "thinking off the API's way (thinking disabled / reasoning effort none)", _BARE_CALL_PATHS,
          member="lever_thinking_off", conversation=True),
    Lever("reasoning-minimal", "reasoning effort minimal", _BARE_CALL_PATHS, member="lever_reasoning_minimal",
          fallback="thinking-off", conversation=True),
    Lever("thinking-off-template", "chat_template_kwargs enable_thinking false", _BARE_CALL_PATHS, conversation=True),
    # Qwen3's soft switch, read by its chat template from the user's words: a stack with no API field for
    # thinking (llama-server, Ollama) still passes the words through (issue 40)
    Lever("no-think", "the /no_think soft switch in the user's words", _BARE_CALL_PATHS, conversation=True),
    Lever("prefill", "an assistant prefill", _BARE_CALL_PATHS, member="lever_prefill"),
)
BY_NAME = {lever.name: lever for lever in LADDER}

# A check's lever policy is its catalog entry's `levers` (catalog.LEVERS_*): a check whose rules judge what
# the model does unforced (tool_choice none, parallel tool use off) takes no forcing lever; one that judges
# the endpoint's default when the client asks nothing (thinking left on) none at all; one that sends its own
# forced choice and judges the forced answer (its modes, a forced call cut by the limit, a streamed forced
# strict call) only thinking off (a reasoning model that reasons to the limit never reaches the forced
# call): words naming the tool would let an endpoint that ignores the forcing pass; a prefill answers in its
# place.
THINKING_OFF = frozenset({"thinking-off", "reasoning-minimal", "thinking-off-template", "no-think"})
NO_THINK = "/no_think"  # the words of the no-think lever


def policy(check_id: str) -> str:
    """The lever policy of the check `check_id` (its catalog entry's `levers`; every lever outside a check,
    or for an id the catalog does not hold)."""
    try:
        return catalog.get(check_id).levers
    except KeyError:
        return catalog.LEVERS_ALL


def allowed(names: Iterable[str], check_id: str) -> bool:
    """Whether an answer bent by the levers `names` may count as taking a path for the check `check_id`
    (a forced answer never shows what the model does unforced; a check of no levers takes none at all)."""
    names = [n for n in names if n in BY_NAME]
    rule = policy(check_id)
    if rule == catalog.LEVERS_NONE:
        return not names
    if rule == catalog.LEVERS_OWN_FORCING:
        return all(n in THINKING_OFF for n in names)
    return not (rule == catalog.LEVERS_UNFORCED and any(BY_NAME[n].forcing for n in names))


def ladder(api: str, wanted: Iterable[str], *, check_id: str = "") -> list[Lever]:
    """The levers for `api` toward any of the `wanted` paths, in order, for the check `check_id`."""
    if policy(check_id) == catalog.LEVERS_NONE:
        return []
    wanted = set(wanted)
    return [lever for lever in LADDER if lever.paths & wanted and lever.applies(api) and allowed([lever.name], check_id)]


# -- what a lever does to an opening request --------------------------------------------------------

def is_opening(api: str, body: Any) -> bool:
    """Whether `body` is the opening request of a sample (no earlier answer in it): levers bend only these."""
    return isinstance(body, dict) and bool(apis.get(api).is_opening(body))


def _tool_names(api: str, body: Body) -> list[str]:
    names = []
    for tool in body.get("tools") or []:
        if isinstance(tool, dict):
            name = tool.get("name") or (tool.get("function") or {}).get("name")
            if isinstance(name, str):
                names.append(name)
    return names


def _ask(api: str, body: Body, wanted: set[str]) -> str:
    """The plain words that name the tool (or ask to think) for the wanted paths ("" for a request with no
    tools that wants only a call: there is no tool to name)."""
    if not _tool_names(api, body) and not wanted & _THINK_PATHS:
        return ""
    names = _tool_names(api, body) or ["the tool"]
    a, b = names[0], names[1] if len(names) > 1 else names[0]
    words = []
    if THINKING in wanted or AGENT_TURN in wanted or INTERLEAVING in wanted:
        words.append("Think it through step by step first.")
    if INTERLEAVING in wanted:
        words.append(f"Then call {a}; then think again and call {b}, all in this one turn.")
    elif AGENT_TURN in wanted:
        words.append(f"Then call the {a} tool.")
    if PARALLEL in wanted:
        words.append(f"Call {a} and {b} now, both in this one turn." if b != a else
                     f"Call {a} twice now, in this one turn, with different arguments.")
    elif TOOL_USE in wanted:
        words.append(f"Call the {a} tool now.")
    if OUTPUT_AFTER_CALL in wanted:
        words.append(f"Call the {a} tool, then write one sentence about what you are doing, in this same turn.")
    return " ".join(dict.fromkeys(words))


def _append_user_text(api: str, body: Body, text: str) -> Body | None:
    """`body` with `text` after the first user message's own words (kept first: the reference server's
    scripted engine finds its scenario by them)."""
    if not text:
        return None
    form = apis.get(api).FORM
    key = form.history_key
    items = body.get(key)
    if form.text_history and isinstance(items, str):
        return None if text in items else {**body, "input": f"{items} {text}"}
    if not isinstance(items, list):
        return None
    for i, item in enumerate(items):
        if isinstance(item, dict) and item.get("role") == "user":
            content = item.get("content")
            if text in json.dumps(content, ensure_ascii=False):
                return None  # already asked (a later turn of a conversation built from the request as sent)
            if isinstance(content, str):
                new = {**item, "content": f"{content} {text}"}
            elif isinstance(content, list):
                part = {"type": form.text_part, "text": text}
                new = {**item, "content": [*content, part]}
            else:
                return None
            return {**body, key: [*items[:i], new, *items[i + 1:]]}
    return None


def _set(body: Body, **fields: Any) -> Body | None:
    """`body` with `fields` added; None when the check set one of them itself (a lever never changes those)."""
    if any(k in body for k in fields):
        return None
    return {**body, **fields}


def _template_kwargs(body: Body, enable: bool) -> Body | None:
    kwargs = body.get("chat_template_kwargs")
    if isinstance(kwargs, dict) and "enable_thinking" in kwargs:
        return None
    return {**body, "chat_template_kwargs": {**(kwargs or {}), "enable_thinking": enable}}


def _prefill(api: str, body: Body, wanted: set[str]) -> Body | None:
    names = _tool_names(api, body) or ["the tool"]
    start = f"I will call {names[0]} and {names[1]} now." if PARALLEL in wanted and len(names) > 1 else \
        f"I will call the {names[0]} tool now."
    prefill = apis.get(api).lever_prefill
    return None if prefill is None else prefill(body, start)


_Bend = Callable[[str, Body, set[str]], "Body | None"]
_BENDS: dict[str, _Bend] = {
    "name-the-tool": lambda api, b, w: _append_user_text(api, b, _ask(api, b, w)),
    "tool-choice-required": lambda api, b, w: _set(b, tool_choice=apis.get(api).tool_choice("required"))
    if b.get("tools") and not apis.get(api).forcing_refused(b) else None,
    "thinking-off": lambda api, b, w: apis.get(api).lever_thinking_off(b),
    "reasoning-minimal": lambda api, b, w: apis.get(api).lever_reasoning_minimal(b),
    "thinking-off-template": lambda api, b, w: _template_kwargs(b, False),
    "no-think": lambda api, b, w: _append_user_text(api, b, NO_THINK),
    "thinking-on": lambda api, b, w: apis.get(api).lever_thinking_on(b),
    "thinking-on-template": lambda api, b, w: _template_kwargs(b, True),
    "prefill": _prefill,
}


# Sessions that measure the usage each turn reports over many turns (test_context.py): what they judge is
# the accounting, not the model's choice, so a call forced on the opening turn stays forced on every turn
# (else a model that calls only when forced ends the session after its first turn: vLLM 0.32's tiny Qwen3).
SESSIONS_KEEP_FORCING = frozenset({"long_session"})


def bend(levers: Iterable[Lever], api: str, body: Body, wanted: Iterable[str], *,
         keep_forcing: bool = False, bound: int | None = None) -> tuple[Body, list[str]]:
    """`body` with each lever applied in order (a copy), and the names of those that changed it: on the
    opening request every lever, on a follow-up turn only the settings a client keeps on every turn
    (thinking on or off: a conversation does not switch it between turns), and the forced call too with
    `keep_forcing` (SESSIONS_KEEP_FORCING). A lever that does not apply (the check set that field; no
    tools to force) is skipped, and so, given a `bound` (--quick), is one whose request could not go within
    it (Anthropic thinking on: its output limit must exceed a budget of at least 1,024 tokens)."""
    out, used = copy.deepcopy(body), []
    wanted = set(wanted)
    opening = is_opening(api, body)
    for lever in levers:
        if not lever.applies(api) or not (opening or lever.conversation or (keep_forcing and lever.forcing)):
            continue
        bent = _BENDS[lever.name](api, out, wanted)
        if bent is not None and not _past(api, out, bent, bound):
            out = bent
            used.append(lever.name)
    return out, used


def _past(api: str, body: Body, bent: Body, bound: int | None) -> bool:
    """Whether the lever that made `bent` of `body` raised the least output limit the request takes past
    `bound` (None: no bound)."""
    if bound is None:
        return False
    least = apis.get(api).least_limit
    return least(bent) > max(bound, least(body))


def words(names: Iterable[str]) -> str:
    """'name-the-tool + thinking-off' -> the levers' words, joined."""
    return " + ".join(BY_NAME[n].words if n in BY_NAME else n for n in names)


# -- what came back, and what was tried --------------------------------------------------------------

def came_back(api: str, transcript: Any) -> str:
    """A few words on one answer: 'HTTP 400: ...', 'timed out', 'reasoning only, cut at 256 tokens
    (max_tokens)', 'text, no tool call (end_turn)', '2 tool calls (Read, Read)'."""
    if transcript is None:
        return "no request"
    if transcript.error:
        return f"{transcript.error_kind or 'error'}: {str(transcript.error)[:120]}"
    if not transcript.ok:
        return f"HTTP {transcript.status}: {transcript.text_body()[:160]}"
    module = apis.get(api)
    try:
        answer = module.final_answer(transcript) if transcript.frames else transcript.json_body()
    except Exception:  # an answer that does not fold: the grammar judges it
        return "an answer the kit could not fold"
    if not isinstance(answer, dict):
        return "no answer object"
    calls = module.tool_calls(answer)
    kinds = [k for k, text in module.parts(answer) if text or k == "tool_call"]
    stop = module.stop_reason(answer)
    out_tokens = module.usage_tokens(answer)[1]
    if calls:
        what = f"{len(calls)} tool call{'s' if len(calls) > 1 else ''} ({', '.join(c.name for c in calls)})"
    elif kinds == ["reasoning"]:
        what = "reasoning only, no tool call"
    elif "text" in kinds:
        what = f"{'reasoning and ' if 'reasoning' in kinds else ''}text, no tool call"
    else:
        what = "an empty answer"
    cut = stop == module.LENGTH_STOP
    return f"{what}{f', cut at {out_tokens} tokens' if cut else ''} ({stop})"


# -- answer budgets that grow (issue 40) ---------------------------------------------------------------

GROWTH = 4  # an answer cut by the limit before the path: the next try's output limit, times this
BUDGET_CAP = apis.base.MAX_TOKENS  # ... up to the most any scenario asks for
OUTPUT_LIMIT_WORDS = "ended at the output limit"  # what an SDK attempt says of an answer the limit cut


def cut_by_limit(api: str, transcript: Any) -> bool:
    """The answer ended at its output limit (the API's length stop)."""
    if transcript is None or transcript.error or not transcript.ok:
        return False
    module = apis.get(api)
    try:
        answer = module.final_answer(transcript) if transcript.frames else transcript.json_body()
    except Exception:  # an answer that does not fold: the grammar judges it
        return False
    return isinstance(answer, dict) and module.stop_reason(answer) == module.LENGTH_STOP


def room_to_grow(scale: int) -> bool:
    """Another growth step stays within the cap for the smallest limit a scenario sends (MIN_BUDGET)."""
    return apis.base.MIN_BUDGET * scale < BUDGET_CAP


def grown(api: str, body: Body, scale: int) -> tuple[Body, list[str]]:
    """``body`` with its output limit times ``scale``, at most BUDGET_CAP (never lowered), and the lever's
    name for the record (``budget-xN``); unchanged when it sets no limit or is at the cap already."""
    field_name = apis.get(api).MAX_TOKENS_FIELD
    limit = body.get(field_name)
    if not isinstance(limit, int) or isinstance(limit, bool) or limit >= BUDGET_CAP:
        return body, []
    return {**body, field_name: min(BUDGET_CAP, limit * scale)}, [f"budget-x{scale}"]


def bounded(api: str, body: Body, cap: int) -> tuple[Body, bool]:
    """``body`` with its output limit at most ``cap``, or the least the request takes where that is more
    (Anthropic thinking: above its budget); never added where it sets none. And whether the limit as sent is
    at that bound (a larger budget cannot be tried)."""
    module = apis.get(api)
    limit = body.get(module.MAX_TOKENS_FIELD)
    if not isinstance(limit, int) or isinstance(limit, bool):
        return body, False
    bound = max(cap, module.least_limit(body))
    return ({**body, module.MAX_TOKENS_FIELD: bound} if limit > bound else body), limit >= bound


def budget_of(names: Iterable[str]) -> int:
    """The growth a sample's lever names carry (``budget-xN`` -> N; 1 without one)."""
    grown_by = [int(n[len("budget-x"):]) for n in names if n.startswith("budget-x") and n[len("budget-x"):].isdigit()]
    return max(grown_by, default=1)


@dataclass(slots=True)
class Tried:
    """One sample a lever ladder took: the levers on it, the paths wanted, what came back."""

    levers: list[str]
    wanted: list[str]
    came_back: str
    took: bool = False
    refused: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"levers": self.levers, "wanted": self.wanted, "came_back": self.came_back, "took": self.took}


def tried_words(tried: list[Tried], limit: int = 8) -> str:
    """'levers tried: plain -> reasoning only ...; name-the-tool -> ...'."""
    shown = [f"{' + '.join(t.levers) or 'as built'} -> {t.came_back}" for t in tried[:limit]]
    more = f"; and {len(tried) - limit} more" if len(tried) > limit else ""
    return "levers tried: " + "; ".join(shown) + more


# -- peer profiles ---------------------------------------------------------------------------------

PEERS = options.PEERS  # dynamo-mocker


def scenario_turn(api: str, body: Any) -> tuple[str, int] | None:
    """(scenario id, turn) of a request the kit built from a scenario: the scenario whose first user text
    the first user message holds, and the number of answers already in the history. None otherwise."""
    from harnesscheck.scenarios.loader import find_by_user_text

    if not isinstance(body, dict):
        return None
    form = apis.get(api).FORM
    items = body.get(form.history_key)
    if form.text_history and isinstance(items, str):
        items = [{"role": "user", "content": items}]
    if not isinstance(items, list):
        return None
    first = next((i for i in items if isinstance(i, dict) and i.get("role") == "user"), None)
    if first is None:
        return None
    content = first.get("content")
    text = content if isinstance(content, str) else " ".join(
        p.get("text", "") for p in content or [] if isinstance(p, dict) and isinstance(p.get("text"), str))
    scenario = find_by_user_text(text)
    if scenario is None:
        return None
    answers, inside = 0, False
    for item in items:
        out = isinstance(item, dict) and (item.get("role") == "assistant" or item.get("type") in (
            "function_call", "reasoning", "custom_tool_call"))
        if out and not inside:
            answers += 1
        inside = out
    return (scenario.id, answers) if answers < len(scenario.turns) else None


def replay_key(scenario_id: str, turn: int) -> str:
    """The mocker trace's key of a scenario turn's scripted output."""
    return f"hc-{scenario_id}-{turn}"


def _forces(body: Body) -> bool:
    choice = body.get("tool_choice")
    if isinstance(choice, str):
        return choice == "required"
    return isinstance(choice, dict) and choice.get("type") in ("any", "tool", "function")


def plays_forced(peer: str) -> bool:
    """Whether a forced request's answer comes from the model behind the peer profile `peer`: not under
    dynamo-mocker, whose mocker emits random tokens where no scripted output is named (`peer_bend` names none
    on a forced request: a scripted call would be the kit obeying for the endpoint), so a forced answer there
    shows nothing of the endpoint's forcing (Dynamo's parser drops the random text: an empty answer)."""
    return peer != "dynamo-mocker"


def peer_bend(peer: str, api: str, body: Any) -> tuple[Any, list[str]]:
    """`body` as the peer profile sends it, and the profile's mark (['replay:KEY']) when it changed it."""
    if peer != "dynamo-mocker" or not isinstance(body, dict) or _forces(body) or "nvext" in body:
        return body, []
    found = scenario_turn(api, body)
    if found is None:
        return body, []
    key = replay_key(*found)
    return {**body, "nvext": {"annotations": [f"output_replay_id:{key}"]}}, [f"replay:{key}"]
