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

from harnesscheck.agents.clients import client_entry, client_key, prepare_clients, turns
from harnesscheck.conformance.impact import BREAKS, IMPACT_PATH, OK, label_of

# API_FACTS.md, "What breaks real clients": faults that break a client, and a few that do not.
FAULTS_BREAKING = ("an-missing-block-stop", "an-delta-unstarted-block", "an-delta-type-mismatch",
                   "reject-cache-control", "reject-system-role", "rs-missing-completed", "rs-missing-call-id",
                   "invalid-tool-json", "an-end-turn-after-tool-use", "chat-finish-stop-after-tool-calls",
                   "reject-unknown-fields", "reject-compressed-body")
FAULTS_TOLERATED = ("an-block-index-skip", "an-event-name-mismatch", "an-missing-message-stop",
                    "message-start-zero-input-tokens", "rs-sequence-gap", "rs-arguments-done-mismatch")
DEFAULT_FAULTS = FAULTS_BREAKING + FAULTS_TOLERATED
# (client, api) pairs a fault matrix runs; OpenClaw over Chat Completions and Responses meets the faults of
# those APIs (runs_for_fault).
DEFAULT_RUNS = (("claude-code", None), ("codex", None), ("openclaw", None), ("openclaw", "chat"),
                ("openclaw", "responses"))


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


def runs_for_fault(fault: str, runs: tuple[tuple[str, str | None], ...]) -> list[tuple[str, str | None]]:
    """The (client, api) runs that meet ``fault``: a client over its default API meets every fault that
    bends that API; over another API (OpenClaw over Chat or Responses) only the faults that name that API
    (a fault of no API was measured over the client's default one)."""
    from harnesscheck.agents.clients import get_client
    from harnesscheck.reference_server.faults import FAULTS

    out = []
    for name, api in runs:
        client = get_client(name, api)
        if client.api not in fault_apis(fault):
            continue
        if client.api != client.apis[0] and client.api not in FAULTS[fault].apis:
            continue
        out.append((name, api))
    return out


def cell_of(results: list[Any]) -> dict[str, Any]:
    """A (fault, client) cell's turns from ``turns.TurnResult``s: per turn ok, the failed checks, the
    final text, the client's own error and the seconds (the schema conformance.impact reads), and what
    the turn was (model, tool)."""
    return {"turns": {t.turn: {"ok": t.ok, "failed": [c.id + ": " + c.detail[:200] for c in t.checks if not c.ok],
                               "final_text": t.final_text[:200], "error": t.error[:300], "seconds": t.seconds,
                               "model": t.model, "tool": t.tool, "timed_out": t.timed_out}
                      for t in results}}


def judge(cell: dict[str, Any], clean: dict[str, Any]) -> dict[str, Any]:
    """Set a fault cell's verdict from its turns against the clean run's: ``breaks`` when a turn that
    passed clean failed under the fault (``broken_turns``), else ``unaffected``; a turn that failed
    clean too says nothing (``unjudged_turns``)."""
    clean_turns = (clean or {}).get("turns", {})
    broken = [n for n, t in cell["turns"].items() if not t["ok"] and clean_turns.get(n, {}).get("ok")]
    cell["verdict"] = BREAKS if broken else OK
    cell["broken_turns"] = broken
    unjudged = [n for n in cell["turns"] if not clean_turns.get(n, {}).get("ok")]
    if unjudged:
        cell["unjudged_turns"] = unjudged
    else:
        cell.pop("unjudged_turns", None)
    return cell


def merge(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """``new`` (a run of some faults, clients or turns) laid over ``old``: clients, clean runs and fault
    cells are updated turn by turn (a turn not run again keeps its old measurement) and every cell is
    judged again against the clean run."""
    out = json.loads(json.dumps(old)) if old else {}
    for k in ("schema", "version", "model"):
        out[k] = new.get(k, out.get(k))
    out["measured"] = new.get("measured", out.get("measured"))
    for k in ("clients", "skipped", "turn_kinds"):
        out.setdefault(k, {}).update(new.get(k) or {})
    for key, cell in (new.get("clean") or {}).items():
        out.setdefault("clean", {}).setdefault(key, {"turns": {}})["turns"].update(cell["turns"])
    for fault, cells in (new.get("faults") or {}).items():
        target = out.setdefault("faults", {}).setdefault(fault, {})
        for key, cell in cells.items():
            if key.startswith("_") or not isinstance(cell, dict) or "turns" not in cell:
                target[key] = cell
                continue
            target.setdefault(key, {"turns": {}})["turns"].update(cell["turns"])
    for fault, cells in (out.get("faults") or {}).items():
        for key, cell in cells.items():
            if not key.startswith("_") and isinstance(cell, dict) and "turns" in cell:
                judge(cell, (out.get("clean") or {}).get(key, {}))
    return out


def run_impact(out: Path, *, runs: tuple[tuple[str, str | None], ...] = DEFAULT_RUNS,
               faults: tuple[str, ...] = DEFAULT_FAULTS, model: str | None = None, timeout: float = 180.0,
               server_args: tuple[str, ...] = (), turn_names: tuple[str, ...] = (),
               progress: Callable[[str], None] | None = None,
               on_fault: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """The clients of ``runs`` against the reference server, clean and under each of ``faults`` that bends
    their API (a server started per fault); captures under ``out/<fault>/``. ``turn_names``: only these
    turns (``kinds.turns_for``; default all of each client's). ``on_fault(document)`` hears the document
    after each fault (a caller saves it: a stopped run keeps what it measured). See the module docstring."""
    from harnesscheck.agents.clients import kinds
    from harnesscheck.conformance import catalog
    from harnesscheck.reference_server.launch import ServerProcess

    model = model or kinds.DEFAULT_MODEL
    data: dict[str, Any] = {"schema": "harnesscheck.client-impact", "version": 1,
                            "measured": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "model": model,
                            "clients": {}, "clean": {}, "faults": {}, "skipped": {}, "turn_kinds": {}}
    prepared, data["skipped"] = prepare_clients(runs)
    specs = {}
    for key, client, inst in prepared:
        data["clients"][key] = client_entry(client, inst)
        specs[key] = [t for t in kinds.turns_for(client) if not turn_names or t.name in turn_names]
        for t in specs[key]:
            data["turn_kinds"][t.name] = t.description
    models = sorted({model, *(t.model for ts in specs.values() for t in ts if t.model)})
    model_args = [a for m in models for a in ("--model-id", m)]
    # A server start per fault only where some client here meets the fault.
    wanted = tuple((name, api) for name, api in runs if client_key(name, api) in data["clients"])
    faults = tuple(f for f in faults if runs_for_fault(f, wanted))
    for fault in (None, *faults):
        args = [*server_args, *model_args, "--decode-ms", "0", "--ttft-base-ms", "0", "--prefill-us-per-token", "0"]
        meets = {client_key(n, a) for n, a in (runs_for_fault(fault, wanted) if fault else wanted)}
        if fault:
            args += ["--fault", fault]
        with ServerProcess(args) as server:
            for key, client, inst in prepared:
                if key not in meets:
                    continue
                if progress:
                    progress(f"{fault or 'clean'} / {key}")
                results = turns.run_client(client, inst, server.url, model, out / (fault or "clean"),
                                           timeout=timeout, specs=specs[key])
                cell = cell_of(results)
                if fault is None:
                    data["clean"][key] = cell
                    continue
                data["faults"].setdefault(fault, {})[key] = judge(cell, data["clean"].get(key, {}))
        if fault:
            data["faults"].setdefault(fault, {})["_checks"] = [c.id for c in catalog.checks_for_fault(fault)]
            data["faults"][fault]["_measured"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            if on_fault:
                on_fault(data)
    return data


# overflow.CASES -> the impact turn it measures; the clean case each is judged against
OVERFLOW_TURNS = {"correct": "overflow", "detail": "overflow", "500": "overflow", "bare-400": "overflow",
                  "stream-error": "overflow", "usage-correct": "overflow-usage", "zero-input-tokens": "overflow-usage",
                  "current-turn-only": "overflow-usage", "compact-detail": "overflow-compact",
                  "compact-500": "overflow-compact", "compact-bare-400": "overflow-compact",
                  "compact-stream-error": "overflow-compact"}
OVERFLOW_CLEAN = {"overflow": "correct", "overflow-usage": "usage-correct", "overflow-compact": "usage-correct"}


# faults whose violation shows only when a session reaches the context window: the short turns cannot
# exercise them, the overflow session (clients --overflow) does
OVERFLOW_ONLY = ("overflow-detail-shape", "overflow-500", "overflow-bare-400", "overflow-stream-error",
                 "usage-current-turn-only")


def prune(data: dict[str, Any]) -> None:
    """Drop the short turns of the OVERFLOW_ONLY faults' cells (they never reached the window: no
    measurement of the fault), and the cells left with no turn."""
    for fault in OVERFLOW_ONLY:
        cells = (data.get("faults") or {}).get(fault) or {}
        for key in list(client_cells(data, fault)):
            cells[key]["turns"] = {n: t for n, t in cells[key]["turns"].items() if n.startswith("overflow")}
            if not cells[key]["turns"]:
                del cells[key]
            else:
                judge(cells[key], (data.get("clean") or {}).get(key, {}))


def overflow_cases(faults: tuple[str, ...]) -> tuple[str, ...]:
    """The ``clients --overflow`` cases that measure ``faults`` (the session long enough to reach the
    window), with the clean cases they are judged against."""
    from harnesscheck.agents.clients import overflow

    cases = [c for c, (fs, _) in overflow.CASES.items() if set(fs) & set(faults) and c in OVERFLOW_TURNS]
    cleans = [OVERFLOW_CLEAN[OVERFLOW_TURNS[c]] for c in cases]
    return tuple(dict.fromkeys([*cleans, *cases]))


def from_overflow(doc: dict[str, Any]) -> dict[str, Any]:
    """An ``overflow.run_overflow`` document as impact turns (to ``merge``): each case of a client's first
    model id (Codex: its gpt-5.5 catalog profile) is a turn ``overflow`` (the refusal's form),
    ``overflow-usage`` (the usage the client compacts on) or ``overflow-compact`` (the client's own
    compaction request refused) of its fault, the clean ones (``correct``, ``usage-correct``) of the
    clean run; ok when the client finished (exit 0)."""
    from harnesscheck.agents.clients import LABELS, get_client, overflow
    from harnesscheck.conformance import catalog

    clients = {}
    for key, version in (doc.get("clients") or {}).items():
        name, _, api = key.partition(":")
        clients[key] = {"label": LABELS[name], "version": version, "api": get_client(name, api or None).api}
    out: dict[str, Any] = {"clients": clients, "clean": {}, "faults": {},
                           "turn_kinds": {"overflow": "a session that grows past the window (clients --overflow): "
                                                      "the refusal's form",
                                          "overflow-usage": "the same session: the usage the client compacts on",
                                          "overflow-compact": "the same session: the client's own compaction "
                                                              "request over the window"}}
    for run, cases in (doc.get("cases") or {}).items():
        key, _, model = run.partition(" ")
        first = overflow.MODELS.get(key.split(":")[0], (model,))[0]
        if model != first:
            continue
        for case, obs in cases.items():
            turn = OVERFLOW_TURNS.get(case)
            if turn is None:
                continue
            ok = obs.get("rc") == 0 and not obs.get("client_error") and not obs.get("timed_out")
            entry = {"ok": ok, "failed": [] if ok else [f"CL-OVERFLOW: {obs.get('outcome', '')[:200]}"],
                     "final_text": (obs.get("final_text") or "")[:200], "error": (obs.get("client_error") or "")[:300],
                     "seconds": obs.get("seconds"), "model": model, "tool": "", "timed_out": obs.get("timed_out"),
                     "outcome": obs.get("outcome", "")}
            faults = overflow.CASES[case][0]
            if not faults:  # a clean case: the clean run of every turn judged against it
                for judged, clean_case in OVERFLOW_CLEAN.items():
                    if clean_case == case:
                        out["clean"].setdefault(key, {"turns": {}})["turns"][judged] = entry
            for fault in faults:
                out["faults"].setdefault(fault, {}).setdefault(key, {"turns": {}})["turns"][turn] = entry
    for fault, cells in out["faults"].items():
        cells["_checks"] = [c.id for c in catalog.checks_for_fault(fault)]
        cells["_measured"] = doc.get("measured") or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return out


# faults no client turn can exercise, and why (impact.json marks them "_not_measurable")
NOT_MEASURABLE = {
    "stall-stream": "a transport fault: the stream stops with the connection left open, and each client waits out "
                    "its own request timeout (minutes) before it says anything; no turn ends within a measured "
                    "turn's limit with a client's own error to record. The stall checks measure the endpoint side.",
}


# faults added since the last measurement, and why they wait (the clients and a real model were not at hand):
# impact.json holds no cell for them yet, so a failure on their rules says "not measured" for every client;
# they stay `missing`, so that `harnesscheck clients --faults` measures them next. A test keeps this list
# to faults that are indeed unmeasured (a measured one leaves it).
PENDING: dict[str, str] = {}


def client_cells(data: dict[str, Any], fault: str) -> dict[str, Any]:
    """A fault's measured client cells ({key: cell}), without its ``_`` notes."""
    return {k: v for k, v in ((data.get("faults") or {}).get(fault) or {}).items()
            if not k.startswith("_") and isinstance(v, dict)}


def missing(data: dict[str, Any]) -> list[str]:
    """The reference server's faults that ``data`` holds no client measurement of (nor a reason why not)."""
    from harnesscheck.reference_server.faults import FAULTS

    return [f for f in FAULTS if not client_cells(data, f) and f not in NOT_MEASURABLE]


def mark_unmeasurable(data: dict[str, Any]) -> None:
    """Mark each fault of NOT_MEASURABLE that no client measured ``_not_measurable`` (the reason)."""
    for fault, why in NOT_MEASURABLE.items():
        if not client_cells(data, fault):
            data.setdefault("faults", {}).setdefault(fault, {})["_not_measurable"] = why


def coverage(data: dict[str, Any]) -> str:
    """'73 of 75 faults measured, 1 not measurable, 1 missing'."""
    from harnesscheck.reference_server.faults import FAULTS

    measured = sum(1 for f in FAULTS if client_cells(data, f))
    marked = sum(1 for f in FAULTS if not client_cells(data, f) and
                 ((data.get("faults") or {}).get(f) or {}).get("_not_measurable"))
    left = len(FAULTS) - measured - marked
    return (f"{measured} of {len(FAULTS)} faults measured" + (f", {marked} not measurable" if marked else "")
            + (f", {left} missing" if left else ""))


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


def cell_text(cell: dict[str, Any] | None) -> str:
    """A (fault, client) cell in words: "breaks (patch: CL-EFFECT; tool: CL-ANSWERED)", "unaffected (5 turns)",
    "-" for none."""
    if cell is None:
        return "-"
    turns_ = cell.get("turns") or {}
    if cell.get("verdict") == BREAKS:
        return "**breaks** (" + "; ".join(f"{n}: {(turns_[n].get('failed') or ['?'])[0].split(':')[0]}"
                                          for n in cell.get("broken_turns") or []) + ")"
    judged = [n for n in turns_ if n not in (cell.get("unjudged_turns") or [])]
    return f"unaffected ({', '.join(judged)})" if judged else "not judged (every turn failed clean too)"


def markdown(data: dict[str, Any]) -> str:
    """impact.json as the table docs/API_FACTS.md and docs/clients.md hold: a row per fault (every
    reference-server fault, the ones marked not measurable with why), a column per client run."""
    from harnesscheck.reference_server.faults import FAULTS

    keys = list(data.get("clients") or {})
    head = ["fault", *[column_of(k, data["clients"][k]) for k in keys]]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for fault in FAULTS:
        cells = (data.get("faults") or {}).get(fault) or {}
        if not client_cells(data, fault):
            why = ("not measurable: " + cells["_not_measurable"]) if cells.get("_not_measurable") else "not measured"
            rows.append(f"| `{fault}` | {why} |" + " |" * (len(keys) - 1))
            continue
        rows.append(f"| `{fault}` | " + " | ".join(cell_text(cells.get(k)) for k in keys) + " |")
    return "\n".join(rows)
