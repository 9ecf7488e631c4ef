"""Measured client verdicts for the endpoint under test, beside the ones the kit inferred.

The kit infers from the rules an endpoint fails that a client "would break" (the rule's measured
impact, ``impact.json``). ``verify_clients`` measures it instead: it runs the installed real
clients' turns of each of their real tool kinds (``kinds.VERIFY``: Claude Code's text, Bash, Read,
Edit and image-reading turns; Codex's text and shell turns and, under its gpt-5.x catalog profile
given to the endpoint's model id, its freeform apply_patch and shell turns; OpenClaw's text, exec and
apply_patch turns; through the capture proxy) against the endpoint itself, and reports each turn;
``compare_verdicts`` puts the two side by side; the per-client lines of a run,
measured beside inferred, are ``harnesscheck.reports.clients``'s.

``verify_clients(endpoint, model, api_key, apis, out, *, timeout=180.0, progress=None) -> dict``

    Runs each client whose wire API is in ``apis`` ("anthropic", "responses", "chat"): Claude
    Code over Messages, Codex over Responses, OpenClaw over Messages and, when those APIs are
    selected, over Responses and Chat. Only clients already in the cache are run (nothing is
    installed from npm here; ``python -m harnesscheck.agents.clients`` installs them): a client not
    installed, or whose binary does not start, is listed with ``skipped`` set, never an error; a turn
    the kit could not run (Codex without the catalog entry its profile names) is listed under
    ``not_run`` with why, and the client's other turns give its verdict.
    ``api_key`` None gives the clients a dummy key. Captures and the clients' output go to
    ``out/<client>[-<api>]/<turn>/`` (made absolute: a relative ``--out`` works the same). A client
    that could not be started at all is listed with ``skipped`` and ``kit_error`` set, never as a
    break. ``timeout`` limits each turn; ``progress(str)`` hears a line per client. Returns::

        {"endpoint": ..., "model": ..., "apis": [...],
         "clients": {"codex": {"label": "Codex 0.171.0", "api": "responses",
                               "turns": {"text": {"ok": True, "failed": [], "error": "", "final_text": "ok",
                                                  "seconds": 1.2, "timed_out": False, "capture": "..."},
                                         "tool": {...}, "patch": {...}, "shell": {...}},
                               "measured": "works", "skipped": ""},
                     "openclaw:chat": {...}, ...}}

    Keys are ``client_key`` ("openclaw:chat"); the label is one per client whatever its
    API, as in the kit's verdicts. ``measured`` is "breaks" when a turn failed (``failed`` lists its
    failed checks, ``"CL-FINAL-TEXT: <detail>"``; ``error`` the client's own error), "timed out"
    when a turn only ran out of time (every request it made was answered, the client had not
    finished by the deadline: slowness, not a verdict), "works" when every turn passed, "" when skipped.

``compare_verdicts(inferred: dict[str, str], measured: dict) -> list[dict]``

    ``inferred`` maps a client label ("Claude Code 2.1.197") to the kit's verdict, "would break",
    "unaffected" or "not measured" (reports.clients.inferred); ``measured`` is what ``verify_clients``
    returned. One
    row per measured label (skipped clients have none), in the order of ``measured``:
    ``{"client": label, "inferred": ..., "measured": "works"|"breaks"|"timed out", "agrees": bool|None,
    "by_api": {"anthropic": "works", "chat": "breaks"}}``. A label run over several APIs
    (OpenClaw) breaks when one of its runs breaks, else is "timed out" when one timed out; a
    "timed out" measurement confirms nothing and contradicts nothing (``agrees`` None: rerun with a
    longer ``--client-timeout``). "would break" agrees only with "breaks",
    "unaffected" only with "works", "not measured" with either; a measured label the kit
    said nothing about counts as "unaffected" (no failing rule named it), so a break the kit
    missed shows as a disagreement. Any other inferred value is a ValueError.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from harnesscheck.agents.clients import (DUMMY_KEY, LABELS, client_entry, client_key, get_client, kinds,
                                         prepare_clients, turns)
from harnesscheck.conformance.impact import NOT_MEASURED, UNAFFECTED, WOULD_BREAK, label_of

WORKS, BREAKS, TIMED_OUT = "works", "breaks", "timed out"
# (client, api) runs: Claude Code over Messages, Codex over Responses, OpenClaw over all three.
RUNS: tuple[tuple[str, str | None], ...] = (("claude-code", None), ("codex", None), ("openclaw", None),
                                            ("openclaw", "responses"), ("openclaw", "chat"))
# "no measured impact": an older document's word for "not measured"
_AGREES = {WOULD_BREAK: (BREAKS,), UNAFFECTED: (WORKS,), NOT_MEASURED: (WORKS, BREAKS),
           "no measured impact": (WORKS, BREAKS)}


def runs_for(apis: list[str]) -> list[tuple[str, str | None]]:
    """The (client, api) runs whose wire API is one of ``apis``."""
    return [(name, api) for name, api in RUNS if get_client(name, api).api in apis]


def verify_clients(endpoint: str, model: str, api_key: str | None, apis: list[str], out: Path, *,
                   timeout: float = 180.0, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run the installed clients of ``apis`` against ``endpoint`` (see the module docstring)."""
    runs = runs_for(apis)
    prepared, skipped = prepare_clients(runs, install_missing=False)
    clients: dict[str, dict[str, Any]] = {}
    for name, api in runs:  # in RUNS order, skipped ones in place
        key = client_key(name, api)
        if key in skipped:
            client = get_client(name, api)
            clients[key] = {"label": LABELS[name], "api": client.api, "turns": {}, "measured": "",
                            "skipped": skipped[key]}
            if progress:
                progress(f"{key}: skipped: {skipped[key]}")
    for key, client, inst in prepared:
        if progress:
            progress(f"{key}: running {client.label} {inst.version} over {client.api}")
        results = []
        for spec in kinds.turns_for(client):  # each of its real tool kinds (kinds.VERIFY), one turn each
            if spec.name in kinds.VERIFY[client.name]:
                runner, spec = kinds.on_endpoint(client, spec)
                results += turns.run_client(runner, inst, endpoint, model, out, api_key=api_key or DUMMY_KEY,
                                            timeout=timeout, specs=[spec])
        not_run = {r.turn: r.kit_error for r in results if r.kit_error}  # the kit could not run these turns
        results = [r for r in results if not r.kit_error]
        kit_error = next(iter(not_run.values()), "")
        if not results:  # not run: no verdict either way
            clients[key] = {"label": LABELS[client.name], "api": client.api, "turns": {}, "measured": "",
                            "skipped": kit_error, "kit_error": True}
            if progress:
                progress(f"{key}: {kit_error}")
            continue
        by_turn: dict[str, dict[str, Any]]
        by_turn = {r.turn: {"ok": r.ok, "failed": [f"{c.id}: {c.detail[:300]}" for c in r.checks if not c.ok],
                            "error": r.error[:500], "final_text": r.final_text[:200], "seconds": r.seconds,
                            "timed_out": r.timed_out, "capture": r.capture} for r in results}
        measured = _measured_of(results)
        clients[key] = {"label": label_of(client_entry(client, inst)), "api": client.api,
                        "turns": by_turn, "measured": measured, "skipped": ""}
        if not_run:  # e.g. Codex without a gpt-5.5 catalog entry: its other turns still speak
            clients[key]["not_run"] = not_run
        if progress:
            progress(f"{key}: {measured}" + "".join(f"; {n}: {t['failed'][0]}" for n, t in by_turn.items()
                                                    if t["failed"]))
    order = [client_key(n, a) for n, a in runs]
    return {"endpoint": endpoint, "model": model, "apis": list(apis),
            "clients": {k: clients[k] for k in order if k in clients}}


def _measured_of(results: list[Any]) -> str:
    """works / breaks / timed out for one client's turns (turns.TurnResult): a turn that failed
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


def after_suite(doc: dict[str, Any], suite: Any, out: Path, *, timeout: float = 180.0) -> None:
    """``check --verify-clients``: the step ``conformance.runner.run_suite`` runs after the suite (its
    ``after``, with ``timeout`` bound): the real clients against the endpoint the suite checked
    (``suite``, its SuiteOptions), captures under ``out/clients/``. It sets results.json's
    ``client_verification``: ``verify_clients``' document plus ``comparison``, the measured verdicts
    beside the ones the results infer (``compare_verdicts``). When every installed client failed to
    start (the kit's side, no verdict on the endpoint), results.json is written and a UsageError says
    so (exit 2), never a comparison of nothing."""
    from harnesscheck.conformance.options import split_apis
    from harnesscheck.conformance.runner import inferred_verdicts

    print("verifying the clients against the endpoint ...", flush=True)
    measured = verify_clients(suite.endpoint, doc["run"]["model"], suite.api_key, split_apis(suite.apis),
                              out / "clients", timeout=timeout,
                              progress=lambda line: print(f"  {line}", flush=True))
    comparison = compare_verdicts(inferred_verdicts(doc), measured)
    doc["client_verification"] = {**measured, "comparison": comparison}
    tried = [c for c in measured["clients"].values() if c.get("kit_error") or c.get("measured")]
    if tried and all(c.get("kit_error") for c in tried):  # every client failed on the kit's side: say so
        import json

        from harnesscheck.errors import UsageError

        (out / "results.json").write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
        raise UsageError(f"client verification: no installed client could be run ({tried[0]['skipped']}); "
                         f"the suite's results are in {out / 'results.json'}")
