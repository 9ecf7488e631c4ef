"""`harnesscheck clients`: run the real agent clients (Claude Code, Codex, OpenClaw) against an endpoint."""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

NAME = "clients"
ORDER = 22
HELP = ("run the real clients (Claude Code, Codex, OpenClaw) for a text and a tool turn; --faults: client impact "
        "(every fault, each client's real tool kinds); "
        "--overflow: what they do at the context window; --refresh-fixtures: re-capture their recorded sessions")
DESCRIPTION = """\
Installs (once, into $HARNESSCHECK_CLIENTS_DIR or ~/.cache/harnesscheck/clients) and runs the real
clients from the npm registry against the endpoint, each for a text turn ("Say ok") and a tool
turn (the client's shell tool runs `echo harnesscheck-$((6*7))`), through the capture proxy, and
reports pass/fail per turn with the client's own output. Checks: CL-ANSWERED (every request
answered without error), CL-FINAL-TEXT (exit 0, a final text printed), CL-TOOL-RUN (the tool call
was run and its result sent back). Without --endpoint the embedded reference server is started.
Clients that cannot be installed are skipped with the reason. Captures, stdout/stderr and
results.json go to --out.

--websocket-probe also runs Codex with supports_websockets = true and reports the time to its first
POST (the reference server answers the upgrade 426, so Codex falls back at once).

--faults runs every client against the reference server once clean and once per fault, on the turns
of its real tool kinds (agents/clients/kinds.py: Claude Code's text, Bash, Read, Read+Edit and
screenshot-reading turns; Codex's text and shell turns, and its apply_patch and shell turns under its
gpt-5.5 catalog profile; OpenClaw's text, exec and apply_patch turns; CL-EFFECT: the edited file holds
the new text, CL-IMAGE: the image came back in the tool result), and records per fault, client and turn
what broke (the client's own error) in conformance/impact.json (or --impact FILE), saved after each
fault; a run of some faults (--fault), clients or turns (--turn) updates the file turn by turn. The
faults met only at the context window are measured by the overflow session (--overflow's cases, turns
"overflow", "overflow-usage", "overflow-compact"); stall-stream is marked not measurable, with why.
--fault all measures every fault (about 1.5 hours on a loaded 2-core machine, OpenClaw most of it);
--fault missing those the file lacks. `harnesscheck check` then shows a per-harness verdict for each
check.

--overflow runs Claude Code and Codex (the installed ones) through a session that grows past a small
context window of the reference server, once per overflow form (the API's own refusal, {"detail": ...},
a 500, a 400 without the marker) and per usage bug (input_tokens 0 at message_start, usage that counts
only the new turn), and prints what each client did: compacted (on its usage meter or on the refusal)
and went on, or broke (its own error). docs/API_FACTS.md "Context overflow" records the results;
--case NAME runs only some cases. Writes overflow.json to --out.

--refresh-fixtures re-captures the recorded tool sessions the conformance suite replays
(scenarios/clients/*.json, conformance/test_client_sessions.py) with the installed clients against a
fresh reference server, and rewrites them (a client not installed keeps its old fixture); --session NAME
only some. tests/clients/test_fixtures_fresh.py says when the shipped ones are older than the clients.

Examples:
  harnesscheck clients
  harnesscheck clients --endpoint http://localhost:8000 --model nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4
  harnesscheck clients --clients codex --websocket-probe
  harnesscheck clients --faults --fault rs-missing-completed --clients codex
  harnesscheck clients --faults --fault all          # the whole table (about 1.5 hours, OpenClaw most of it)
  harnesscheck clients --faults --fault all --clients claude-code,codex --turn patch --turn edit
  harnesscheck clients --overflow --clients claude-code,codex
  harnesscheck clients --refresh-fixtures --session codex-gpt-5.5

With --endpoint, the endpoint is checked first, as `check` does (conformance/preflight.py: it answers
HTTP as an LLM API, takes the API key, serves --model; each probe waits up to --timeout, at most 60 s):
an unusable endpoint is one line and exit 2, before any client is installed or run.

Exit status: 0 every client that ran passed its turns; 1 one failed; 2 usage error or unusable endpoint.
"""

DEFAULT_MODEL = "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--endpoint", metavar="URL", default=os.environ.get("HARNESSCHECK_ENDPOINT"),
                        help="endpoint base URL (default: $HARNESSCHECK_ENDPOINT, else start the reference server)")
    parser.add_argument("--model", default=os.environ.get("HARNESSCHECK_MODEL") or DEFAULT_MODEL, metavar="ID",
                        help=f"model id (default: $HARNESSCHECK_MODEL, else {DEFAULT_MODEL})")
    parser.add_argument("--clients", default="claude-code,codex,openclaw", metavar="LIST",
                        help="comma-separated: claude-code, codex, openclaw; NAME:API picks the wire API "
                             "(openclaw:responses, openclaw:chat)")
    parser.add_argument("--out", default="harnesscheck-results/clients", metavar="DIR", help="output folder")
    parser.add_argument("--api-key", metavar="KEY", help="API key to give the clients (or HARNESSCHECK_API_KEY)")
    parser.add_argument("--timeout", type=float, default=180.0, metavar="S", help="time limit per client turn")
    parser.add_argument("--install-timeout", type=float, default=600.0, metavar="S", help="time limit per npm install")
    parser.add_argument("--websocket-probe", action="store_true",
                        help="also run Codex with supports_websockets = true and time its first POST")
    parser.add_argument("--faults", action="store_true", help="client impact: run the clients against each fault")
    parser.add_argument("--fault", action="append", default=[], metavar="NAME",
                        help="--faults: only these faults; 'all': every reference-server fault; 'missing': the faults "
                        "the impact file has no measurement of (default: the faults API_FACTS names as breaking or "
                        "tolerated). Each client meets only the faults of its API")
    parser.add_argument("--turn", action="append", default=[], metavar="NAME",
                        help="--faults: only these turns (text, tool, read, edit, image, patch, shell: "
                             "agents/clients/kinds.py; overflow: the overflow session of the faults met at the "
                             "window); the file keeps the other turns' measurements")
    parser.add_argument("--impact", metavar="FILE", help="--faults: write here instead of conformance/impact.json")
    parser.add_argument("--overflow", action="store_true",
                        help="what the clients do when their session outgrows the context window (per overflow form)")
    parser.add_argument("--case", action="append", default=[], metavar="NAME",
                        help="--overflow: only these cases (correct, detail, 500, bare-400, usage-correct, "
                             "zero-input-tokens, current-turn-only, compact-detail, compact-500, compact-bare-400)")
    parser.add_argument("--refresh-fixtures", action="store_true",
                        help="re-capture the recorded client sessions (scenarios/clients) with the installed clients")
    parser.add_argument("--session", action="append", default=[], metavar="NAME",
                        help="--refresh-fixtures: only these sessions (claude-code, codex-gpt-5.5, codex-fallback, "
                             "openclaw-anthropic, openclaw-responses, openclaw-chat)")
    parser.add_argument("--fixtures", metavar="DIR", help="--refresh-fixtures: write here instead of scenarios/clients")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")


def _parse_clients(spec: str) -> list[tuple[str, str | None]]:
    out = []
    for item in [s.strip() for s in spec.split(",") if s.strip()]:
        name, _, api = item.partition(":")
        out.append((name, api or None))
    return out


def run(args: argparse.Namespace) -> int:
    import os
    from contextlib import ExitStack

    from harnesscheck.agents.clients import DUMMY_KEY, get_client, install, turns

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    wanted = _parse_clients(args.clients)
    api_key = args.api_key or os.environ.get("HARNESSCHECK_API_KEY") or DUMMY_KEY

    if args.refresh_fixtures:
        return _refresh(args, out)
    if args.overflow:
        return _overflow(args, out, wanted)
    if args.faults:
        return _faults(args, out, wanted)

    if args.endpoint:  # unusable: one line and exit 2, before any install or client run
        from harnesscheck.conformance.preflight import probe_timeout, require_usable, say

        given_key = None if api_key == DUMMY_KEY else api_key
        require_usable(args.endpoint, api_key=given_key, model=args.model,
                       apis=list(dict.fromkeys(get_client(name, api).api for name, api in wanted)),
                       timeout=probe_timeout(args.timeout), progress=say)
    results = []
    with ExitStack() as stack:
        endpoint = args.endpoint
        if not endpoint:
            from harnesscheck.reference_server.launch import ServerProcess

            server = stack.enter_context(ServerProcess(["--model-id", args.model] if args.model != DEFAULT_MODEL
                                                       else []))
            endpoint = server.url
            print(f"reference server at {endpoint}", flush=True)
        for name, api in wanted:
            client = get_client(name, api)
            inst = install.ensure(client.install_name, timeout=args.install_timeout)
            if not inst.ok:
                print(f"{client.label}: skipped: {inst.skip}", flush=True)
                results.append({"client": name, "label": client.label, "api": client.api, "skip": inst.skip})
                continue
            print(f"{client.label}: running its text and tool turns (up to {args.timeout:g} s each) ...", flush=True)
            for r in turns.run_client(client, inst, endpoint, args.model, out, api_key=api_key, timeout=args.timeout):
                results.append(r.to_dict())
                _print_turn(r)
            if name == "codex" and args.websocket_probe:
                probe = get_client("codex", websockets=True)
                r = turns.run_turn(probe, inst, endpoint, args.model, out / "codex-websocket" / "text", turn="text",
                                    prompt=turns.TEXT_PROMPT, api_key=api_key, timeout=args.timeout)
                r.turn = "text (supports_websockets = true)"
                results.append(r.to_dict())
                _print_turn(r)
                print(f"    websocket probe: {r.ws_probes} GET /v1/responses upgrade attempt(s) "
                      f"({', '.join(str(q['status']) for q in r.requests if q['method'] == 'GET')}); "
                      f"first POST {r.first_post_s} s after start", flush=True)
    (out / "results.json").write_text(json.dumps({"endpoint": args.endpoint or "embedded reference server",
                                                  "model": args.model, "results": results}, indent=1))
    if args.json:
        print(json.dumps(results, indent=1))
    print(f"results: {out / 'results.json'}")
    failed = [r for r in results if not r.get("skip") and not r.get("ok")]
    return 1 if failed else 0


def _faults(args: argparse.Namespace, out: Path, wanted: list[tuple[str, str | None]]) -> int:
    """--faults: measure, saving the impact file after each fault (a stopped run keeps what it measured;
    a partial run, of some faults, clients or turns, updates the file turn by turn)."""
    from harnesscheck.agents.clients import fault_runs, kinds
    from harnesscheck.conformance import impact
    from harnesscheck.errors import UsageError
    from harnesscheck.reference_server.faults import FAULTS

    path = Path(args.impact) if args.impact else impact.IMPACT_PATH
    old = impact.load(path) if path.exists() else {}
    chosen: list[str] = []
    for name in args.fault:
        if name == "all":  # each client then meets its API's faults (fault_runs.runs_for_fault)
            chosen += list(FAULTS)
        elif name == "missing":  # the faults the file has no client measurement of
            chosen += fault_runs.missing(old)
        elif name in FAULTS:
            chosen.append(name)
        else:
            raise UsageError(f"--fault: unknown fault {name!r} (all, missing, or one of: {', '.join(FAULTS)})")
    faults = tuple(dict.fromkeys(chosen)) or fault_runs.DEFAULT_FAULTS
    unknown = [t for t in args.turn if t not in (*kinds.names(), "overflow")]
    if unknown:
        raise UsageError(f"--turn: unknown turn {unknown[0]!r} (known: {', '.join(kinds.names())}, overflow)")
    runs = tuple(wanted) if args.clients != "claude-code,codex,openclaw" else fault_runs.DEFAULT_RUNS
    t0 = time.monotonic()

    def save(data: dict) -> None:
        fault_runs.save(fault_runs.merge(old, data), path)

    say = lambda s: print(f"  {s}", flush=True)  # noqa: E731
    short = tuple(t for t in args.turn if not t.startswith("overflow"))
    data: dict = {}
    if short or not args.turn:  # the short turns meet every fault but those shown only at the window
        data = fault_runs.run_impact(out / "faults", runs=runs, model=args.model, timeout=args.timeout,
                                     faults=tuple(f for f in faults if f not in fault_runs.OVERFLOW_ONLY),
                                     turn_names=short, progress=say, on_fault=save)
        old = data = fault_runs.merge(old, data)
    cases = fault_runs.overflow_cases(faults)
    if cases and (not args.turn or any(t.startswith("overflow") for t in args.turn)):
        from harnesscheck.agents.clients import overflow

        say(f"the overflow session (clients --overflow), cases {', '.join(cases)}")
        doc = overflow.run_overflow(out / "overflow", clients=tuple(r for r in runs if r in overflow.DEFAULT_CLIENTS),
                                    cases=cases, timeout=max(args.timeout, 400.0), progress=say, first_model_only=True)
        doc["measured"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        (out / "overflow.json").write_text(json.dumps(doc, indent=1))
        data = fault_runs.merge(old, fault_runs.from_overflow(doc))
    data = data or old
    fault_runs.prune(data)
    fault_runs.mark_unmeasurable(data)
    fault_runs.save(data, path)
    for row in fault_runs.table(data):
        print("  ".join(f"{c:28}" for c in row))
    for k, why in data.get("skipped", {}).items():
        print(f"skipped {k}: {why}")
    print(f"wrote {path} ({fault_runs.coverage(data)}; this run {time.monotonic() - t0:.0f} s)")
    return 0


def _refresh(args: argparse.Namespace, out: Path) -> int:
    from harnesscheck.agents.clients import fixtures
    from harnesscheck.scenarios import client_sessions

    target = Path(args.fixtures) if args.fixtures else client_sessions.FOLDER
    report = fixtures.refresh(target, names=tuple(args.session), work=out / "fixtures", timeout=args.timeout,
                              progress=lambda s: print(f"  {s}", flush=True))
    print(f"fixtures: {target}")
    return 1 if any(v.startswith("refused") for v in report.values()) else 0


def _overflow(args: argparse.Namespace, out: Path, wanted: list[tuple[str, str | None]]) -> int:
    from harnesscheck.agents.clients import overflow

    clients = tuple(wanted) if args.clients != "claude-code,codex,openclaw" else overflow.DEFAULT_CLIENTS
    cases = tuple(args.case) or overflow.DEFAULT_CASES
    unknown = [c for c in cases if c not in overflow.CASES]
    if unknown:
        from harnesscheck.errors import UsageError

        raise UsageError(f"--case: unknown case {unknown[0]!r}; choose from {', '.join(overflow.CASES)}")
    doc = overflow.run_overflow(out / "overflow", clients=clients, cases=cases, timeout=max(args.timeout, 400.0),
                                progress=lambda s: print(f"  {s}", flush=True))
    (out / "overflow.json").write_text(json.dumps(doc, indent=1))
    for key, why in doc["skipped"].items():
        print(f"skipped {key}: {why}")
    print(f"results: {out / 'overflow.json'}")
    return 0


def _print_turn(r) -> None:  # noqa: ANN001
    mark = "PASS" if r.ok else "FAIL"
    print(f"{mark} {r.label} {r.version} [{r.turn}] {r.seconds:.1f} s, first POST {r.first_post_s} s: "
          f"final text {r.final_text.strip()[:80]!r}", flush=True)
    for c in r.checks:
        print(f"    {'ok  ' if c.ok else 'FAIL'} {c.id}: {c.detail[:300]}")
    if not r.ok:
        if r.error:
            print(f"    client error: {r.error[:600]}")
        tail = (r.stderr_tail or r.stdout_tail).strip()
        if tail:
            print("    client output (tail): " + tail[-600:].replace("\n", "\n      "))
