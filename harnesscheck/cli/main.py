"""The `harnesscheck` command: one subcommand per module in `harnesscheck/cli/commands/`.

Each command module defines `NAME`, `HELP` and `add_arguments(parser)` plus `run(args) -> int`.
Modules are discovered, so adding a command never touches this file.

`main` is where every command ends the same way: a UsageError or another of the kit's errors is
one line and exit 2; Ctrl-C or SIGTERM raise Interrupted (once) so every `finally` and the pytest
session unwind, stopping embedded servers and child processes, then exit 130; a crash of the kit
is one line, its traceback saved to a file, and exit 3. No command prints a Python traceback.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import os
import pkgutil
import re
import signal
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType, ModuleType
from typing import NoReturn

from harnesscheck import __version__
from harnesscheck.cli import commands
from harnesscheck.cli.failures import error_line
from harnesscheck.errors import STOP_REQUESTED, HarnesscheckError, Interrupted

EPILOG = """\
Typical use:
  harnesscheck run                              whole suite against the embedded reference server
  harnesscheck run --endpoint http://host:8000  ... against your endpoint
  harnesscheck serve --port 8000                serve the reference server
  harnesscheck catalog                          list every check
Every command has its own --help.
Exit status: 0 ok, 1 a MUST check failed (check, run) or a regression (gate), 2 usage error, bad
input or unusable endpoint, 3 a kit bug, 4 no verdict (check, run: the endpoint stalled or too few
checks reached a verdict), 130 interrupted (Ctrl-C, SIGTERM).
"""
EVERY_COMMAND = """\
Every command: exit status 2 for a usage error, bad input or an unusable endpoint (one line on
stderr), 3 for a crash of the kit (one line, its traceback saved to a file), 130 when interrupted
(Ctrl-C, SIGTERM: child processes stopped, what was measured written)."""
EXIT_USAGE, EXIT_KIT_BUG, EXIT_INTERRUPTED = 2, 3, 130
DEFER_S = 0.02  # a stop that landed in a finaliser is raised again this much later
REPEAT_GRACE_S = 10.0  # a second stop signal this soon after the first lets the clean-up finish


def _command_modules() -> list[ModuleType]:
    found = []
    for info in pkgutil.iter_modules(commands.__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"harnesscheck.cli.commands.{info.name}")
        if hasattr(module, "NAME"):
            found.append(module)
    return sorted(found, key=lambda m: getattr(m, "ORDER", 50))


class _Parser(argparse.ArgumentParser):
    """argparse's parser that names the nearest option, command or choice when one is mistyped
    (`run --endpont URL`: "unrecognized arguments: --endpont URL; did you mean --endpoint?"), with
    the usage of the (sub)command that was mistyped, not the top level's. Every subcommand's parser
    is of this class (argparse makes subparsers of their parent's class)."""

    def error(self, message: str) -> NoReturn:
        chosen = _INVALID_CHOICE.search(message)
        if chosen:  # a mistyped command, action or choice value
            hint = _nearest(chosen.group(1), _QUOTED.findall(chosen.group(2)))
            if hint:
                message += f"; did you mean {hint}?"
        super().error(message)

    def options(self) -> list[str]:
        return [o for action in self._actions for o in action.option_strings]

    def unknown(self, words: list[str]) -> list[str]:
        """The words that look like options (`--name`, `--name=value`) and that no option of this
        parser takes, even abbreviated (argparse takes a unique prefix)."""
        known = self.options()
        takes_value = {o for action in self._actions if action.nargs != 0 for o in action.option_strings}
        out = []
        for before, word in zip([""] + words, words):
            if word == "--":
                break
            if before in takes_value:  # its value (argparse says if it cannot be one)
                continue
            name = word.split("=", 1)[0]
            if name.startswith("--") and not any(o.startswith(name) for o in known):
                out.append(word)
        return out

    def unrecognized(self, extras: list[str]) -> NoReturn:
        """The error for arguments no option of this parser takes, with the nearest option of each."""
        known = [o for o in self.options() if o.startswith("--")]
        hints = [(word, hint) for word in extras if word.startswith("-")
                 for hint in [_nearest(word.split("=", 1)[0], known)] if hint]
        message = f"unrecognized argument{'s' if len(extras) > 1 else ''}: {' '.join(extras)}"
        if len(hints) == 1:
            message += f"; did you mean {hints[0][1]}?"
        elif hints:
            message += "; did you mean " + ", ".join(f"{hint} for {word}" for word, hint in hints) + "?"
        self.error(message)


_INVALID_CHOICE = re.compile(r"invalid choice: '([^']*)' \(choose from (.*)\)")
_QUOTED = re.compile(r"'([^']*)'")


def _nearest(word: str, names: list[str]) -> str:
    """The name closest to a mistyped one (compared without their leading dashes), or ''."""
    bare = {name.lstrip("-"): name for name in names}
    close = difflib.get_close_matches(word.lstrip("-"), list(bare), n=1, cutoff=0.6)
    return bare[close[0]] if close else ""


def _chosen(parser: argparse.ArgumentParser, argv: list[str]) -> tuple[_Parser, list[str]]:
    """The innermost (sub)command parser the command line chose, and the words after its name."""
    chosen, words = parser, argv
    while True:
        sub = next((a for a in chosen._actions if isinstance(a, argparse._SubParsersAction)), None)
        word = next((w for w in words if sub is not None and w in sub.choices), None)
        if sub is None or word is None:
            assert isinstance(chosen, _Parser)  # build_parser's, and argparse makes subparsers of its class
            return chosen, words
        chosen, words = sub.choices[word], words[words.index(word) + 1:]


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="harnesscheck",
        description="Conformance and benchmark kit for LLM serving endpoints used by agent harnesses "
        "(Claude Code, Codex, OpenClaw): Anthropic Messages, OpenAI Chat Completions, OpenAI Responses.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"harnesscheck {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in _command_modules():
        p = sub.add_parser(
            module.NAME,
            help=module.HELP,
            description=getattr(module, "DESCRIPTION", module.HELP).rstrip("\n") + "\n\n" + EVERY_COMMAND,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    words = list(sys.argv[1:] if argv is None else argv)
    chosen, after = _chosen(parser, words)
    unknown = chosen.unknown(after)
    if unknown:  # before argparse's own checks, which would say a required option is missing first
        chosen.unrecognized(unknown)
    args, extras = parser.parse_known_args(words)
    if extras:  # in the terms of the command that was mistyped
        chosen.unrecognized(extras)
    if not hasattr(args, "_run"):
        parser.print_help()
        return EXIT_USAGE
    prog = f"harnesscheck {args.command}"
    with _stop_on_signals():
        try:
            return int(args._run(args) or 0)
        except HarnesscheckError as error:  # UsageError, bad input files, an unusable endpoint
            return _say(prog, str(error), EXIT_USAGE)
        except KeyboardInterrupt as stop:
            return _say(prog, f"interrupted{f': {stop}' if str(stop) else ''}", EXIT_INTERRUPTED)
        except BrokenPipeError:  # `harnesscheck catalog | head`: the reader left, nothing to say
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 1
        except UnicodeDecodeError as error:  # an input file that is not text (report, gate, trace, compare)
            return _say(prog, f"an input file is not UTF-8 text ({error.reason} at byte {error.start})",
                        EXIT_USAGE)
        except OSError as error:  # a file or port the user named: missing, not allowed, in use
            return _say(prog, error_line(error), EXIT_USAGE)
        except Exception as error:  # a kit bug: one line here, the traceback in a file
            return _say(prog, f"internal error (a kit bug): {type(error).__name__}: {error} "
                              f"(traceback: {_save_traceback()})", EXIT_KIT_BUG)


def _say(prog: str, line: str, status: int) -> int:
    print(f"{prog}: {line}", file=sys.stderr, flush=True)
    return status


def _save_traceback() -> str:
    fd, path = tempfile.mkstemp(prefix="harnesscheck-traceback-", suffix=".txt")
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        traceback.print_exc(file=file)
    return path


@contextmanager
def _stop_on_signals() -> Iterator[None]:
    """SIGTERM and SIGINT raise Interrupted in the main thread (and set STOP_REQUESTED for worker
    threads), so a stop unwinds like Ctrl-C; a repeat within REPEAT_GRACE_S is ignored so the
    clean-up it started is not cut short."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    STOP_REQUESTED.clear()
    first: list[float] = []

    def stop(signum: int, frame: FrameType | None) -> None:
        if first and time.monotonic() - first[0] < REPEAT_GRACE_S:
            return
        first[:] = [time.monotonic()]
        STOP_REQUESTED.set()
        reason[:] = [f"stopped by {signal.Signals(signum).name}"]
        raise_here_or_later(frame)

    def raise_here_or_later(frame: FrameType | None) -> None:
        # Python drops an exception raised inside a weakref callback or a __del__ (it only prints it as
        # "unraisable"), and the main thread runs those whenever the collector does: the stop would be
        # lost. There, raise it again a moment later, from wherever the main thread has got to.
        if _swallows_exceptions(frame):
            if signal.SIGALRM not in previous:  # the alarm is ours only from here (pytest-timeout uses it too)
                previous[signal.SIGALRM] = signal.signal(signal.SIGALRM, lambda _, later: raise_here_or_later(later))
            signal.setitimer(signal.ITIMER_REAL, DEFER_S)
            return
        raise Interrupted(reason[0])

    reason: list[str] = []
    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        if signal.SIGALRM in previous:
            signal.setitimer(signal.ITIMER_REAL, 0)
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _swallows_exceptions(frame: FrameType | None) -> bool:
    """Whether an exception raised in `frame` would be dropped as unraisable on its way out: a
    finaliser or a weakref callback (the ones the collector runs in the main thread) is on the stack.
    A false yes costs DEFER_S."""
    while frame is not None:
        code = frame.f_code
        if code.co_name == "__del__" or os.path.basename(code.co_filename) in ("weakref.py", "_weakrefset.py"):
            return True
        frame = frame.f_back
    return False


if __name__ == "__main__":
    sys.exit(main())
