"""Client impact as data: which reference-server faults break which real client, and what that
means for a rule that fails on an endpoint.

``run_impact(clients, faults)`` runs each client's text and tool turns against the reference server
once clean and once per fault, and records a verdict per (fault, client): ``breaks`` when a turn
that passes clean fails under the fault, else ``unaffected``. ``conformance/clients/impact.json``
keeps the latest measurement with the client versions.

Each fault plants known rule violations (``catalog.PLANTED``). ``verdicts_for(check, rules)``
speaks only of the clients that use the check's API, and only from measurements: a client "would
break" when a fault planting one of the failing rules broke it, is "unaffected" when every failing
rule was measured and none broke it, and otherwise there is "no measured impact" — never a guess.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from harnesscheck.conformance.clients import Client
    from harnesscheck.conformance.clients.install import Install

IMPACT_PATH = Path(__file__).with_name("impact.json")
BREAKS, OK = "breaks", "unaffected"
WOULD_BREAK, UNAFFECTED, NO_MEASURE = "would break", "unaffected", "no measured impact"

# API_FACTS.md, "What breaks real clients": faults that break a client, and a few that do not.
FAULTS_BREAKING = ("an-missing-block-stop", "an-delta-unstarted-block", "an-delta-type-mismatch", "reject-cache-control", "reject-system-role",
                   "rs-missing-completed", "rs-missing-call-id", "invalid-tool-json", "an-end-turn-after-tool-use",
                   "chat-finish-stop-after-tool-calls", "reject-unknown-fields", "reject-compressed-body")
FAULTS_TOLERATED = ("an-block-index-skip", "an-event-name-mismatch", "an-missing-message-stop",
                    "message-start-zero-input-tokens", "rs-sequence-gap", "rs-arguments-done-mismatch")
DEFAULT_FAULTS = FAULTS_BREAKING + FAULTS_TOLERATED


def fault_apis(fault: str) -> tuple[str, ...]:
    """The wire APIs whose traffic a fault bends; a client runs only against its own API's faults."""
    from harnesscheck.reference_server.faults import FAULTS

    return FAULTS[fault].apis


def faults_for(api: str) -> tuple[str, ...]:
    """Every reference-server fault a client speaking ``api`` can meet (its API's and the neutral ones)."""
    from harnesscheck.reference_server.faults import FAULTS

    return tuple(f for f, fault in FAULTS.items() if api in fault.apis and not fault.transport)
# (client, api) pairs a fault matrix runs; OpenClaw over Chat Completions shows the finish_reason bug.
DEFAULT_RUNS = (("claude-code", None), ("codex", None), ("openclaw", None), ("openclaw", "chat"))


def client_key(name: str, api: str | None) -> str:
    return name if api is None else f"{name}:{api}"


def prepare_clients(runs: Iterable[tuple[str, str | None]], *, install_missing: bool = True
                    ) -> tuple[list[tuple[str, Client, Install]], dict[str, str]]:
    """The clients of ``runs`` ((name, api) pairs) ready to run, as [(key, client, install)], and
    {key: why not} for the others: not installed (``install_missing=False`` uses the cache only;
    otherwise ``install.ensure`` installs it, and an install that fails says why), or its binary
    missing or not starting (``install.runnable``). Shared by ``run_impact`` and ``verify``."""
    from harnesscheck.conformance.clients import get_client, install

    prepared: list[tuple[str, Client, Install]] = []
    skipped: dict[str, str] = {}
    for name, api in runs:
        client = get_client(name, api)
        key = client_key(name, api)
        if install_missing:
            inst = install.ensure(client.install_name)
        else:
            inst = install.installed(client.install_name) or install.Install(
                client.install_name, install.cache_dir() / client.install_name,
                skip=f"not installed in {install.cache_dir()} (python -m harnesscheck.conformance.clients {client.install_name} "
                     "installs it)")
        why = inst.skip or install.runnable(client.install_name, inst)
        if why:
            skipped[key] = why
            continue
        prepared.append((key, client, inst))
    return prepared, skipped


def client_entry(client: Client, inst: Install) -> dict[str, str]:
    """A client's record in results: {"label": "Codex", "version": "0.171.0", "api": "responses"}."""
    return {"label": client.label.split(" (")[0], "version": inst.version, "api": client.api}


def load(path: Path = IMPACT_PATH) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def save(data: dict[str, Any], path: Path = IMPACT_PATH) -> Path:
    path.write_text(json.dumps(data, indent=1, sort_keys=False) + "\n")
    return path


def label_of(entry: dict[str, Any]) -> str:
    """'Claude Code 2.1.197' (the same spelling as the catalog's static dicts); one label for all of
    a client's wire APIs, so OpenClaw over Chat and over Messages give one verdict per check."""
    return f"{entry['label'].split(' (')[0]} {entry['version']}".strip()


def column_of(key: str, entry: dict[str, Any]) -> str:
    api = key.partition(":")[2]
    return label_of(entry) + (f" ({api})" if api else "")


def verdicts_for(check: Any, rules: list[str], data: dict[str, Any] | None = None) -> dict[str, dict[str, str]]:
    """Per client of the check's API: {"verdict": would break | unaffected | no measured impact,
    "evidence": the rule, the fault and the client's own error behind it}, from measurements only."""
    from harnesscheck.conformance.catalog import faults_planting

    data = load() if data is None else data
    clients = data.get("clients") or {}
    per_fault = data.get("faults") or {}
    out: dict[str, dict[str, str]] = {}
    for key, entry in clients.items():
        if check.api not in ("any", entry.get("api")):
            continue  # a client of another wire API never meets this check's traffic
        label = label_of(entry)
        broke, fine, unmeasured = [], [], []
        for rule in rules:
            cells = [(f, per_fault[f][key]) for f in faults_planting(rule) if key in (per_fault.get(f) or {})]
            broken = [(f, c) for f, c in cells if c.get("verdict") == BREAKS]
            if broken:
                f, cell = broken[0]
                turn = (cell.get("broken_turns") or ["?"])[0]
                error = ((cell.get("turns") or {}).get(turn) or {}).get("error", "")[:160]
                broke.append(f"{rule}: measured with fault {f}, {turn} turn failed" + (f" ({error})" if error else ""))
            elif cells:
                fine.append(f"{rule}: measured with fault {', '.join(f for f, _ in cells)}, turns completed")
            else:
                unmeasured.append(rule)
        if broke:
            verdict, evidence = WOULD_BREAK, "; ".join(broke)
        elif fine and not unmeasured:
            verdict, evidence = UNAFFECTED, "; ".join(fine)
        else:
            verdict = NO_MEASURE
            evidence = "no fault that plants " + ", ".join(unmeasured) + f" was run with {label}" + (
                "; " + "; ".join(fine) if fine else "")
        previous = out.get(label)
        rank = {WOULD_BREAK: 2, NO_MEASURE: 1, UNAFFECTED: 0}
        if previous is None or rank[verdict] > rank[previous["verdict"]]:
            out[label] = {"verdict": verdict, "evidence": evidence}
    return out


def refused_shape_verdict(check: Any, message: str, data: dict[str, Any] | None = None) -> dict[str, dict[str, str]]:
    """The endpoint refused, for its own limits, the very request a real client sends (catalog.CLIENT_SHAPES):
    that client would break on this deployment, whatever the contract says."""
    from harnesscheck.conformance.catalog import CLIENT_SHAPES

    key = CLIENT_SHAPES.get(check.id)
    entry = ((load() if data is None else data).get("clients") or {}).get(key or "")
    if not entry:
        return {}
    words = message.split("): ", 1)[-1]  # the endpoint's own words, after "(HTTP 400): "
    return {label_of(entry): {"verdict": WOULD_BREAK, "evidence": f"the endpoint refused this client's own request "
                              f"shape for its limits: {words[:200]}"}}


def verdict_line(check: Any, rules: list[str], data: dict[str, Any] | None = None) -> str:
    """'Claude Code 2.1.197: would break (AN-GRAMMAR-BLOCK-UNKNOWN: measured with fault ...)'."""
    return "; ".join(f"{name}: {v['verdict']} ({v['evidence']})" for name, v in verdicts_for(check, rules, data).items())


def run_impact(out: Path, *, runs: tuple[tuple[str, str | None], ...] = DEFAULT_RUNS,
               faults: tuple[str, ...] = DEFAULT_FAULTS, model: str | None = None, timeout: float = 180.0,
               server_args: tuple[str, ...] = (), progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    from harnesscheck.conformance.clients import runner
    from harnesscheck.reference_server.launch import ServerProcess

    from harnesscheck.conformance import catalog

    model = model or "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4"
    data: dict[str, Any] = {"schema": "harnesscheck.client-impact", "version": 1,
                            "measured": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "model": model,
                            "clients": {}, "clean": {}, "faults": {}, "skipped": {}}
    prepared, data["skipped"] = prepare_clients(runs)
    for key, client, inst in prepared:
        data["clients"][key] = client_entry(client, inst)
    # A server start per fault only where some client here speaks the fault's API.
    faults = tuple(f for f in faults if any(client.api in fault_apis(f) for _, client, _ in prepared))
    for fault in (None, *faults):
        args = [*server_args, "--decode-ms", "0", "--ttft-base-ms", "0", "--prefill-us-per-token", "0"]
        if fault:
            args += ["--fault", fault]
        with ServerProcess(args) as server:
            for key, client, inst in prepared:
                if fault and client.api not in fault_apis(fault):
                    continue
                if progress:
                    progress(f"{fault or 'clean'} / {key}")
                turns = runner.run_client(client, inst, server.url, model, out / (fault or "clean"), timeout=timeout)
                cell = {"turns": {t.turn: {"ok": t.ok, "failed": [c.id + ": " + c.detail[:200] for c in t.checks
                                                                   if not c.ok],
                                           "final_text": t.final_text[:200], "error": t.error[:300],
                                           "seconds": t.seconds} for t in turns}}
                if fault is None:
                    data["clean"][key] = cell
                    continue
                clean = data["clean"].get(key, {}).get("turns", {})
                broken = [n for n, t in cell["turns"].items() if not t["ok"] and clean.get(n, {}).get("ok")]
                cell["verdict"] = BREAKS if broken else OK
                cell["broken_turns"] = broken
                data["faults"].setdefault(fault, {})[key] = cell
        if fault:
            data["faults"].setdefault(fault, {})["_checks"] = [c.id for c in catalog.checks_for_fault(fault)]
    return data


def table(data: dict[str, Any]) -> list[list[str]]:
    """Rows: fault, the rules it plants (what its verdicts speak for), then a verdict per client."""
    from harnesscheck.conformance.catalog import PLANTED

    keys = list(data.get("clients") or {})
    rows = [["fault", "planted rules", *[column_of(k, data["clients"][k]) for k in keys]]]
    for fault, cells in (data.get("faults") or {}).items():
        row = [fault, ", ".join(PLANTED.get(fault, ()))]
        for k in keys:
            c = cells.get(k)
            row.append("-" if c is None else (BREAKS + " (" + ",".join(c.get("broken_turns") or []) + ")"
                                              if c["verdict"] == BREAKS else OK))
        rows.append(row)
    return rows
