"""Measure client impact: run the real clients under each reference-server fault and record which
faults break which client, for ``conformance/impact.json`` (read by ``harnesscheck.conformance.impact``).

``run_impact(out, runs=..., faults=...)`` runs each client's text and tool turns
(``turns.run_client``) against the reference server once clean and once per fault of the client's
own API, and returns the document: per (fault, client) ``breaks`` when a turn that passes clean
fails under the fault, else ``unaffected``, with the client versions and, per fault, the checks it
is meant to fail. ``save`` writes it; ``table`` renders it (``harnesscheck clients --faults``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harnesscheck.agents.clients import client_entry, prepare_clients, turns
from harnesscheck.conformance.impact import BREAKS, IMPACT_PATH, OK, label_of

# API_FACTS.md, "What breaks real clients": faults that break a client, and a few that do not.
FAULTS_BREAKING = ("an-missing-block-stop", "an-delta-unstarted-block", "an-delta-type-mismatch",
                   "reject-cache-control", "reject-system-role", "rs-missing-completed", "rs-missing-call-id",
                   "invalid-tool-json", "an-end-turn-after-tool-use", "chat-finish-stop-after-tool-calls",
                   "reject-unknown-fields", "reject-compressed-body")
FAULTS_TOLERATED = ("an-block-index-skip", "an-event-name-mismatch", "an-missing-message-stop",
                    "message-start-zero-input-tokens", "rs-sequence-gap", "rs-arguments-done-mismatch")
DEFAULT_FAULTS = FAULTS_BREAKING + FAULTS_TOLERATED
# (client, api) pairs a fault matrix runs; OpenClaw over Chat Completions shows the finish_reason bug.
DEFAULT_RUNS = (("claude-code", None), ("codex", None), ("openclaw", None), ("openclaw", "chat"))


def fault_apis(fault: str) -> tuple[str, ...]:
    """The wire APIs whose traffic a fault bends (a fault naming none bends every registered API's); a
    client runs only against its own API's faults."""
    from harnesscheck.protocol import apis
    from harnesscheck.reference_server.faults import FAULTS

    return FAULTS[fault].apis or apis.NAMES


def faults_for(api: str) -> tuple[str, ...]:
    """Every reference-server fault a client speaking ``api`` can meet (its API's and the neutral ones)."""
    from harnesscheck.reference_server.faults import FAULTS

    return tuple(f for f, fault in FAULTS.items() if fault.bends(api) and not fault.transport)


def save(data: dict[str, Any], path: Path = IMPACT_PATH) -> Path:
    """Write a measurement (``run_impact``'s document) to ``path`` (default: conformance/impact.json)."""
    path.write_text(json.dumps(data, indent=1, sort_keys=False) + "\n")
    return path


def column_of(key: str, entry: dict[str, Any]) -> str:
    """A table column's heading: the client's label, and the API when the run chose one
    ("OpenClaw 1.2 (chat)")."""
    api = key.partition(":")[2]
    return label_of(entry) + (f" ({api})" if api else "")


def run_impact(out: Path, *, runs: tuple[tuple[str, str | None], ...] = DEFAULT_RUNS,
               faults: tuple[str, ...] = DEFAULT_FAULTS, model: str | None = None, timeout: float = 180.0,
               server_args: tuple[str, ...] = (),
               progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """The clients of ``runs`` against the reference server, clean and under each of ``faults`` that bends
    their API (a server started per fault); captures under ``out/<fault>/``. See the module docstring."""
    from harnesscheck.conformance import catalog
    from harnesscheck.reference_server.launch import ServerProcess

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
                results = turns.run_client(client, inst, server.url, model, out / (fault or "clean"),
                                           timeout=timeout)
                cell: dict[str, Any]
                cell = {"turns": {t.turn: {"ok": t.ok, "failed": [c.id + ": " + c.detail[:200] for c in t.checks
                                                                   if not c.ok],
                                           "final_text": t.final_text[:200], "error": t.error[:300],
                                           "seconds": t.seconds} for t in results}}
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
