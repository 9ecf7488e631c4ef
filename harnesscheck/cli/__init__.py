"""The command line: `main` wires one subcommand per module in `commands/`. Nothing in the kit imports
this package; it imports the kit."""

from harnesscheck.cli.main import main

__all__ = ["main"]
