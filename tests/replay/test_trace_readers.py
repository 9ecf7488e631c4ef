"""The kit's readers of trace and AIPerf / Mooncake files refuse what they cannot use with one line
and exit status 2, never a crash (exit 3) (issue 31): generated trace lines, AIPerf and Mooncake rows
and raw bytes (hypothesis), and the cases found by hand: a header value holding CR/LF passed `trace
check` and then crashed `replay`; a broken gzip stream; JSON nested past the parser's depth."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harnesscheck.cli.main import main
from harnesscheck.replay import formats
from harnesscheck.replay.trace import ANSWER, TraceError, loads, save
from harnesscheck.replay.workloads import build
from tests.fuzzing import examples

HEAD = json.dumps({"schema": "harnesscheck.trace", "version": 1})
# A few dozen inputs per reader in the README's run; 2000 in CI's fuzz tier (tests/fuzzing.py, .ci/run).
EXAMPLES = examples(quick=60, ci=2000)
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)

_leaf = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.text(max_size=4))
_keys = st.sampled_from(["role", "content", "type", "text", "input", "system", "tools", "id", "name", "arguments",
                         "output", "call_id", "tool_use_id", "function", "tool_calls", "cache_control"])
_json = st.recursive(_leaf, lambda c: st.one_of(st.lists(c, max_size=3), st.dictionaries(_keys, c, max_size=3)),
                     max_leaves=12)
_entry = st.one_of(_json, st.just(ANSWER), st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "system", "tool", "developer"]), "content": _json}))
_body = st.fixed_dictionaries({}, optional={
    "model": _json, "messages": st.one_of(st.lists(_entry, max_size=3), _json),
    "input": st.one_of(st.lists(_entry, max_size=3), _json), "system": _json, "instructions": _json,
    "tools": _json, "max_tokens": _json, "tool_choice": _json, "temperature": _json})


# Made once, not inside the composite on every draw: at CI's 2000 examples, strategies built afresh per
# draw overflowed hypothesis's strategy cache, which then failed the run as "inconsistent data generation".
_append = st.lists(_entry, max_size=3)
_DELTA_PARTS = (("keep", st.integers(0, 3)), ("set", st.dictionaries(_keys, _json, max_size=2)),
                ("unset", st.lists(st.one_of(_keys, _json), max_size=2)))
_TURN_PARTS = (("response", st.lists(_entry, max_size=2)), ("headers", _json),
               ("meta", st.dictionaries(st.sampled_from(["output_tokens", "x"]), _json)),
               ("synthetic", _json), ("timing", _json))


@st.composite
def _trace_lines(draw: st.DrawFn) -> list[str]:
    api = draw(st.sampled_from(["chat", "anthropic", "responses"]))
    lines = []
    for k in range(draw(st.integers(1, 3))):
        d: dict = {"session": "s", "turn": k, "api": api}
        if k == 0 or draw(st.booleans()):
            d["request"] = draw(_body)
        else:
            d["delta"] = {"base": "previous", "append": draw(_append)}
            for key, value in _DELTA_PARTS:
                if draw(st.booleans()):
                    d["delta"][key] = draw(value)
        for key, value in _TURN_PARTS:
            if draw(st.booleans()):
                d[key] = draw(value)
        lines.append(json.dumps(d))
    return lines


def _use(trace) -> None:
    """What the kit does with a loaded trace: expand every session, export to every format."""
    for s in trace.sessions:
        s.requests({t.turn: t.response or [] for t in s.turns})
    for kind in ("multi_turn", "single_turn"):
        formats.export_aiperf(trace, kind=kind)
    for mode in ("lengths", "payload"):
        formats.export_mooncake(trace, mode=mode)


@FUZZ
@given(_trace_lines())
def test_generated_traces_load_and_export_or_are_refused(lines: list[str]) -> None:
    try:
        trace = loads("\n".join([HEAD, *lines]))
    except TraceError:
        return
    _use(trace)  # a trace the reader accepted is one every part of the kit can use


@FUZZ
@given(st.lists(st.one_of(st.text(max_size=30), _json.map(json.dumps)), max_size=4))
def test_arbitrary_lines_are_refused_as_traces(lines: list[str]) -> None:
    try:
        _use(loads("\n".join([HEAD, *lines])))
    except TraceError:
        pass


_turn_row = st.fixed_dictionaries({}, optional={
    "text": st.one_of(st.text(max_size=5), _json), "texts": st.one_of(st.lists(st.text(max_size=3), max_size=2), _json),
    "role": st.one_of(st.sampled_from(["user", "system", "assistant", "tool"]), _json),
    "timestamp": st.one_of(st.integers(0, 9), _json), "delay": st.one_of(st.integers(0, 9), _json),
    "output_length": st.one_of(st.integers(-1, 9), _json), "extra": _json, "session_id": _json,
    "image": _json, "type": st.one_of(st.sampled_from(["single_turn", "multi_turn"]), _json)})
_mooncake_row = st.fixed_dictionaries({}, optional={
    "input_length": st.one_of(st.integers(-1, 40), _json), "hash_ids": st.one_of(st.lists(st.integers(0, 3)), _json),
    "text_input": _json, "messages": _json, "tools": _json, "payload": _json, "output_length": _json,
    "timestamp": _json, "delay": _json, "session_id": st.one_of(st.sampled_from(["a", "b"]), _json),
    "extra": _json})


@FUZZ
@given(st.lists(st.one_of(_turn_row, st.fixed_dictionaries({"turns": st.lists(_turn_row, max_size=3)},
                                                            optional={"session_id": _json})), max_size=3),
       st.sampled_from(["chat", "anthropic", "responses"]))
def test_generated_aiperf_rows_import_or_are_refused(rows: list[dict], api: str) -> None:
    try:
        trace = formats.import_aiperf("\n".join(json.dumps(r) for r in rows) + "\n", api=api, model="m")
    except ValueError:
        return
    _use(trace)


@FUZZ
@given(st.lists(_mooncake_row, max_size=3), st.sampled_from(["chat", "anthropic", "responses"]))
def test_generated_mooncake_rows_import_or_are_refused(rows: list[dict], api: str) -> None:
    try:
        trace = formats.import_mooncake("\n".join(json.dumps(r) for r in rows) + "\n", api=api, model="m",
                                        block_size=4)
    except ValueError:
        return
    _use(trace)


# ---- the command line: one line on stderr, exit 2 ----------------------------------------------

def _crlf_trace(path: Path) -> Path:
    trace = build("agent-coding", sessions=1, turns=1, prompt_tokens=50, api="chat")
    trace.turns[0].headers = {"x-note": "a\r\nInjected: yes"}
    return save(trace, path)


def _broken_files(tmp: Path) -> dict[str, Path]:
    files = {
        "crlf header": _crlf_trace(tmp / "crlf.jsonl"),
        "broken gzip": tmp / "broken.jsonl.gz",
        "not utf-8": tmp / "latin.jsonl",
        "deep json": tmp / "deep.jsonl",
        "empty": tmp / "empty.jsonl",
    }
    files["broken gzip"].write_bytes(gzip.compress(b'{"schema": "harnesscheck.trace"}\n' * 50)[:60])
    files["not utf-8"].write_bytes(HEAD.encode() + b"\n\xff\xfe{}\n")
    files["deep json"].write_text(HEAD + "\n" + "[" * 100_000 + "]" * 100_000 + "\n")
    files["empty"].write_text("")
    return files


@pytest.mark.parametrize("case", ["crlf header", "broken gzip", "not utf-8", "deep json", "empty"])
def test_trace_commands_refuse_a_bad_trace_in_one_line(case: str, tmp_path: Path, capsys) -> None:
    path = _broken_files(tmp_path)[case]
    for argv in (["trace", "check", str(path)], ["trace", "export", "mooncake", str(path), "--out", str(tmp_path / "m")],
                 ["replay", str(path), "--endpoint", "http://127.0.0.1:9", "--no-progress"]):
        assert main(argv) == 2, (case, argv)
        captured = capsys.readouterr()
        lines = [ln for ln in (captured.err + captured.out).splitlines() if ln.strip()]
        assert len(lines) == 1 and "Traceback" not in lines[0], (case, argv, lines)
        assert "internal error" not in lines[0]
    if case == "crlf header":
        assert "header 'x-note' holds a line break or NUL" in lines[0]


@pytest.mark.parametrize("fmt", ["aiperf", "mooncake"])
@pytest.mark.parametrize("case", ["broken gzip", "not utf-8", "deep json"])
def test_trace_import_refuses_a_bad_file_in_one_line(fmt: str, case: str, tmp_path: Path, capsys) -> None:
    path = _broken_files(tmp_path)[case]
    assert main(["trace", "import", fmt, str(path), "--out", str(tmp_path / "t.jsonl")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and str(path) in err, err


def test_a_gzip_bomb_stops_at_the_bound(tmp_path: Path, monkeypatch) -> None:
    from harnesscheck.replay import trace as trace_module

    bomb = tmp_path / "bomb.jsonl.gz"
    bomb.write_bytes(gzip.compress(b" " * 5_000_000))
    monkeypatch.setattr(trace_module, "MAX_FILE_BYTES", 1_000_000)
    with pytest.raises(TraceError, match="more than 1,000,000 bytes once decompressed"):
        trace_module.read_file_text(bomb, limit=trace_module.MAX_FILE_BYTES)
