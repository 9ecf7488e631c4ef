"""Property tests (hypothesis) of every reader of outside bytes the kit has: the SSE decoders on
hostile byte streams, and the files a user hands the kit (captures, results.json and gate
baselines, SWE-bench task files, AIPerf / Mooncake files, traces and their headers).

Properties, on thousands of generated inputs in all:

- the SSE decoder (protocol/wire/sse.py) never raises but ``FrameTooLarge``, never holds more than
  its frame limit, and gives the same frames whatever way the bytes are split; the replay client's
  fast path (replay/client.py ``FastSSE``) gives the same events as the spec decoder and is bounded
  the same way;
- a file reader refuses what it cannot use with one line and exit 2, or reads it (0, or 1 where the
  command's verdict says so): never exit 3, never a traceback; each is driven through the CLI's own
  ``main``, in-process, on valid files with a field mutated at any depth (wrong type, huge, deep,
  deleted, non-ASCII, CR/LF/NUL), on broken JSON and on random bytes;
- a trace that ``trace check`` accepts can be sent: its headers go on the wire (replay.http1) without
  an error (a header holding CR/LF passed the check and crashed ``replay``).

Sized for the README's run: derandomized (the same inputs every run), no example database, no
deadline; 2,700 generated inputs (2,000 byte streams, each decoded whole and split; 700 files, 800 CLI
runs), about 18 s of CPU on one core. CI's fuzz tier runs twice as many (tests/fuzzing.py). The
generated values include NaN, Infinity, 1e300 and -5 (written as Python's json writes them), and
the traces' request paths and timings: an accepted trace's paths are request targets and its
timings waits replay can make (finite, 0 to a day).
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harnesscheck.cli.main import main
from harnesscheck.protocol.wire.sse import FrameTooLarge, SSEDecoder
from harnesscheck.replay.client import FastSSE
from tests.fuzzing import examples
from tests.reports import factory

FIXTURES = Path(__file__).parents[1] / "clients" / "fixtures"
SETTINGS = dict(derandomize=True, database=None, deadline=None, print_blob=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])


def fuzz(n: int) -> Any:
    """n examples in the README's run, 2n in CI's fuzz tier (tests/fuzzing.py)."""
    return settings(max_examples=examples(quick=n, ci=2 * n), **SETTINGS)


# -- SSE on hostile bytes ------------------------------------------------------------------------------

LIMIT = 512  # a small frame limit, so generated streams reach it
TOKENS = [b"data:", b"data: ", b"event:", b"event: x", b"id:", b"retry:", b":", b"\n", b"\r", b"\r\n",
          b"\n\n", b"\xef\xbb\xbf", b"\xff", b"\xc3", b"{\"type\":\"ping\"}", b"[DONE]", b"data", b"\x00",
          b"x" * 100]
streams = st.lists(st.one_of(st.sampled_from(TOKENS), st.binary(max_size=12)), max_size=60).map(b"".join)
splits = st.lists(st.integers(min_value=0, max_value=4096), max_size=12)


def _pieces(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)])]


def _spec(pieces: list[bytes]) -> tuple[list[tuple], bool]:
    """The spec decoder's frames over the pieces (kind, event, data, raw), and whether it hit the limit."""
    dec = SSEDecoder(max_frame_bytes=LIMIT)
    frames = []
    try:
        for piece in pieces:
            frames += dec.feed(piece)
            assert len(dec._buf) <= LIMIT and len(dec._block.raw) <= LIMIT  # bounded, always
        frames += dec.flush()
    except FrameTooLarge:
        return [], True
    return [(f.kind, f.event, f.data, f.raw) for f in frames], False


@fuzz(1000)
@given(data=streams, cuts=splits)
def test_the_sse_decoder_is_bounded_and_split_invariant(data: bytes, cuts: list[int]) -> None:
    whole, too_large = _spec([data])
    split, split_too_large = _spec(_pieces(data, cuts))
    assert too_large == split_too_large
    assert whole == split
    assert len(whole) <= data.count(b"\n") + data.count(b"\r") + 1


@fuzz(1000)
@given(data=streams, cuts=splits)
def test_the_fast_sse_path_gives_the_spec_decoders_events_and_is_bounded(data: bytes,
                                                                         cuts: list[int]) -> None:
    frames, too_large = _spec([data])
    fast = FastSSE(max_frame_bytes=LIMIT)
    events: list[tuple] = []
    try:
        for piece in _pieces(data, cuts):
            events += fast.feed(piece)
            assert len(fast._buf) <= LIMIT
        events += fast.flush()
    except FrameTooLarge:
        assert too_large or len(data) > LIMIT
        return
    if not too_large:
        assert events == [(event, text) for kind, event, text, _ in frames if kind == "event"]


# -- files, through the CLI -----------------------------------------------------------------------------

# NaN and Infinity are written as the bare words Python's json writes and reads (not JSON, but a file
# may hold them); 1e300 and -5 as timings no replay can wait for.
HOSTILE = [None, 0, -1, -5, 2**70, 1.5e308, 1e300, float("nan"), float("inf"), float("-inf"), True, "",
           "x" * 100_000, "a\r\nInjected: 1", "\u0000", "\ud800", "日本語😀", "[REDACTED]", [], [None], {},
           {"": {}}, [[[[[[[[[[[]]]]]]]]]]], "-" * 3]
hostile = (st.sampled_from(HOSTILE) | st.text(max_size=20) | st.integers() | st.floats())


def _paths(doc: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc[:6]):
            out += _paths(v, (*prefix, i))
    return out


def _mutate(doc: Any, path: tuple, value: Any, delete: bool) -> Any:
    if not path:
        return value
    doc = copy.deepcopy(doc)
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    if delete:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return doc


@st.composite
def mutated(draw: Any, doc: Any, times: int = 2) -> Any:
    """``doc`` with up to ``times`` fields (at any depth, the root too) replaced or deleted."""
    for _ in range(draw(st.integers(min_value=1, max_value=times))):
        path = draw(st.sampled_from(_paths(doc)))
        doc = _mutate(doc, path, draw(hostile), draw(st.booleans()) and bool(path))
    return doc


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, allow_nan=True).replace("\ud800", "\\ud800")


broken_text = st.one_of(st.just(""), st.just("{"), st.just("[" * 3000), st.just("\ufeff{}"),
                        st.binary(max_size=200).map(lambda b: b.decode("latin-1")), st.text(max_size=200))


def _cli(*argv: str) -> tuple[int, str]:
    """``harnesscheck ARGV`` in this process: its exit status and stderr."""
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        rc = main(list(argv))
    return rc, err.getvalue()


def _no_kit_bug(rc: int, err: str, allowed: tuple[int, ...] = (0, 2)) -> None:
    assert rc in allowed and "Traceback" not in err, (rc, err)
    if rc == 2:
        lines = [line for line in err.splitlines() if line.strip() and not line.startswith("  ")]
        assert len(lines) == 1, err  # one line saying what is wrong (an indented list of problems may follow)


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("readers")


def _capture_lines() -> list[Any]:
    lines = (FIXTURES / "codex-tool.capture.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


CAPTURE = _capture_lines()


@fuzz(150)
@given(lines=mutated(CAPTURE, times=3) | st.lists(broken_text, min_size=1, max_size=3))
def test_capture_files_convert_or_are_refused_in_one_line(work: Path, lines: Any) -> None:
    path = work / "c.capture.jsonl"
    rows = lines if isinstance(lines, list) else [lines]
    text = "\n".join(x if isinstance(x, str) else _dump(x) for x in rows)
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    _no_kit_bug(*_cli("trace", "from-capture", str(path), "--out", str(work / "c.trace.jsonl")))


RESULTS = factory.results()


@fuzz(100)
@given(doc=mutated(RESULTS, times=3) | broken_text)
def test_results_and_gate_baselines_are_read_or_refused_in_one_line(work: Path, doc: Any) -> None:
    bad = work / "bad.json"
    bad.write_text(doc if isinstance(doc, str) else _dump(doc), encoding="utf-8", errors="surrogatepass")
    good = work / "good.json"
    if not good.exists():
        good.write_text(json.dumps(RESULTS))
    # the mutated document as the baseline, then as the current run: 0 / 1 are verdicts, 2 a refusal
    _no_kit_bug(*_cli("gate", "--baseline", str(bad), "--current", str(good)), allowed=(0, 1, 2))
    _no_kit_bug(*_cli("gate", "--baseline", str(good), "--current", str(bad)), allowed=(0, 1, 2))


TASK = json.loads((Path(__file__).parents[2] / "scenarios" / "swebench" / "verified_fixture.jsonl")
                  .read_text().splitlines()[0])


@fuzz(150)
@given(rows=st.lists(mutated(TASK, times=2), min_size=1, max_size=3) | st.lists(broken_text, min_size=1,
                                                                                  max_size=2))
def test_task_files_are_read_or_refused_in_one_line(work: Path, rows: list[Any]) -> None:
    path = work / "tasks.jsonl"
    path.write_text("\n".join(r if isinstance(r, str) else _dump(r) for r in rows), encoding="utf-8",
                    errors="surrogatepass")
    _no_kit_bug(*_cli("swebench", "select", "--tasks", str(path), "--out", str(work / "subset.jsonl")))


AIPERF = {"session_id": "s1", "turns": [{"text": "hello", "timestamp": 0, "role": "user"},
                                        {"texts": [{"name": "text", "contents": ["again"]}], "delay": 5}]}
SINGLE = {"text": "hello", "timestamp": 1000, "output_length": 16}
MOONCAKE = {"timestamp": 0, "input_length": 700, "output_length": 16, "hash_ids": [0, 1], "session_id": "a"}


@fuzz(150)
@given(kind=st.sampled_from(["aiperf", "single_turn", "mooncake"]), data=st.data())
def test_aiperf_and_mooncake_files_import_or_are_refused_in_one_line(work: Path, kind: str,
                                                                      data: Any) -> None:
    seed = {"aiperf": AIPERF, "single_turn": SINGLE, "mooncake": MOONCAKE}[kind]
    rows = data.draw(st.lists(mutated(seed, times=2), min_size=1, max_size=3)
                     | st.lists(broken_text, min_size=1, max_size=2))
    path = work / "in.jsonl"
    path.write_text("\n".join(r if isinstance(r, str) else _dump(r) for r in rows), encoding="utf-8",
                    errors="surrogatepass")
    out = work / "imported.jsonl"
    out.unlink(missing_ok=True)
    rc, err = _cli("trace", "import", kind, str(path), "--out", str(out))
    _no_kit_bug(rc, err)
    if rc == 0:  # what an import writes, replay can wait for
        from harnesscheck.replay.trace import load

        _timings_can_be_waited_for(load(out, check=False))


DAY_MS = 86_400_000  # the longest wait a trace may ask for (docs/trace-format.md)


def _timings_can_be_waited_for(trace: Any) -> None:
    for turn in trace.turns:
        for name in ("at_ms", "offset_ms", "think_ms", "tool_ms", "duration_ms"):
            value = getattr(turn.timing, name)
            assert value is None or (math.isfinite(value) and 0 <= value <= DAY_MS), (turn.session, turn.turn,
                                                                                      name, value)


def _sendable_target(path: str) -> bool:
    """A request line's target (RFC 9112 §3.2, origin form), judged here without the kit's validator:
    a '/' first, then visible ASCII only (no space, CR, LF, NUL), no fragment."""
    return path.startswith("/") and not path.startswith("//") and "#" not in path and \
        all(0x21 <= ord(c) <= 0x7E for c in path)


def _trace_lines(work: Path) -> list[Any]:
    path = work / "seed.trace.jsonl"
    if not path.exists():
        assert _cli("trace", "workload", "agent-coding", "--out", str(path), "--sessions", "1",
                    "--turns", "2", "--prompt-tokens", "64")[0] == 0
    return [json.loads(line) for line in path.read_text().splitlines()]


header_text = st.text(st.characters(codec="utf-8"), max_size=12) | st.sampled_from(
    ["a\r\nb", "a\nb", "a\rb", "a\x00b", "é", "日本", "x-ok", "", " ", "a:b"])
path_text = st.sampled_from(["/v1/messages", "/v1/messages?beta=true", "/v1/chat completions", "/v1/x\r\nX: 1",
                             "/v1/x\n", "/v1/x#f", "/v1/ä", "/%zz", "/%41", "//evil/x", "v1/x", "", "/" + "a" * 9000]) \
    | st.text(st.sampled_from("/abc?=&%#: \r\n\x00ä~"), max_size=16).map(lambda t: "/" + t)
timing_value = st.sampled_from([0, 5, 1e3, 86_400_000, 86_400_001, 1e300, -5, float("nan"), float("inf"),
                                float("-inf"), None, "5", True]) | st.floats()
timings = st.dictionaries(st.sampled_from(["at_ms", "offset_ms", "think_ms", "tool_ms", "duration_ms"]),
                          timing_value, max_size=3)


@fuzz(150)
@given(data=st.data())
def test_traces_pass_check_only_when_replay_can_send_them(work: Path, data: Any) -> None:
    """`trace check` accepts a trace only if its turns can be replayed: a header it accepts goes on
    the wire (replay.http1) without an error, its path is a request target, its timings are waits
    replay can make (finite, 0 to a day); everything else is refused in one line."""
    from harnesscheck.replay.http1 import _request_bytes, _Target
    from harnesscheck.replay.trace import TraceError, load

    lines = _trace_lines(work)
    what = data.draw(st.sampled_from(["headers", "path", "timing", "any"]))
    if what == "any":
        lines = data.draw(mutated(lines, times=2))
    else:
        turn = data.draw(st.sampled_from(range(1, len(lines))))
        lines = copy.deepcopy(lines)
        lines[turn][what] = data.draw({"headers": st.dictionaries(header_text, header_text, max_size=3),
                                       "path": path_text, "timing": timings}[what])
    path = work / "t.jsonl"
    rows = lines if isinstance(lines, list) else [lines]
    path.write_text("\n".join(_dump(x) for x in rows), encoding="utf-8", errors="surrogatepass")
    rc, err = _cli("trace", "check", str(path))
    _no_kit_bug(rc, err)
    if rc == 0:
        target = _Target.of("http://127.0.0.1:9/v1/messages")
        trace = load(path)
        for turn in trace.turns:
            _request_bytes("POST", target, turn.headers, b"{}")  # raises on what HTTP cannot carry
            assert _sendable_target(turn.path), turn.path
        _timings_can_be_waited_for(trace)
    else:
        with pytest.raises((TraceError, ValueError, KeyError, TypeError, AttributeError)):
            load(path)
