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
import importlib
import os
import pkgutil
import signal
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

from harnesscheck import __version__
from harnesscheck.cli import commands
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
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
    args = parser.parse_args(argv)
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
            where = f": {error.filename}" if error.filename else ""
            return _say(prog, f"{error.strerror or error}{where}", EXIT_USAGE)
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

    def stop(signum: int, frame: object) -> None:
        if first and time.monotonic() - first[0] < REPEAT_GRACE_S:
            return
        first[:] = [time.monotonic()]
        STOP_REQUESTED.set()
        raise Interrupted(f"stopped by {signal.Signals(signum).name}")

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


if __name__ == "__main__":
    sys.exit(main())
