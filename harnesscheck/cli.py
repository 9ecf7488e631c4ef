"""The `harnesscheck` command: one subcommand per module in `harnesscheck/commands/`.

Each command module defines `NAME`, `HELP` and `add_arguments(parser)` plus `run(args) -> int`.
Modules are discovered, so adding a command never touches this file.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from types import ModuleType

from harnesscheck import __version__, commands

EPILOG = """\
Typical use:
  harnesscheck run                              whole suite against the embedded reference server
  harnesscheck run --endpoint http://host:8000  ... against your endpoint
  harnesscheck serve --port 8000                serve the reference server
  harnesscheck catalog                          list every check
Every command has its own --help.
"""


def _command_modules() -> list[ModuleType]:
    found = []
    for info in pkgutil.iter_modules(commands.__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"harnesscheck.commands.{info.name}")
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
            description=getattr(module, "DESCRIPTION", module.HELP),
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
        return 2
    try:
        return int(args._run(args) or 0)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
