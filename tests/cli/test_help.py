"""Every command, sub-command and option says what it is for, and the commands spell shared
options one way (issue 20: "a help line for every command and option; a test walks every
command's --help")."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from harnesscheck.cli.main import build_parser


def _walk(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """(command path, parser) for the top-level parser and every sub-command below it."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            for name, sub in action.choices.items():
                yield (*path, name, "<help>"), helps.get(name)
                yield from _walk(sub, (*path, name))


def _parsers() -> list[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    return [(path, p) for path, p in _walk(build_parser()) if path[-1:] != ("<help>",)]


def test_every_command_and_sub_command_has_a_help_line() -> None:
    missing = [" ".join(path[:-1]) for path, text in _walk(build_parser())
               if path[-1:] == ("<help>",) and not (text or "").strip()]
    assert not missing, f"commands without a help line: {missing}"


def test_every_option_has_a_help_line() -> None:
    missing = []
    for path, parser in _parsers():
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction, argparse._VersionAction)):
                continue
            if not (action.help or "").strip() or action.help == argparse.SUPPRESS:
                missing.append(f"harnesscheck {' '.join(path)} {'/'.join(action.option_strings) or action.dest}")
    assert not missing, "options without a help line:\n  " + "\n  ".join(missing)


# One spelling per option across commands: an option that names the same thing is spelled the same.
SAME_THING = {
    "--api": "--apis",  # a comma-separated list of APIs everywhere
    "--only": "--fault",  # a fault is named by --fault NAME (repeatable)
    "--key": "--api-key",
}


def test_shared_options_are_spelled_one_way() -> None:
    wrong = []
    for path, parser in _parsers():
        for action in parser._actions:
            for flag in action.option_strings:
                if flag in SAME_THING:
                    wrong.append(f"harnesscheck {' '.join(path)} {flag} (spelled {SAME_THING[flag]} elsewhere)")
            if "--api-key" in action.option_strings and action.metavar != "KEY":
                wrong.append(f"harnesscheck {' '.join(path)} --api-key metavar {action.metavar!r} (KEY elsewhere)")
    assert not wrong, "\n".join(wrong)


def test_no_option_is_taken_and_ignored() -> None:
    """`check` and `run` write results and transcripts under --out only; the plugin's own file
    options (--hc-results, --hc-transcripts) are not offered where nothing would read them."""
    offered = {flag for path, parser in _parsers() if path[:1] in (("check",), ("run",))
               for action in parser._actions for flag in action.option_strings}
    assert "--out" in offered
    assert not offered & {"--results", "--transcripts"}


@pytest.mark.parametrize("path", [p for p, _ in _parsers() if p], ids=lambda p: " ".join(p))
def test_help_prints_and_exits_0(path: tuple[str, ...]) -> None:
    proc = subprocess.run([sys.executable, "-m", "harnesscheck", *path, "--help"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "usage: harnesscheck" in proc.stdout and "Traceback" not in proc.stderr
