"""`harnesscheck profile`: what a client's model catalog changes in its requests (Codex)."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

NAME = "profile"
ORDER = 23
HELP = "diff what Codex's model catalog changes in its first request under two model ids"
DESCRIPTION = """\
Runs Codex under each --model id against the reference server (serving every id via --model-id),
captures its first request and diffs: fallback metadata or a catalog profile, base instructions
(length, headings), tool list, reasoning settings, text verbosity, parallel tool calls, include,
and the tool-output truncation policy (a command printing ~229 KB; what came back in the next
request). With --endpoint the endpoint must serve both ids.

Example:
  harnesscheck profile --client codex --model gpt-5.5 --model openai/openai/gpt-5.5

With --endpoint, the endpoint is checked first, as `check` does (conformance/preflight.py): unusable, or
not serving both ids, is one line and exit 2.

Exit status: 0 both profiles were captured; 1 one was not; 2 usage error, unusable endpoint, or
Codex not installed (and not installable) or not starting: nothing was profiled.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--client", default="codex", choices=["codex"], help="the client (codex)")
    parser.add_argument("--model", action="append", required=True, metavar="ID", help="a model id (give two)")
    parser.add_argument("--endpoint", metavar="URL", default=os.environ.get("HARNESSCHECK_ENDPOINT"),
                        help="endpoint serving both ids (default: $HARNESSCHECK_ENDPOINT, else the reference server)")
    parser.add_argument("--out", default="harnesscheck-results/profile", metavar="DIR", help="output folder")
    parser.add_argument("--timeout", type=float, default=180.0, metavar="S", help="time limit per Codex run")
    parser.add_argument("--json", action="store_true", help="print the profiles and the diff as JSON")


def run(args: argparse.Namespace) -> int:
    from contextlib import ExitStack

    from harnesscheck.agents.clients import install, profile

    if len(args.model) != 2:
        print("give --model twice")
        return 2
    if args.endpoint:  # it must serve both ids: checked first, as `check` does (one line, exit 2)
        from harnesscheck.conformance.preflight import probe_timeout, require_usable, say

        require_usable(args.endpoint, api_key=os.environ.get("HARNESSCHECK_API_KEY") or None,
                       model=tuple(args.model), apis=["responses"], timeout=probe_timeout(args.timeout),
                       progress=say)
    inst = install.ensure("codex")
    why = inst.skip or install.runnable("codex", inst)
    if why:  # nothing was profiled: never a success
        from harnesscheck.errors import UsageError

        raise UsageError(f"codex is not usable: {why} (python -m harnesscheck.agents.clients codex installs it)")
    out = Path(args.out)
    with ExitStack() as stack:
        endpoint = args.endpoint
        if not endpoint:
            from harnesscheck.reference_server.launch import ServerProcess

            flags = [x for m in args.model for x in ("--model-id", m)]
            endpoint = stack.enter_context(ServerProcess(flags)).url
        profs = [profile.capture_profile(inst, endpoint, m, out / f"model{i}", timeout=args.timeout)
                 for i, m in enumerate(args.model)]
    first, second = profs  # two --model ids, checked above
    rows = profile.diff(first, second)
    doc = {"client": "codex", "codex_version": inst.version, "models": args.model, "profiles": profs, "diff": rows}
    out.mkdir(parents=True, exist_ok=True)
    (out / "profile.json").write_text(json.dumps(doc, indent=1))
    print(json.dumps(doc, indent=1) if args.json else profile.render(first, second, rows))
    print(f"written: {out / 'profile.json'}")
    return 0 if all(p.get("ok") for p in profs) else 1
