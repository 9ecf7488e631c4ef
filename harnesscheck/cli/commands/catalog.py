"""`harnesscheck catalog`: every check, with its level, source and the faults that prove it."""

from __future__ import annotations

import argparse
import json
import sys

from harnesscheck.reports.schema import api_names  # every API (the registry, now), and "any"

NAME = "catalog"
ORDER = 30
HELP = "list every conformance check (id, API, level, title, source, the evidence for its level, faults that make it fail)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--apis", default=None, metavar="LIST",
                        help="only these APIs' checks, comma-separated: anthropic, chat, responses, any (the "
                             "API-independent checks); default: all")


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from harnesscheck.conformance.catalog import CHECKS
    from harnesscheck.conformance.options import split_apis, unknown_choice
    from harnesscheck.errors import UsageError

    known = api_names()
    apis = split_apis(args.apis) if args.apis else list(known)
    for api in apis:
        if api not in known:
            raise UsageError(unknown_choice("--apis", "API", api, known))
    checks = [c for c in CHECKS if c.api in apis]
    if args.json:
        print(json.dumps([{"id": c.id, "api": c.api, "title": c.title, "level": str(c.level), "source": c.source,
                           "remedy": c.remedy, "faults": list(c.faults), "rules": list(c.own_rules),
                           "evidence": c.evidence} for c in checks], indent=1))
        return 0
    rows = [(c.id, c.api, str(c.level), c.title, [f"{r} {e}" for r, e in c.evidence.items()], ", ".join(c.faults))
            for c in checks]
    header = ("id", "api", "level", "title", "evidence per rule", "caught fault(s)")
    if not sys.stdout.isatty():  # piped (`catalog | grep AN-`): one tab-separated line per check, never folded
        print("\t".join(header))
        for row in rows:
            print("\t".join([*row[:4], "; ".join(row[4]), row[5]]))
        return 0
    table = Table(title=f"harnesscheck catalog: {len(checks)} checks")
    for column in header:
        table.add_column(column, overflow="fold", no_wrap=column == "id")
    for row in rows:
        table.add_row(*row[:4], "\n".join(row[4]), row[5])
    Console().print(table)
    return 0
