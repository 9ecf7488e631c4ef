"""Subcommands of the harnesscheck CLI, discovered by harnesscheck.cli."""
