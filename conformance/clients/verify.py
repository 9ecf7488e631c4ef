"""Measured client verdicts for the endpoint under test, beside the ones the kit inferred.

The kit infers from the rules an endpoint fails that a client "would break" (the rule's measured
impact, ``impact.json``). ``verify_clients`` measures it instead: it runs the installed real
clients' text and tool turns (``runner.run_client``, through the capture proxy) against the
endpoint itself; ``compare_verdicts`` puts the two side by side.

``verify_clients(endpoint, model, api_key, apis, out, *, timeout=180.0, progress=None) -> dict``

    Runs each client whose wire API is in ``apis`` ("anthropic", "responses", "chat"): Claude
    Code over Messages, Codex over Responses, OpenClaw over Messages and, when those APIs are
    selected, over Responses and Chat. Only clients already in the cache are run (nothing is
    installed from npm here; ``python -m harnesscheck.conformance.clients`` installs them): a client not
    installed, or whose binary does not start, is listed with ``skipped`` set, never an error.
    ``api_key`` None gives the clients a dummy key. Captures and the clients' output go to
    ``out/<client>[-<api>]/<turn>/``. ``timeout`` limits each turn; ``progress(str)`` hears a line
    per client. Returns::

        {"endpoint": ..., "model": ..., "apis": [...],
         "clients": {"codex": {"label": "Codex 0.171.0", "api": "responses",
                               "turns": {"text": {"ok": True, "failed": [], "error": "", "final_text": "ok",
                                                  "seconds": 1.2, "timed_out": False, "capture": "..."},
                                         "tool": {...}},
                               "measured": "works", "skipped": ""},
                     "openclaw:chat": {...}, ...}}

    Keys are ``impact.client_key`` ("openclaw:chat"); the label is one per client whatever its
    API, as in the kit's verdicts. ``measured`` is "breaks" when a turn failed (``failed`` lists its
    failed checks, ``"CL-FINAL-TEXT: <detail>"``; ``error`` the client's own error), "timed out"
    when a turn only ran out of time (every request it made was answered, the client had not
    finished by the deadline: slowness, not a verdict), "works" when both passed, "" when skipped.

``compare_verdicts(inferred: dict[str, str], measured: dict) -> list[dict]``

    ``inferred`` maps a client label ("Claude Code 2.1.197") to the kit's verdict, "would break",
    "unaffected" or "no measured impact"; ``measured`` is what ``verify_clients`` returned. One
    row per measured label (skipped clients have none), in the order of ``measured``:
    ``{"client": label, "inferred": ..., "measured": "works"|"breaks"|"timed out", "agrees": bool|None,
    "by_api": {"anthropic": "works", "chat": "breaks"}}``. A label run over several APIs
    (OpenClaw) breaks when one of its runs breaks, else is "timed out" when one timed out; a
    "timed out" measurement confirms nothing and contradicts nothing (``agrees`` None: rerun with a
    longer ``--client-timeout``). "would break" agrees only with "breaks",
    "unaffected" only with "works", "no measured impact" with either; a measured label the kit
    said nothing about counts as "unaffected" (no failing rule named it), so a break the kit
    missed shows as a disagreement. Any other inferred value is a ValueError.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from harnesscheck.conformance.clients import DUMMY_KEY, LABELS, get_client, impact, runner

WORKS, BREAKS, TIMED_OUT = "works", "breaks", "timed out"
from harnesscheck.conformance.clients.impact import NO_MEASURE as NO_MEASURED, UNAFFECTED, WOULD_BREAK  # noqa: E402
# (client, api) runs: Claude Code over Messages, Codex over Responses, OpenClaw over all three.
RUNS: tuple[tuple[str, str | None], ...] = (("claude-code", None), ("codex", None), ("openclaw", None),
                                            ("openclaw", "responses"), ("openclaw", "chat"))
_AGREES = {WOULD_BREAK: (BREAKS,), UNAFFECTED: (WORKS,), NO_MEASURED: (WORKS, BREAKS)}


def runs_for(apis: list[str]) -> list[tuple[str, str | None]]:
    """The (client, api) runs whose wire API is one of ``apis``."""
    return [(name, api) for name, api in RUNS if get_client(name, api).api in apis]


def verify_clients(endpoint: str, model: str, api_key: str | None, apis: list[str], out: Path, *,
                   timeout: float = 180.0, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run the installed clients of ``apis`` against ``endpoint`` (see the module docstring)."""
    runs = runs_for(apis)
    prepared, skipped = impact.prepare_clients(runs, install_missing=False)
    clients: dict[str, dict[str, Any]] = {}
    for name, api in runs:  # in RUNS order, skipped ones in place
        key = impact.client_key(name, api)
        if key in skipped:
            client = get_client(name, api)
            clients[key] = {"label": LABELS[name], "api": client.api, "turns": {}, "measured": "",
                            "skipped": skipped[key]}
            if progress:
                progress(f"{key}: skipped: {skipped[key]}")
    for key, client, inst in prepared:
        if progress:
            progress(f"{key}: running {client.label} {inst.version} over {client.api}")
        results = runner.run_client(client, inst, endpoint, model, out, api_key=api_key or DUMMY_KEY,
                                    timeout=timeout)
        turns = {r.turn: {"ok": r.ok, "failed": [f"{c.id}: {c.detail[:300]}" for c in r.checks if not c.ok],
                          "error": r.error[:500], "final_text": r.final_text[:200], "seconds": r.seconds,
                          "timed_out": r.timed_out, "capture": r.capture} for r in results}
        measured = _measured_of(results)
        clients[key] = {"label": impact.label_of(impact.client_entry(client, inst)), "api": client.api,
                        "turns": turns, "measured": measured, "skipped": ""}
        if progress:
            progress(f"{key}: {measured}" + "".join(f"; {n}: {t['failed'][0]}" for n, t in turns.items()
                                                    if t["failed"]))
    order = [impact.client_key(n, a) for n, a in runs]
    return {"endpoint": endpoint, "model": model, "apis": list(apis),
            "clients": {k: clients[k] for k in order if k in clients}}


def _measured_of(results: list[Any]) -> str:
    """works / breaks / timed out for one client's turns (runner.ClientResult): a turn that failed
    only by running out of time, with every request it made answered, is slowness, not a break."""
    def state(r: Any) -> str:
        if r.ok:
            return WORKS
        answered = all(c.ok for c in r.checks if c.id == "CL-ANSWERED")
        return TIMED_OUT if r.timed_out and answered else BREAKS

    states = {state(r) for r in results}
    return BREAKS if BREAKS in states else TIMED_OUT if TIMED_OUT in states else WORKS


def compare_verdicts(inferred: dict[str, str], measured: dict[str, Any]) -> list[dict[str, Any]]:
    """Inferred against measured verdicts, a row per measured client label (see the module docstring)."""
    by_label: dict[str, dict[str, str]] = {}
    for entry in (measured.get("clients") or {}).values():
        if entry.get("skipped") or entry.get("measured") not in (WORKS, BREAKS, TIMED_OUT):
            continue
        by_label.setdefault(entry["label"], {})[entry["api"]] = entry["measured"]
    rows = []
    for label, by_api in by_label.items():
        got = next((v for v in (BREAKS, TIMED_OUT) if v in by_api.values()), WORKS)
        said = inferred.get(label, UNAFFECTED)
        if said not in _AGREES:
            raise ValueError(f"inferred verdict {said!r} for {label}: expected one of {', '.join(_AGREES)}")
        agrees = None if got == TIMED_OUT else got in _AGREES[said]
        rows.append({"client": label, "inferred": said, "measured": got, "agrees": agrees, "by_api": by_api})
    return rows
