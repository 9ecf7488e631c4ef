"""Strip Claude Code's per-session billing header before tokenizing (article 1).

The header at prompt position 0 makes every session's prefix unique, so nothing after it is ever
reused from the prefix cache. Its real forms (docs/API_FACTS.md, "What the real clients send"), each
stripped whole, whatever its fields:

- Claude Code 2.1.197: `x-anthropic-billing-header: cc_version=2.1.197.<3 hex>; cc_entrypoint=sdk-cli;`
  (the hex digits hash the session's first user message), with ` cch=00000;` for some providers and
  ` cc_workload=...;` / ` cc_is_subagent=true;` in some sessions;
- older clients (the article): `x-anthropic-billing-header: cc_version=0.2.93; cch=<12 hex>==;`.

The line ends at its newline or at the end of the block (the header as its own block, as 2.1.197
sends it).
"""

from __future__ import annotations

import re

KEY = "x-anthropic-billing-header:"
_LINE = re.compile(r"x-anthropic-billing-header:[^\n]*\n?")


def strip_billing_header(system: list[str]) -> list[str]:
    """Remove the header line from the first system block; drop the block if nothing else is left."""
    if not system or not system[0].startswith(KEY):
        return system
    rest = _LINE.sub("", system[0], count=1)
    return ([rest] if rest.strip() else []) + system[1:]


def strip_simple(system: list[str]) -> list[str]:
    """Dynamo's first rule: strip when the joined text starts with the key and a newline follows.

    Kept to reproduce its miss: the header as the only system block has no newline after it.
    """
    joined = "\n".join(system)
    if joined.startswith(KEY) and "\n" in joined:
        return [joined.split("\n", 1)[1]]
    return system
