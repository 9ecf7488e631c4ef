"""`harnesscheck catalog`: every check, with its level, source and the faults that prove it."""

from __future__ import annotations

import argparse
import json

NAME = "catalog"
ORDER = 30
HELP = "list every conformance check (id, API, level, title, source, the evidence for its level, faults that make it fail)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--api", choices=["anthropic", "chat", "responses", "any"], help="only this API's checks")


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from conformance.catalog import CHECKS

    checks = [c for c in CHECKS if not args.api or c.api == args.api]
    if args.json:
        print(json.dumps([{"id": c.id, "api": c.api, "title": c.title, "level": str(c.level), "source": c.source,
                           "remedy": c.remedy, "faults": list(c.faults), "rules": list(c.own_rules),
                           "evidence": c.evidence} for c in checks], indent=1))
        return 0
    table = Table(title=f"harnesscheck catalog: {len(checks)} checks")
    for column in ("id", "api", "level", "title", "evidence per rule", "caught fault(s)"):
        table.add_column(column, overflow="fold", no_wrap=column == "id")
    for c in checks:
        table.add_row(c.id, c.api, str(c.level), c.title, "\n".join(f"{r} {e}" for r, e in c.evidence.items()),
                      ", ".join(c.faults))
    Console().print(table)
    return 0
