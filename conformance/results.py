"""Collects check outcomes during a run and writes results JSON (schema: reports/results.schema.json)
plus one transcript file per non-passing check."""

from __future__ import annotations

import json
import os
import platform
import socket
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from conformance.catalog import Check
from conformance.clients.impact import refused_shape_verdict, verdicts_for
from conformance.grammar.findings import Finding
from conformance.outcome import Level, Outcome
from conformance.wire.redact import redact_text
from conformance.wire.transcript import Transcript
from harnesscheck import __version__


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def machine() -> dict[str, Any]:
    return {"hostname": socket.gethostname(), "platform": platform.platform(), "python": platform.python_version(),
            "cpus": os.cpu_count()}


@dataclass(slots=True)
class CheckResult:
    check: Check
    outcome: Outcome
    message: str
    duration_s: float
    finding: Finding | None = None
    transcript: Transcript | None = None
    excerpt: str | None = None
    transcript_path: str | None = None
    rules: list[str] = field(default_factory=list)  # the rules a failure broke, the leading one first
    level: Level | None = None  # what this result weighs: a failure, its failing rule's level
    cause: str = ""  # an inconclusive result's cause (verdict.CAUSES)
    notes: list[str] = field(default_factory=list)  # informational findings (allowed, shown, never failed)

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
        run = {"id": uuid.uuid4().hex[:12], "started_at": now_iso(), "kit_version": __version__, "endpoint": endpoint,
               "model": model, "apis": apis, "machine": machine(), "settings": settings, "server": server}
        return cls(run=run, secrets=[s for s in secrets if s])

    def add(self, result: CheckResult) -> None:
        self.results.append(result)

    def to_json(self, transcripts_dir: Path | None, results_path: Path | None) -> dict[str, Any]:
        checks = []
        for r in self.results:
            if r.transcript is not None and transcripts_dir is not None and r.outcome in (
                    Outcome.FAIL, Outcome.ERROR, Outcome.INCONCLUSIVE):
                transcripts_dir.mkdir(parents=True, exist_ok=True)
                path = transcripts_dir / f"{r.check.id}.json"
                path.write_text(redact_text(r.transcript.to_json(indent=1), self.secrets), encoding="utf-8")
                base = results_path.parent if results_path else transcripts_dir.parent
                r.transcript_path = os.path.relpath(path, base)
            finding = None
            if r.finding is not None or r.excerpt:
                f = r.finding
                finding = {"rule": f.rule if f else "", "frame_index": f.frame_index if f else None,
                           "observed": f.observed if f else None, "expected": f.expected if f else None,
                           "excerpt": redact_text(r.excerpt or "", self.secrets) or None}
            verdicts = _harness_verdicts(r)
            entry = {
                "id": r.check.id, "api": r.check.api, "title": r.check.title, "level": str(r.weight),
                "check_level": str(r.check.level), "outcome": str(r.outcome),
                "message": redact_text(r.message, self.secrets),
                "source": r.check.source, "remedy": r.check.remedy, "duration_s": round(r.duration_s, 4),
                "transcript": r.transcript_path, "finding": finding, "rules_failed": list(r.rules),
                "clients": {name: v["verdict"] for name, v in verdicts.items()},
                "client_evidence": {name: redact_text(v["evidence"], self.secrets) for name, v in verdicts.items()},
                "faults": list(r.check.faults),
            }
            if r.cause:
                entry["cause"] = r.cause
            if r.notes:
                entry["notes"] = [redact_text(n, self.secrets) for n in r.notes]
            checks.append(entry)
        run = {**self.run, "finished_at": now_iso()}
        return {"schema": "harnesscheck.results", "schema_version": "1.0", "run": run, "checks": checks,
                "benchmarks": [], "comparisons": [], "fault_matrix": None}

    def write(self, results_path: Path | None, transcripts_dir: Path | None) -> dict[str, Any]:
        doc = self.to_json(transcripts_dir, results_path)
        if results_path is not None:
            results_path.parent.mkdir(parents=True, exist_ok=True)
            results_path.write_text(json.dumps(doc, indent=1, ensure_ascii=False), encoding="utf-8")
        return doc


def _harness_verdicts(r: CheckResult) -> dict[str, dict[str, str]]:
    """Beside a failing check, what its failing rules mean for each real client of its API, from
    measurements only (clients/impact.json); a check that did not fail speaks for nobody, except a
    real client's own request refused for the endpoint's limits (that client cannot work there)."""
    if r.outcome is Outcome.INCONCLUSIVE and r.cause == "endpoint-config":
        return refused_shape_verdict(r.check, r.message)
    if r.outcome is not Outcome.FAIL:
        return {}
    return verdicts_for(r.check, r.rules or [r.check.id])


def elapsed(start: float) -> float:
    return time.monotonic() - start
