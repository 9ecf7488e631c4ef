"""Collects check outcomes during a run and writes results JSON (schema: reports/results.schema.json)
plus every check's transcript, within a size budget, and their index.json (docs/results-schema.md).
Under xdist each worker collects its own and the controller merges them (write_results)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harnesscheck.conformance.catalog import Check
from harnesscheck.conformance.grammar.findings import Finding
from harnesscheck.conformance.outcome import Level, Outcome
from harnesscheck.protocol.wire.redact import redact_data, redact_text
from harnesscheck.protocol.wire.transcript import Transcript
from harnesscheck.reports.schema import new_run_id, now_iso, results_document, run_header


@dataclass(slots=True)
class CheckResult:
    check: Check
    outcome: Outcome
    message: str
    duration_s: float
    finding: Finding | None = None
    transcript: Transcript | None = None
    excerpt: str | None = None
    rules: list[str] = field(default_factory=list)  # the rules a failure broke, the leading one first
    level: Level | None = None  # what this result weighs: a failure, its failing rule's level
    cause: str = ""  # an inconclusive result's cause (verdict.CAUSES)
    notes: list[str] = field(default_factory=list)  # informational findings (allowed, shown, never failed)
    started: float | None = None  # wall clock (time.time()) when the check began
    exercised: dict[str, list[str]] = field(default_factory=dict)  # per path-dependent rule: paths seen ([]: none)
    paths_seen: list[str] = field(default_factory=list)  # every path (catalog.PATHS) the check's answers took
    levers: dict[str, Any] = field(default_factory=dict)  # conformance/levers.py: tried, and behind each judged answer
    findings: list[Finding] = field(default_factory=list)  # every finding of a failure (the form of each rule)

    @property
    def weight(self) -> Level:
        return self.level or self.check.level


@dataclass(slots=True)
class Collector:
    run: dict[str, Any]
    secrets: list[str] = field(default_factory=list)
    results: list[CheckResult] = field(default_factory=list)

    @classmethod
    def start(cls, *, endpoint: str, model: str, apis: list[str], server: dict[str, Any], settings: dict[str, Any],
              secrets: list[str]) -> Collector:
        run = run_header(endpoint=endpoint, model=model, apis=apis, server=server, settings=settings)
        return cls(run=run, secrets=[s for s in secrets if s])

    def add(self, result: CheckResult) -> None:
        self.results.append(result)

    def payload(self) -> dict[str, Any]:
        """What this process measured, as plain JSON data (an xdist worker sends it to the controller
        in `workeroutput`): the run and, per result, its results.json entry and its transcript."""
        starts = [r.started for r in self.results if r.started is not None]
        ends = [r.started + r.duration_s for r in self.results if r.started is not None]
        impact = _Impact()
        return {"run": redact_data(dict(self.run), self.secrets),
                "checks": [self._entry(r, impact) for r in self.results],
                "span": [min(starts), max(ends)] if starts else None}

    def _entry(self, r: CheckResult, impact: _Impact) -> dict[str, Any]:
        finding = None
        if r.finding is not None or r.excerpt:
            f = r.finding
            finding = {"rule": f.rule if f else "", "frame_index": f.frame_index if f else None,
                       "observed": f.observed if f else None, "expected": f.expected if f else None,
                       "excerpt": redact_text(r.excerpt or "", self.secrets) or None}
        verdicts = impact.verdicts(r)
        session = impact.session(r)
        entry = {
            "id": r.check.id, "api": r.check.api, "title": r.check.title, "level": str(r.weight),
            "check_level": str(r.check.level), "outcome": str(r.outcome),
            "message": redact_text(r.message, self.secrets),
            "source": r.check.source, "remedy": r.check.remedy, "duration_s": round(r.duration_s, 4),
            "transcript": None, "finding": finding, "rules_failed": list(r.rules),
            "clients": {name: v["verdict"] for name, v in verdicts.items()},
            "client_evidence": {name: redact_text(v["evidence"], self.secrets) for name, v in verdicts.items()},
            "faults": list(r.check.faults),
        }
        if session:
            entry["client_session"] = session
        if r.outcome is Outcome.FAIL:  # the form of each failing rule's violation (conformance/forms.py)
            entry["violations"] = {rule: form for rule, (form, _) in failure_forms(r).items()}
        if r.cause:
            entry["cause"] = r.cause
        if r.notes:
            entry["notes"] = [redact_text(n, self.secrets) for n in r.notes]
        if r.exercised:
            entry["exercised"] = r.exercised
        if r.paths_seen:
            entry["paths_seen"] = r.paths_seen
        if r.levers:  # what came back of a bent request quotes the endpoint's answer
            entry["levers"] = redact_data(r.levers, self.secrets)
        transcript = None
        if r.transcript is not None:
            transcript = {"text": redact_text(r.transcript.to_json(indent=1), self.secrets),
                          "frames": len(r.transcript.frames)}
        return {"entry": entry, "transcript": transcript}


@dataclass(frozen=True, slots=True)
class TranscriptBudget:
    """How much transcript a run keeps: every check's transcript, each at most `per_file` bytes and
    all together at most `total` bytes; beyond that the failing checks' (fail, error, inconclusive)
    are kept first, then skipped, then passing ones, and what was left out is said in the results."""

    per_file: int = 4 * 1024 * 1024
    total: int = 64 * 1024 * 1024


_KEEP_FIRST = {"fail": 0, "error": 0, "inconclusive": 0, "skip": 1, "pass": 2}


def write_results(payloads: list[dict[str, Any]], results_path: Path | None, transcripts_dir: Path | None, *,
                  budget: TranscriptBudget | None = None, settings: dict[str, Any] | None = None) -> dict[str, Any]:
    """Merge what one or more processes measured (Collector.payload: one per xdist worker) into one
    results document, in catalog order; write it to `results_path` and the transcripts, within the
    budget, with their index.json, to `transcripts_dir` (either may be None). `settings` are added to
    the run's settings (e.g. the number of workers)."""
    from harnesscheck.conformance.catalog import CHECKS

    order = {c.id: n for n, c in enumerate(CHECKS)}
    runs = sorted((p["run"] for p in payloads), key=lambda r: r["started_at"])
    run = {**runs[0], "finished_at": now_iso()}
    stalls = [r["stall"] for r in runs if r.get("stall")]  # xdist: the worker that met the stall
    if stalls:
        run["stall"] = stalls[0]
    if len(runs) > 1:
        run["id"] = new_run_id()
    run["settings"] = {**run.get("settings", {}), **(settings or {})}
    spans = [p["span"] for p in payloads if p.get("span")]
    if spans:  # from the first check's start to the last one's end, over every process
        run["checks_wall_s"] = round(max(s[1] for s in spans) - min(s[0] for s in spans), 3)
    pairs = sorted((c for p in payloads for c in p["checks"]), key=lambda c: order.get(c["entry"]["id"], len(order)))
    if transcripts_dir is not None:
        run["transcripts"] = _write_transcripts(pairs, transcripts_dir, results_path, budget or TranscriptBudget())
    checks = [c["entry"] for c in pairs]
    doc = results_document(run, checks, benchmarks=[], comparisons=[], fault_matrix=None)
    from harnesscheck.reports.clients import reconcile, summary

    doc["clients"] = summary(reconcile(doc))  # per real client, the run's one statement (reports.clients)
    if results_path is not None:
        results_path.parent.mkdir(parents=True, exist_ok=True)
        results_path.write_text(json.dumps(doc, indent=1, ensure_ascii=False), encoding="utf-8")
    return doc


def write_run(payloads: list[dict[str, Any]], *, results: str | None, transcripts: str | None, interrupted: bool,
              merged: bool) -> dict[str, Any] | None:
    """A session's end: its results (`payloads`: this process's, or the xdist controller's merge of its
    workers', `merged`) to the --hc-results file and the transcripts folder (--hc-transcripts, else beside
    the results); marked `run.interrupted` when Ctrl-C or SIGTERM stopped the session. The document, or
    None when nothing was measured or nothing is to be written."""
    if not payloads:
        return None
    if interrupted:
        for payload in payloads:
            payload["run"]["interrupted"] = True
    results_path = Path(results) if results else None
    transcripts_dir = Path(transcripts) if transcripts else (results_path.parent / "transcripts" if results_path
                                                              else None)
    if results_path is None and transcripts_dir is None:
        return None
    workers = {"workers": len({p.get("worker") for p in payloads})} if merged else {}
    return write_results(payloads, results_path, transcripts_dir, settings=workers)


def _write_transcripts(pairs: list[dict[str, Any]], folder: Path, results_path: Path | None,
                       budget: TranscriptBudget) -> dict[str, Any]:
    """Write `folder/ID.json` per check (Transcript.to_json) and `folder/index.json`; set each entry's
    `transcript` (the path relative to the results file) or `transcript_left_out` (why not). Returns
    the run's `transcripts` summary."""
    folder.mkdir(parents=True, exist_ok=True)
    base = results_path.parent if results_path else folder.parent
    index: dict[str, dict[str, Any]] = {}
    used, left_out = 0, []
    ranked = sorted((c for c in pairs if c["transcript"] is not None),
                    key=lambda c: _KEEP_FIRST.get(c["entry"]["outcome"], 0))  # stable: catalog order within
    for c in ranked:
        entry, text = c["entry"], c["transcript"]["text"]
        size = len(text.encode("utf-8"))
        row: dict[str, Any] = {"file": None, "outcome": entry["outcome"], "frames": c["transcript"]["frames"],
                               "bytes": size}
        if size > budget.per_file:
            row["left_out"] = f"{size} bytes, over the per-file cap of {budget.per_file}"
        elif used + size > budget.total:
            row["left_out"] = f"{size} bytes, over what is left of the total cap of {budget.total} ({budget.total - used})"
        else:
            path = folder / f"{entry['id']}.json"
            path.write_text(text, encoding="utf-8")
            used += size
            row["file"] = path.name
            entry["transcript"] = os.path.relpath(path, base)
        if "left_out" in row:
            entry["transcript_left_out"] = row["left_out"]
            left_out.append(entry["id"])
        index[entry["id"]] = row
    index = {cid: index[cid] for cid in (c["entry"]["id"] for c in pairs) if cid in index}
    (folder / "index.json").write_text(json.dumps({"schema": "harnesscheck.transcripts", "schema_version": "1.0",
                                                   "checks": index}, indent=1), encoding="utf-8")
    return {"folder": os.path.relpath(folder, base), "written": len(index) - len(left_out), "bytes": used,
            "per_file_cap": budget.per_file, "total_cap": budget.total, "left_out": left_out}


class _Impact:
    """Beside a failing check, what its failing rules mean for each real client of its API, from
    measurements of the same violation only (conformance/impact.json, conformance/forms.py); a check that
    did not fail speaks for nobody, except a real client's own request refused for the endpoint's limits
    (that client cannot work there). A client's own recorded session failing (a check that replays it) speaks for
    that client alone: it would break, at the frame the failure names. The measurements are read once,
    and only when a result needs them."""

    def __init__(self) -> None:
        self._data: dict[str, Any] | None = None

    def _load(self) -> dict[str, Any]:
        from harnesscheck.conformance import impact

        if self._data is None:
            self._data = impact.load()
        return self._data

    def session(self, r: CheckResult) -> str:
        """The client whose own recorded session the check replays ('' for other checks)."""
        if not r.check.replays_client:
            return ""  # (the measurements are read only for a session or a failing rule)
        from harnesscheck.conformance import impact

        return impact.session_label(r.check, self._load())

    def verdicts(self, r: CheckResult) -> dict[str, dict[str, str]]:
        refused = r.outcome is Outcome.INCONCLUSIVE and r.cause == "endpoint-config"
        if not refused and r.outcome is not Outcome.FAIL:
            return {}
        from harnesscheck.conformance import impact

        data = self._load()
        if refused:
            return impact.refused_shape_verdict(r.check, r.message, data)
        if self.session(r):
            return impact.session_verdict(r.check, r.message, r.finding.frame_index if r.finding else None,
                                          r.rules, failure_forms(r), data)
        return impact.verdicts_for(r.check, r.rules or [r.check.id], data, failure_forms(r))


def failure_forms(r: CheckResult) -> dict[str, tuple[str, str]]:
    """Per failing rule: the form of its violation and what was seen (conformance.forms): the words of
    the rule's first finding (else the failure's message), the status of the failing exchange."""
    from harnesscheck.conformance.forms import form_of

    t = r.transcript
    status = (t.status if t.status is not None or not t.error else None) if t is not None else 200
    out = {}
    for rule in r.rules or [r.check.id]:
        finding = next((f for f in [*r.findings, *([r.finding] if r.finding else [])] if f.rule == rule), None)
        words = finding.message if finding is not None else r.message
        out[rule] = (form_of(rule, words, status), words)
    return out
