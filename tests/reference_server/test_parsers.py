"""The stream parsers: one shared table of cases run every way (STYLE.md section 4, rule 7).

Every case is parsed one-shot (parse_text), streamed one character at a time, and streamed in random
pieces (hypothesis); all must fold to the expected parts. Generated parts must survive
parse(render(parts)), whole and in random pieces. Every registered parser must appear in the table.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harnesscheck.reference_server import parsers
from harnesscheck.reference_server.conversation import ToolSpec
from harnesscheck.reference_server.events import (
    ParsedEvent,
    Part,
    ReasoningDelta,
    TextDelta,
    ToolCall,
    ToolCallArgsDelta,
    ToolCallEnd,
    ToolCallStart,
)
from harnesscheck.reference_server.parsers import (
    get_reasoning_parser,
    get_tool_parser,
    reasoning_parser_names,
    register_reasoning_parser,
    register_tool_parser,
    tool_parser_names,
)
from harnesscheck.reference_server.parsers.base import ReasoningParser, held_suffix
from harnesscheck.reference_server.parsers.reasoning import ThinkTagReasoningParser
from harnesscheck.reference_server.parsers.stream import StreamParser, fold, parse_text, render_parts
from harnesscheck.reference_server.parsers.tools_qwen3_coder import convert_value

SETTINGS = settings(max_examples=200, deadline=None)

TOOLS = [
    ToolSpec(
        name="get_weather",
        parameters={
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        },
    ),
    ToolSpec(
        name="run",
        parameters={
            "type": "object",
            "properties": {
                "cmd": {"type": "string"},
                "timeout": {"type": "number"},
                "env": {"type": "object"},
                "args": {"type": "array"},
                "dry": {"type": "boolean"},
                "note": {"type": ["string", "null"]},
                "code": {"type": "string"},
            },
        },
    ),
]


def call_id(index: int) -> str:
    return f"call_{index}"


# -- the configurations and the table ------------------------------------------------------------


@dataclass(frozen=True)
class Config:
    reasoning: str | None = None
    tools: str | None = None
    start_in_reasoning: bool = False

    def parsers(self) -> tuple[ReasoningParser | None, parsers.ToolParser | None]:
        r = (
            get_reasoning_parser(self.reasoning)(start_in_reasoning=self.start_in_reasoning)
            if self.reasoning
            else None
        )
        t = get_tool_parser(self.tools)(tools=TOOLS, id_factory=call_id) if self.tools else None
        return r, t

    def stream(self) -> StreamParser:
        return StreamParser(*self.parsers())

    @property
    def id(self) -> str:
        bits = [self.reasoning or "-", self.tools or "-"]
        return "+".join(bits) + ("+start" if self.start_in_reasoning else "")


@dataclass(frozen=True)
class Case:
    config: Config
    name: str
    text: str
    parts: tuple[Part, ...]

    @property
    def id(self) -> str:
        return f"{self.config.id}:{self.name}"


def R(text: str) -> Part:
    return Part(kind="reasoning", text=text)


def T(text: str) -> Part:
    return Part(kind="text", text=text)


def C(index: int, name: str, arguments: str) -> Part:
    return Part(
        kind="tool_call", call=ToolCall(index=index, id=call_id(index), name=name, arguments=arguments)
    )


REASONING_FAMILIES = ["deepseek_r1", "qwen3", "nemotron_deci"]
TOOL_FAMILIES = ["hermes", "qwen3_coder"]

CASES: list[Case] = []


def case(config: Config, name: str, text: str, *parts: Part) -> None:
    CASES.append(Case(config, name, text, parts))


# reasoning parsers alone, the same cases for every family
for fam in REASONING_FAMILIES:
    cfg = Config(reasoning=fam)
    case(cfg, "plain", "Hello, world.", T("Hello, world."))
    case(cfg, "plain-trimmed", "  \n Hello\n\n  there \n\n", T("Hello\n\n  there"))
    case(
        cfg,
        "reasoning-text",
        "<think>\nLet me think.\n</think>\n\nThe answer is 4.",
        R("Let me think."),
        T("The answer is 4."),
    )
    case(
        cfg,
        "interleaved",
        "<think>r0</think> t0 <think>\nr1 a\n b\n</think>\n\n t1 end",
        R("r0"),
        T("t0"),
        R("r1 a\n b"),
        T("t1 end"),
    )
    case(
        cfg, "unicode", "<think>\n思考一下 🤔\n</think>\n\n答案是 42 🎉", R("思考一下 🤔"), T("答案是 42 🎉")
    )
    case(
        cfg,
        "tag-in-reasoning",
        "<think>use <tool_call> or <think>?</think>ok",
        R("use <tool_call> or <think>?"),
        T("ok"),
    )
    case(cfg, "not-tags", "a < b, <thin k> and <thinking>", T("a < b, <thin k> and <thinking>"))
    case(cfg, "stray-close-is-text", "x </think> y", T("x </think> y"))
    case(cfg, "unterminated-explicit", "Hi <think>\nstill thinking ", T("Hi"), R("still thinking"))
    case(cfg, "empty-reasoning", "<think>\n\n</think>\n\nHi", T("Hi"))
    case(cfg, "empty-reasoning-inside-text", "a <think> </think> b", T("a  b"))
    case(cfg, "trailing-partial-tag", "Hi <thi", T("Hi <thi"))

    start = Config(reasoning=fam, start_in_reasoning=True)
    case(start, "implicit-open", "Let me see.\n</think>\n\nIt is 4.", R("Let me see."), T("It is 4."))
    case(start, "repeated-open-tag", "\n<think>\nr\n</think>\n\na", R("r"), T("a"))
    case(
        start,
        "implicit-then-interleaved",
        "r0</think>t0<think>r1</think>t1",
        R("r0"),
        T("t0"),
        R("r1"),
        T("t1"),
    )
    case(start, "explicit-unterminated", "<think>\nr", R("r"))
    unterminated = (R("just this, 你好") if fam == "deepseek_r1" else T("just this, 你好"),)
    case(start, "unterminated", "\njust this, 你好\n", *unterminated)
    case(
        start,
        "unterminated-with-open-tag-inside",
        "a <think> b",
        *((R("a <think> b"),) if fam == "deepseek_r1" else (T("a"), R("b"))),
    )

# hermes alone
H = Config(tools="hermes")
case(H, "plain", "Hello, world.", T("Hello, world."))
case(
    H,
    "not-tags",
    "1 < 2, <b>bold</b>, <tool_calls> and <tool_call",
    T("1 < 2, <b>bold</b>, <tool_calls> and <tool_call"),
)
case(
    H,
    "one-call",
    'Let me check.\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n',
    T("Let me check."),
    C(0, "get_weather", '{"city": "Paris"}'),
)
case(
    H,
    "parallel",
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}\n</tool_call>\n'
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>\nBoth asked.',
    C(0, "get_weather", '{"city": "Paris", "days": 2}'),
    C(1, "get_weather", '{"city": "Oslo"}'),
    T("Both asked."),
)
ESCAPED = r'{"code": "if (a) { b = \"}\"; } // </tool_call>", "re": "\\d+\\{", "u": "\u00e9", "nested": [{"x": "]}"}]}'
case(
    H,
    "escapes",
    f'<tool_call>\n{{"name": "run", "arguments": {ESCAPED}}}\n</tool_call>',
    C(0, "run", ESCAPED),
)
case(
    H,
    "unicode",
    '天气？\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "北京 🌧"}}\n</tool_call>',
    T("天气？"),
    C(0, "get_weather", '{"city": "北京 🌧"}'),
)
case(
    H,
    "parameters-synonym",
    '<tool_call>{"name": "run", "parameters": {"cmd": "ls"}}</tool_call>',
    C(0, "run", '{"cmd": "ls"}'),
)
case(
    H,
    "arguments-first",
    '<tool_call>\n{"arguments": {"cmd": "ls"}, "id": 7, "name": "run"}\n</tool_call>',
    C(0, "run", '{"cmd": "ls"}'),
)
case(H, "no-arguments", '<tool_call>\n{"name": "run"}\n</tool_call>', C(0, "run", "{}"))
case(
    H,
    "compact-args",
    '<tool_call>{"name":"run","arguments":{"a":[1,{"b":null}],"c":-1.5e3}}</tool_call>',
    C(0, "run", '{"a":[1,{"b":null}],"c":-1.5e3}'),
)
case(
    H,
    "text-around",
    'a\n<tool_call>\n{"name": "run", "arguments": {}}\n</tool_call>\n\nb ',
    T("a"),
    C(0, "run", "{}"),
    T("b"),
)
case(
    H,
    "malformed-is-text",
    "x <tool_call>\nnot json\n</tool_call> y",
    T("x <tool_call>\nnot json\n</tool_call> y"),
)
case(
    H,
    "name-not-string-is-text",
    '<tool_call>{"name": 5}</tool_call>',
    T('<tool_call>{"name": 5}</tool_call>'),
)
case(
    H,
    "unterminated-before-name",
    'Hi <tool_call>\n{"arguments": {"a": 1}',
    T('Hi <tool_call>\n{"arguments": {"a": 1}'),
)
case(
    H, "unterminated-after-name", '<tool_call>\n{"name": "run", "arguments": {"a": 1', C(0, "run", '{"a": 1')
)
case(H, "unterminated-no-args", '<tool_call>\n{"name": "run", ', C(0, "run", "{}"))
case(
    H,
    "missing-close-tag",
    '<tool_call>{"name": "run", "arguments": {}} then text',
    C(0, "run", "{}"),
    T("then text"),
)
case(
    H,
    "not-a-call-then-call",
    '<tool_call><tool_call>{"name": "run", "arguments": {}}</tool_call>',
    T("<tool_call>"),
    C(0, "run", "{}"),
)

# qwen3_coder alone
Q = Config(tools="qwen3_coder")


def qcall(name: str, *params: tuple[str, str]) -> str:
    body = "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in params)
    return f"<tool_call>\n<function={name}>\n{body}</function>\n</tool_call>\n"


case(Q, "plain", "Hello, world.", T("Hello, world."))
case(
    Q,
    "one-call",
    "Checking.\n" + qcall("get_weather", ("city", "Paris"), ("days", "3")),
    T("Checking."),
    C(0, "get_weather", '{"city": "Paris", "days": 3}'),
)
case(
    Q,
    "typed",
    qcall(
        "run",
        ("cmd", "123"),
        ("timeout", "2.5"),
        ("env", '{"A": "1", "B": [true]}'),
        ("args", '["-l", 2]'),
        ("dry", "false"),
        ("note", "null"),
        ("extra", "42"),
        ("word", "hello"),
    ),
    C(
        0,
        "run",
        '{"cmd": "123", "timeout": 2.5, "env": {"A": "1", "B": [true]}, "args": ["-l", 2], "dry": false, '
        '"note": null, "extra": 42, "word": "hello"}',
    ),
)
case(
    Q,
    "typed-fallbacks",
    qcall("get_weather", ("days", "three"))
    + qcall("run", ("note", "[1]"), ("dry", "True"))
    + qcall("mystery", ("x", "[1, 2]"), ("y", '"q"')),
    C(0, "get_weather", '{"days": "three"}'),
    C(1, "run", '{"note": "[1]", "dry": "True"}'),
    C(2, "mystery", '{"x": [1, 2], "y": "\\"q\\""}'),
)
case(
    Q,
    "multiline",
    qcall("run", ("code", '\ndef f(x):\n    return "{x}"  # 你好\n\n')),
    C(0, "run", json.dumps({"code": '\ndef f(x):\n    return "{x}"  # 你好\n\n'}, ensure_ascii=False)),
)
case(Q, "no-params", qcall("run"), C(0, "run", "{}"))
case(
    Q,
    "parallel",
    qcall("get_weather", ("city", "Paris")) + qcall("get_weather", ("city", "東京 🗼")),
    C(0, "get_weather", '{"city": "Paris"}'),
    C(1, "get_weather", '{"city": "東京 🗼"}'),
)
case(Q, "not-tags", "a <function=x> <tool_call b", T("a <function=x> <tool_call b"))
case(Q, "malformed-is-text", "<tool_call>\nhello\n</tool_call> x", T("<tool_call>\nhello\n</tool_call> x"))
case(Q, "unterminated-before-name", "go <tool_call>\n<function=ru", T("go <tool_call>\n<function=ru"))
case(
    Q,
    "unterminated-after-name",
    "<tool_call>\n<function=run>\n<parameter=cmd>\nls\n</parameter>\n<parameter=timeout>\n3",
    C(0, "run", '{"cmd": "ls"}'),
)
case(
    Q,
    "missing-end-function",
    "<tool_call>\n<function=run>\n<parameter=dry>\ntrue\n</parameter>\n</tool_call>ok",
    C(0, "run", '{"dry": true}'),
    T("ok"),
)

# composed
for cfg in [
    Config("deepseek_r1", "hermes", True),
    Config("qwen3", "hermes"),
    Config("nemotron_deci", "qwen3_coder"),
]:
    hermes = cfg.tools == "hermes"
    open_ = "" if cfg.start_in_reasoning else "<think>\n"

    def call(name: str, args: dict[str, object], hermes: bool = hermes) -> str:
        if hermes:
            return f'<tool_call>\n{{"name": "{name}", "arguments": {json.dumps(args, ensure_ascii=False)}}}\n</tool_call>\n'
        return qcall(name, *((k, v if isinstance(v, str) else json.dumps(v)) for k, v in args.items()))

    case(cfg, "reasoning-text", f"{open_}Think.\n</think>\n\nAnswer.", R("Think."), T("Answer."))
    case(
        cfg,
        "reasoning-one-call",
        f"{open_}Need weather.\n</think>\n\n" + call("get_weather", {"city": "Paris"}),
        R("Need weather."),
        C(0, "get_weather", '{"city": "Paris"}'),
    )
    case(
        cfg,
        "interleaved-r0-t0-r1-t1",
        f"{open_}r0\n</think>\n\n"
        + call("get_weather", {"city": "Oslo"})
        + "<think>\nr1\n</think>\n\n"
        + call("run", {"cmd": "ls"}),
        R("r0"),
        C(0, "get_weather", '{"city": "Oslo"}'),
        R("r1"),
        C(1, "run", '{"cmd": "ls"}'),
    )
    case(
        cfg,
        "interleaved-with-text",
        f"{open_}r0</think>\n\nFirst.\n\n"
        + call("run", {"cmd": "a"})
        + "<think>r1</think>Then.\n\n"
        + call("run", {"cmd": "b"})
        + call("run", {"cmd": "c"})
        + "Done 🎉",
        R("r0"),
        T("First."),
        C(0, "run", '{"cmd": "a"}'),
        R("r1"),
        T("Then."),
        C(1, "run", '{"cmd": "b"}'),
        C(2, "run", '{"cmd": "c"}'),
        T("Done 🎉"),
    )
    case(
        cfg,
        "call-text-inside-reasoning",
        f"{open_}maybe " + call("run", {"cmd": "x"}) + "?\n</think>\n\nNo call.",
        R("maybe " + call("run", {"cmd": "x"}) + "?"),
        T("No call."),
    )
    case(
        cfg,
        "unicode",
        f"{open_}用户想要 🌦\n</think>\n\n好的！\n" + call("get_weather", {"city": "北京"}),
        R("用户想要 🌦"),
        T("好的！"),
        C(0, "get_weather", '{"city": "北京"}'),
    )
    case(
        cfg,
        "partial-tag-before-reasoning",
        f"{open_}r</think>a <too<think>b</think>c",
        R("r"),
        T("a <too"),
        R("b"),
        T("c"),
    )

case(Config(), "plain", "  Hello\n\n world <tool_call>  ", T("Hello\n\n world <tool_call>"))

CASE_IDS = [c.id for c in CASES]
assert len(set(CASE_IDS)) == len(CASE_IDS), "case ids must be unique"


# -- helpers ------------------------------------------------------------------------------------------


def stream(config: Config, pieces: list[str]) -> list[ParsedEvent]:
    parser = config.stream()
    events: list[ParsedEvent] = []
    for piece in pieces:
        events += parser.feed(piece)
    return events + parser.finish()


def one_shot(config: Config, text: str) -> list[Part]:
    return parse_text(text, *config.parsers())


def split_at(text: str, cuts: list[int]) -> list[str]:
    bounds = [0, *sorted(set(cuts)), len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


def check_events(events: list[ParsedEvent]) -> None:
    """The event stream is well formed: no empty deltas, calls numbered in order, args join."""
    started: dict[int, str] = {}
    ended: set[int] = set()
    for event in events:
        match event:
            case TextDelta(text=t) | ReasoningDelta(text=t):
                assert t, event
            case ToolCallStart(index=i, id=cid):
                assert i == len(started) and cid == call_id(i), event
                started[i] = ""
            case ToolCallArgsDelta(index=i, text=t):
                assert t and i in started and i not in ended, event
                started[i] += t
            case ToolCallEnd(index=i, arguments=a):
                assert i in started and i not in ended and a == started[i], (event, started[i])
                ended.add(i)
    assert ended == set(started), "every started call is ended"


# -- the table, every way ----------------------------------------------------------------------------------


@pytest.mark.parametrize("c", CASES, ids=CASE_IDS)
def test_one_shot(c: Case) -> None:
    assert one_shot(c.config, c.text) == list(c.parts)


@pytest.mark.parametrize("c", CASES, ids=CASE_IDS)
def test_streaming_equals_one_shot(c: Case) -> None:
    for size in (1, 2, 3, 7):
        events = stream(c.config, [c.text[i : i + size] for i in range(0, len(c.text), size)])
        check_events(events)
        assert fold(events) == list(c.parts), size


@SETTINGS
@given(data=st.data())
def test_random_splits(data: st.DataObject) -> None:
    c = data.draw(st.sampled_from(CASES), label="case")
    cuts = data.draw(st.lists(st.integers(0, len(c.text)), max_size=max(1, len(c.text) // 2)), label="cuts")
    events = stream(c.config, split_at(c.text, cuts))
    check_events(events)
    assert fold(events) == list(c.parts)


# -- round trip of generated parts ------------------------------------------------------------------------

_PLAIN = st.characters(exclude_categories=("Cs",), exclude_characters="<")
SEGMENT = st.text(_PLAIN, min_size=1, max_size=40).map(str.strip).filter(bool)
JSON_STR = st.text(_PLAIN, max_size=20)
JSON_VALUE = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**6), 10**6)
    | st.floats(allow_nan=False, allow_infinity=False)
    | JSON_STR,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(JSON_STR, inner, max_size=3),
    max_leaves=8,
)
NAME = st.from_regex(r"[A-Za-z_][A-Za-z0-9_.\-]{0,15}", fullmatch=True)
HERMES_ARGS = st.dictionaries(JSON_STR, JSON_VALUE, max_size=4).map(
    lambda d: json.dumps(d, ensure_ascii=False)
)
_NOTE = st.none() | st.text(_PLAIN, max_size=10).filter(lambda s: s.strip() != "null")
RUN_ARGS = st.fixed_dictionaries(
    {},
    optional={
        "cmd": st.text(_PLAIN, max_size=40),
        "timeout": st.floats(allow_nan=False, allow_infinity=False) | st.integers(0, 10**6),
        "env": st.dictionaries(JSON_STR, JSON_STR, max_size=3),
        "args": st.lists(JSON_VALUE, max_size=3),
        "dry": st.booleans(),
        "note": _NOTE,
        "extra": st.integers() | st.lists(st.integers(), max_size=2),
    },
)
QWEN_CALL = st.one_of(
    st.tuples(st.just("run"), RUN_ARGS),
    st.tuples(
        st.just("get_weather"), st.fixed_dictionaries({"city": JSON_STR}, optional={"days": st.integers()})
    ),
).map(lambda t: (t[0], json.dumps(t[1], ensure_ascii=False)))

ROUND_TRIP_CONFIGS = sorted({c.config for c in CASES}, key=lambda c: c.id)


@st.composite
def turn(draw: st.DrawFn, config: Config) -> list[Part]:
    kinds = ["text"]
    if config.reasoning:
        kinds.append("reasoning")
    if config.tools:
        kinds.append("tool_call")
    parts: list[Part] = []
    n = draw(st.integers(1, 6))
    for k in range(n):
        if k == 0 and config.start_in_reasoning:
            kind = "reasoning"
        else:
            allowed = [x for x in kinds if x == "tool_call" or not parts or parts[-1].kind != x]
            if not allowed:
                break
            kind = draw(st.sampled_from(allowed))
        if kind == "tool_call":
            index = sum(p.kind == "tool_call" for p in parts)
            if config.tools == "hermes":
                name, args = draw(NAME), draw(HERMES_ARGS)
            else:
                name, args = draw(QWEN_CALL)
            parts.append(C(index, name, args))
        else:
            parts.append(Part(kind=kind, text=draw(SEGMENT)))
    return parts


@pytest.mark.parametrize("config", ROUND_TRIP_CONFIGS, ids=[c.id for c in ROUND_TRIP_CONFIGS])
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_round_trip(config: Config, data: st.DataObject) -> None:
    parts = data.draw(turn(config), label="parts")
    text = render_parts(parts, *config.parsers())
    assert one_shot(config, text) == parts
    cuts = data.draw(st.lists(st.integers(0, len(text)), max_size=20), label="cuts")
    events = stream(config, split_at(text, cuts))
    check_events(events)
    assert fold(events) == parts


# -- streaming promptness -----------------------------------------------------------------------------------


def test_hermes_start_as_soon_as_name_completes_and_args_stream() -> None:
    parser = Config(tools="hermes").stream()
    assert parser.feed('Hi\n<tool_call>\n{"name": "ru') == [TextDelta("Hi")]
    assert parser.feed('n", "arguments": {"cmd": "l') == [
        ToolCallStart(index=0, id="call_0", name="run"),
        ToolCallArgsDelta(index=0, text='{"cmd": "l'),
    ]
    assert parser.feed('s"}}\n</tool_call>') == [
        ToolCallArgsDelta(index=0, text='s"}'),
        ToolCallEnd(index=0, arguments='{"cmd": "ls"}'),
    ]
    assert parser.finish() == []


def test_qwen3_coder_start_on_function_tag_and_args_per_parameter() -> None:
    parser = Config(tools="qwen3_coder").stream()
    assert parser.feed("<tool_call>\n<function=run") == []
    assert parser.feed(">\n<parameter=cmd>\nls") == [ToolCallStart(index=0, id="call_0", name="run")]
    assert parser.feed("\n</parameter>\n<parameter=dry>\ntrue\n</parameter>\n") == [
        ToolCallArgsDelta(index=0, text='{"cmd": "ls", "dry": true'),
    ]
    assert parser.feed("</function>") == [
        ToolCallArgsDelta(index=0, text="}"),
        ToolCallEnd(index=0, arguments='{"cmd": "ls", "dry": true}'),
    ]


def test_deepseek_r1_streams_implicit_reasoning_and_qwen3_holds_it() -> None:
    deepseek = Config("deepseek_r1", start_in_reasoning=True).stream()
    assert deepseek.feed("\nthinking ") == [ReasoningDelta("thinking")]
    qwen = Config("qwen3", start_in_reasoning=True).stream()
    assert qwen.feed("\nthinking ") == []
    assert qwen.feed("more</think>Hi") == [ReasoningDelta("thinking more"), TextDelta("Hi")]


def test_partial_tag_held_then_released() -> None:
    parser = Config("qwen3", "hermes").stream()
    assert parser.feed("a <thi") == [TextDelta("a")]
    assert parser.feed("s") == [TextDelta(" <this")]
    assert parser.feed(" <tool_") == []
    assert parser.feed("x") == [TextDelta(" <tool_x")]


def test_feed_after_finish_is_an_error() -> None:
    parser = Config("qwen3").stream()
    assert parser.feed("x <") == [TextDelta("x")]
    assert parser.finish() == [TextDelta(" <")]
    assert parser.finish() == []
    with pytest.raises(RuntimeError):
        parser.feed("y")


# -- render ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", REASONING_FAMILIES)
@pytest.mark.parametrize("start", [False, True])
def test_reasoning_render(name: str, start: bool) -> None:
    assert get_reasoning_parser(name)(start_in_reasoning=start).render("r") == "<think>\nr\n</think>\n\n"


def test_hermes_render_exact() -> None:
    parser = get_tool_parser("hermes")(id_factory=call_id)
    call = ToolCall(index=0, id="x", name="天气", arguments='{"a": 1}')
    assert parser.render(call) == '<tool_call>\n{"name": "天气", "arguments": {"a": 1}}\n</tool_call>\n'
    assert (
        parser.render(ToolCall(index=0, id="x", name="f"))
        == '<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>\n'
    )


def test_qwen3_coder_render_exact_and_rejects_non_objects() -> None:
    parser = get_tool_parser("qwen3_coder")(tools=TOOLS, id_factory=call_id)
    call = ToolCall(
        index=0, id="x", name="run", arguments='{"cmd": "ls\\n-l", "dry": true, "env": {"A": "é"}}'
    )
    assert parser.render(call) == (
        "<tool_call>\n<function=run>\n<parameter=cmd>\nls\n-l\n</parameter>\n<parameter=dry>\ntrue\n</parameter>\n"
        '<parameter=env>\n{"A": "é"}\n</parameter>\n</function>\n</tool_call>\n'
    )
    for bad in ("[1]", "{not json"):
        with pytest.raises(ValueError):
            parser.render(ToolCall(index=0, id="x", name="run", arguments=bad))


def test_render_parts_without_parsers_writes_think_tags_and_hermes() -> None:
    # One renderer for history and scripted output: with no parser configured, reasoning goes in
    # <think> tags and a tool call in the Hermes form (the strings below are written by hand).
    assert render_parts([T("a"), T("b")]) == "a\n\nb\n\n"
    assert render_parts([R("r")]) == "<think>\nr\n</think>\n\n"
    assert render_parts([C(0, "f", '{"x": 1}')], get_reasoning_parser("qwen3")()) == (
        '<tool_call>\n{"name": "f", "arguments": {"x": 1}}\n</tool_call>\n')


@pytest.mark.parametrize("name", ['say"hi', "back\\slash", 'both\\"', "é"])
@pytest.mark.parametrize("configured", [True, False])
def test_a_tool_name_with_a_quote_or_backslash_round_trips_through_hermes(name: str, configured: bool) -> None:
    call = C(0, name, '{"path": "a\\"b"}')
    raw = render_parts([T("x"), call], None, get_tool_parser("hermes")(id_factory=call_id) if configured else None)
    whole = json.loads(raw.split("<tool_call>\n", 1)[1].split("\n</tool_call>", 1)[0])
    assert whole == {"name": name, "arguments": {"path": 'a"b'}}  # one JSON object, the name escaped
    parts = parse_text(raw, None, get_tool_parser("hermes")(id_factory=call_id))
    assert [p.kind for p in parts] == ["text", "tool_call"]
    assert parts[1].call is not None and parts[1].call.name == name
    assert parts[1].call.arguments == call.call.arguments


@pytest.mark.parametrize(
    ("raw", "tool", "key", "expected"),
    [
        ("5", "get_weather", "days", 5),
        ("5", "get_weather", "city", "5"),
        ("five", "get_weather", "days", "five"),
        ("null", "run", "note", None),
        ("nothing", "run", "note", "nothing"),
        ("{}", "run", "note", "{}"),
        ("1e3", "run", "timeout", 1000.0),
        ("true", "nope", "x", True),
        ('"quoted"', "nope", "x", '"quoted"'),
        ("plain words", "run", "unknown", "plain words"),
    ],
)
def test_convert_value(raw: str, tool: str, key: str, expected: object) -> None:
    spec = {t.name: t for t in TOOLS}.get(tool)
    assert convert_value(raw, spec, key) == expected


def test_held_suffix() -> None:
    assert held_suffix("abc <thi", ["<think>"]) == 4
    assert held_suffix("abc <think>", ["<think>"]) == 0  # a whole tag is not held, it is found
    assert held_suffix("a<", ["<think>", "</think>"]) == 1
    assert held_suffix("a</", ["<think>", "</think>"]) == 2
    assert held_suffix("a <x", ["<think>"]) == 0


# -- registry -----------------------------------------------------------------------------------------------


def test_registry_names_and_classes() -> None:
    assert reasoning_parser_names() == sorted(REASONING_FAMILIES)
    assert tool_parser_names() == sorted(TOOL_FAMILIES)
    for name in reasoning_parser_names():
        assert get_reasoning_parser(name).name == name
    for name in tool_parser_names():
        assert get_tool_parser(name).name == name


def test_unknown_name_lists_known_ones() -> None:
    with pytest.raises(KeyError) as info:
        get_reasoning_parser("nope")
    assert all(name in str(info.value) for name in REASONING_FAMILIES)
    with pytest.raises(KeyError) as info:
        get_tool_parser("nope")
    assert all(name in str(info.value) for name in TOOL_FAMILIES)


def test_register_decorator() -> None:
    try:

        @register_reasoning_parser("test_only_think")
        class Custom(ThinkTagReasoningParser):
            pass

        assert get_reasoning_parser("test_only_think") is Custom and Custom.name == "test_only_think"
        assert "test_only_think" in reasoning_parser_names()
        with pytest.raises(ValueError):

            @register_reasoning_parser("test_only_think")
            class Other(ThinkTagReasoningParser):
                pass

        with pytest.raises(TypeError):
            register_tool_parser("test_only_bad")(Custom)
    finally:
        parsers._reasoning.pop("test_only_think", None)
        parsers._tools.pop("test_only_bad", None)


# like vLLM's test_parser_test_coverage.py: a registered parser is in the table or listed as pending
PENDING: set[str] = set()


def test_every_registered_parser_is_in_the_table() -> None:
    covered = {c.config.reasoning for c in CASES} | {c.config.tools for c in CASES}
    registered = set(reasoning_parser_names()) | set(tool_parser_names())
    missing = registered - covered - PENDING
    assert not missing, (
        f"registered parsers without table cases (add cases or list in PENDING): {sorted(missing)}"
    )
    assert not PENDING & covered, "a pending parser has cases now: take it off PENDING"


# -- arbitrary (mostly broken) input: splitting never changes the result ------------------------------------

FRAGMENTS = [
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
    "<function=run>",
    "<function=",
    "<parameter=cmd>",
    "</parameter>",
    "</function>",
    "<",
    "</",
    "<thi",
    "<tool_",
    "{",
    "}",
    "[",
    "]",
    '"',
    "\\",
    ":",
    ",",
    '"name"',
    '"arguments"',
    '"parameters"',
    '"run"',
    "null",
    "1",
    "\n",
    " ",
    "x",
    "你",
    "🎉",
]
GARBAGE = st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=3), max_size=30).map("".join)
ALL_CONFIGS = ROUND_TRIP_CONFIGS


@SETTINGS
@given(data=st.data())
def test_arbitrary_input_split_invariant(data: st.DataObject) -> None:
    config = data.draw(st.sampled_from(ALL_CONFIGS), label="config")
    text = data.draw(GARBAGE, label="text")
    cuts = data.draw(st.lists(st.integers(0, len(text)), max_size=len(text)), label="cuts")
    events = stream(config, split_at(text, cuts))
    check_events(events)
    parts = fold(events)
    assert parts == one_shot(config, text)
    for a, b in itertools.pairwise(parts):
        assert a.kind == "tool_call" or a.kind != b.kind, "no two text or reasoning parts in a row"
    for part in parts:
        assert part.kind == "tool_call" or (part.text and part.text == part.text.strip()), part


# -- a call cut off by the output limit --------------------------------------------------------

@pytest.mark.parametrize(("config", "cut_at"), [
    (H, '<tool_call>\n{"name": "get_wea'), (H, "<tool_"), (Q, "<tool_call>\n<function=get_wea"), (Q, "<tool_"),
], ids=["hermes-call", "hermes-tag", "qwen3_coder-call", "qwen3_coder-tag"])
def test_markup_cut_by_the_limit_is_neither_text_nor_a_call(config: Config, cut_at: str) -> None:
    """Cut before the call's name is known: with ``cut`` the markup is dropped (TOOLS-005:markup);
    at a natural end it is given back as text, as before."""
    parser = config.stream()
    cut = parser.feed("ok " + cut_at) + parser.finish(cut=True)
    assert "".join(e.text for e in cut if isinstance(e, TextDelta)).strip() == "ok"
    assert not any(isinstance(e, ToolCallStart) for e in cut)
    parser = config.stream()
    ended = parser.feed("ok " + cut_at) + parser.finish()
    assert "<tool_" in "".join(e.text for e in ended if isinstance(e, TextDelta))


@pytest.mark.parametrize("config", [H, Q], ids=lambda c: c.id)
def test_a_call_cut_after_its_name_still_starts_and_ends(config: Config) -> None:
    text = ('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Par' if config.tools == "hermes"
            else "<tool_call>\n<function=get_weather>\n<parameter=city>\nPar")
    parser = config.stream()
    events = parser.feed(text) + parser.finish(cut=True)
    assert any(isinstance(e, ToolCallStart) and e.name == "get_weather" for e in events)
    assert not any(isinstance(e, TextDelta) and "<" in e.text for e in events)
