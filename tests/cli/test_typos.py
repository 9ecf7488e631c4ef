"""Typos and missing files (issue 45): a mistyped option, command, action or choice is named with its
nearest match, in the usage of the command that was mistyped (not the top level's); a missing file
is one line, `No such file or directory: PATH` (never `[Errno 2] ...`); a mistyped fault name, given
to `serve` or through --server-arg, is refused with the nearest fault before any server starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from harnesscheck.cli.main import main
from tests.cli.helpers import harnesscheck


def test_run_with_a_mistyped_option_names_the_right_one(tmp_path: Path) -> None:
    """The done-when line: `harnesscheck run --endpont URL` -> did you mean --endpoint?"""
    ran = harnesscheck("run", "--endpont", "http://127.0.0.1:9", cwd=tmp_path, timeout=60)
    assert ran.rc == 2
    last = ran.err.strip().splitlines()[-1]
    assert last == "harnesscheck run: error: unrecognized argument: --endpont; did you mean --endpoint?", ran.err
    assert ran.err.startswith("usage: harnesscheck run "), ran.err  # the command's usage, not the top level's
    assert not list(tmp_path.iterdir())  # nothing ran


def _error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as stopped:
        main(list(argv))
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err.strip().splitlines()[-1]


@pytest.mark.parametrize(("argv", "said"), [
    (("rn",), "harnesscheck: error: argument COMMAND: invalid choice: 'rn' (choose from "),
    (("bench", "lod"), "harnesscheck bench: error: argument BENCH: invalid choice: 'lod'"),
    (("check", "--witness", "tokenise"), "harnesscheck check: error: argument --witness: invalid choice: 'tokenise'"),
    (("bench", "load", "--concurency", "3"), "harnesscheck bench load: error: unrecognized argument: --concurency;"),
    (("check", "--endpoint=http://x", "--tries=2", "--tire", "3"), "harnesscheck check: error: unrecognized"),
    # a required option is missing because it was mistyped: the typo is what is said
    (("replay", "trace.jsonl", "--endpont", "http://x"), "harnesscheck replay: error: unrecognized argument: "
                                                          "--endpont; did you mean --endpoint?"),
    (("trace", "chek", "t.jsonl"), "harnesscheck trace: error: argument ACTION: invalid choice: 'chek'"),
])
def test_each_mistake_names_its_nearest_match(capsys: pytest.CaptureFixture[str], argv: tuple[str, ...],
                                              said: str) -> None:
    line = _error(capsys, *argv)
    assert line.startswith(said), line
    nearest = {"rn": "run", "lod": "load", "tokenise": "tokenize", "--concurency": "--concurrency",
               "--tire": "--tries", "--endpont": "--endpoint", "chek": "check"}
    typed = next(word for word in argv if word in nearest)
    assert line.endswith(f"did you mean {nearest[typed]}?"), line


def test_no_suggestion_when_nothing_is_near(capsys: pytest.CaptureFixture[str]) -> None:
    assert _error(capsys, "run", "--foo") == "harnesscheck run: error: unrecognized argument: --foo"
    # the value of an option that takes one is its value, whatever it looks like: argparse's own words
    assert _error(capsys, "check", "--server-arg", "--fault=x").endswith(
        "argument --server-arg: expected one argument")


@pytest.mark.parametrize("argv", [
    ("replay", "missing.jsonl", "--endpoint", "http://127.0.0.1:9"),
    ("trace", "check", "missing.jsonl"),
    ("bench", "load", "--workload", "missing.jsonl", "--concurrency", "1", "--no-progress"),
])
def test_a_missing_file_is_one_line_without_errno(tmp_path: Path, argv: tuple[str, ...]) -> None:
    ran = harnesscheck(*argv, cwd=tmp_path, timeout=120)
    assert ran.rc == 2
    line = ran.one_line()
    assert line.startswith(f"harnesscheck {argv[0]}: ") and line.endswith("No such file or directory: missing.jsonl")
    assert "Errno" not in ran.err + ran.out and not ran.out.strip(), ran.err + ran.out


@pytest.mark.parametrize("argv", [
    ("serve", "--port", "0", "--fault", "stal-stream"),
    ("check", "--server-arg=--fault=stal-stream"),
    ("run", "--server-arg=--fault", "--server-arg=stal-stream"),
    ("bench", "load", "--server-arg=--fault=stal-stream", "--no-progress"),
])
def test_a_mistyped_fault_is_refused_with_the_nearest(tmp_path: Path, argv: tuple[str, ...]) -> None:
    """Through --server-arg it was the embedded server's crash: a kit bug, exit 3, for `check`."""
    ran = harnesscheck(*argv, cwd=tmp_path, timeout=120)
    assert ran.rc == 2, ran.err
    assert ran.one_line().endswith("unknown fault: stal-stream (did you mean stall-stream?); `harnesscheck "
                                   "faults` lists them")
