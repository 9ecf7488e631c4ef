"""Read results documents from files and folders, and merge several into one.

Inputs (`read_inputs`, `load_merged`): a file is one document; a folder is every document at its top
level (not its subfolders, not hidden files), in the order their runs started. A document is a
harnesscheck results document (`"schema": "harnesscheck.results"`: a conformance run, a benchmark's
bench-NAME.json), a fault-matrix document (`harnesscheck faults --matrix` writes fault-matrix.json:
faults, checks, cells, problems), which is read as a results document that carries only that fault
matrix, or a replay's results.json (`"schema": "harnesscheck.replay"`, `harnesscheck replay --out`),
read as a results document whose benchmarks are the replay's per-turn figures (`replay_results`). A
named file must be one of these; in a folder, other JSON files (gate.json, ...) are passed over, and
a JSON file that does not parse is an error (a truncated results.json must not be silently left out
of a gate).

Merge rules (documented in docs/results-schema.md):
- checks are keyed by (id, api); a later document overrides an earlier one, keeping the first one's
  position in the list;
- benchmarks and comparisons are keyed by name; a later one with the same name replaces the earlier
  one, new names are appended;
- the fault matrix is the last one present;
- `run` is the run metadata of the last document that has checks (the conformance run a report's
  header describes; the last document when none has), with `started_at` the earliest, `finished_at`
  the latest, `apis` the union, and `merged_from` listing every source run (nested merges flattened).
"""

from __future__ import annotations

import copy
import datetime as dt
from pathlib import Path
from typing import Any, Iterable

from harnesscheck.reports.schema import (
    SCHEMA_NAME,
    ResultsError,
    read_results_json,
    results_document,
    validate_results,
)

from harnesscheck import __version__

__all__ = ["fault_matrix_results", "is_fault_matrix", "is_replay", "load_merged", "merge_results", "read_folder",
           "read_inputs", "replay_results"]

FAULT_MATRIX_KEYS = ("faults", "checks", "cells")
REPLAY_SCHEMA = "harnesscheck.replay"  # replay.replayer.ReplayResult.to_dict (reports sits below replay)
# A replay's per-turn figures read as benchmarks: (record key, benchmark name suffix, title)
_REPLAY_FIGURES = (("ttft_ms", "ttft", "time to first token per turn"),
                   ("itl_median_ms", "itl", "median inter-token time per turn"),
                   ("end_ms", "end", "time to the end of each turn"),
                   ("first_tool_ready_ms", "tool-ready", "time to the first complete tool call per turn"))


def is_fault_matrix(obj: Any) -> bool:
    """Whether `obj` is a fault-matrix document (conformance/fault_matrix.py `matrix_json`)."""
    return (isinstance(obj, dict) and "schema" not in obj and all(k in obj for k in FAULT_MATRIX_KEYS)
            and all(isinstance(c, str) for c in obj["checks"]))


def fault_matrix_results(matrix: dict[str, Any], *, run_id: str, started_at: str) -> dict[str, Any]:
    """A results document that carries only `matrix`: no checks; the run names the reference server,
    which the fault matrix always runs against (one server per fault), and the APIs of its cells."""
    apis: list[str] = []
    for cell in matrix["cells"]:
        if cell.get("api") and cell["api"] not in apis:
            apis.append(cell["api"])
    run = {"id": run_id, "started_at": started_at, "kit_version": __version__,
           "endpoint": "embedded reference server, one per fault", "model": "", "apis": apis,
           "server": {"kind": "embedded", "timing": "unknown"}}
    return results_document(run, [], fault_matrix=copy.deepcopy(matrix))


def is_replay(obj: Any) -> bool:
    """Whether `obj` is a replay's results document (`harnesscheck replay --out DIR` writes DIR/results.json)."""
    return isinstance(obj, dict) and obj.get("schema") == REPLAY_SCHEMA


def replay_results(replay: dict[str, Any], *, run_id: str, started_at: str) -> dict[str, Any]:
    """A results document of a replay: no checks; per figure a benchmark (`replay-ttft`, `replay-itl`,
    `replay-end`, `replay-tool-ready`; ms, lower is better) with an arm per API whose samples are
    the successful turns' values, each named in `sample_keys` by its `session/turn`, so `report`
    shows them and `gate` compares two replays turn by turn (reports.gate: paired arms).
    `ResultsError` (one line) for a document whose parts have the wrong shape."""
    if replay.get("version") != 1:
        raise ResultsError(f"unsupported replay results version {replay.get('version')!r}; this kit reads 1")
    summary, turns = replay.get("summary"), replay.get("turns")
    if not isinstance(summary, dict) or not isinstance(turns, list):
        raise ResultsError("a replay results document holds a \"summary\" object and a \"turns\" list")
    per: dict[str, dict[str, list[float]]] = {}
    keys: dict[str, dict[str, list[str]]] = {}  # per figure and API, the session/turn of each sample
    for n, rec in enumerate(turns):
        if not isinstance(rec, dict):
            raise ResultsError(f"$.turns[{n}]: a turn record is an object, got {type(rec).__name__}")
        if rec.get("ok") is not True:
            continue
        named = rec.get("api")
        api = named if isinstance(named, str) and named else "any"
        for key, name, _ in _REPLAY_FIGURES:
            value = rec.get(key)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
                raise ResultsError(f"$.turns[{n}].{key}: a number of ms, got {value!r}"[:200])
            per.setdefault(name, {}).setdefault(api, []).append(float(value))
            keys.setdefault(name, {}).setdefault(api, []).append(f"{rec.get('session')}/{rec.get('turn')}")
    from harnesscheck.stats.bootstrap import bootstrap_ci
    import numpy as np

    benchmarks = []
    for key, name, title in _REPLAY_FIGURES:
        arms = []
        for api, xs in sorted(per.get(name, {}).items()):
            arm: dict[str, Any] = {"name": api, "samples": [round(x, 3) for x in xs],
                                   "sample_keys": keys[name][api],
                                   "median": round(float(np.median(xs)), 3),
                                   "p90": round(float(np.percentile(xs, 90)), 3)}
            if len(xs) >= 2:
                ci = bootstrap_ci(xs, np.median, resamples=2000, seed=0)
                arm["ci95"] = [round(ci.low, 3), round(ci.high, 3)]
            arms.append(arm)
        if arms:
            benchmarks.append({"name": f"replay-{name}", "title": f"Replay: {title}", "unit": "ms",
                               "timing": "unknown", "better": "lower", "arms": arms, "ratios": [],
                               "settings": _replay_settings(summary)})
    apis = sorted({str(r.get("api")) for r in turns if isinstance(r, dict) and isinstance(r.get("api"), str)})
    run = {"id": run_id, "started_at": started_at, "kit_version": __version__,
           "endpoint": _text(summary.get("endpoint")), "model": _text(summary.get("model")), "apis": apis,
           "server": {"kind": "external", "timing": "unknown"},
           "settings": _replay_settings(summary)}
    return results_document(run, [], benchmarks=benchmarks)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _replay_settings(summary: dict[str, Any]) -> dict[str, Any]:
    keys = ("mode", "concurrency", "time_scale", "trace_source", "sessions", "turns", "turns_ok", "turns_failed",
            "wall_s", "max_in_flight", "mean_in_flight", "client")
    return {k: summary[k] for k in keys if isinstance(summary.get(k), (str, int, float)) and not
            isinstance(summary.get(k), bool)}


def _replay_started(replay: dict[str, Any], path: Path) -> str:
    """When the replay started: its summary's `started_at` (seconds since the epoch), else the file's time."""
    when = (replay.get("summary") or {}).get("started_at") if isinstance(replay.get("summary"), dict) else None
    try:
        stamp = float(when) if isinstance(when, (int, float)) and not isinstance(when, bool) else path.stat().st_mtime
        return dt.datetime.fromtimestamp(stamp, dt.timezone.utc).isoformat(timespec="seconds")
    except (OSError, OverflowError, ValueError):
        return "1970-01-01T00:00:00+00:00"


def _document(path: Path, obj: Any) -> dict[str, Any]:
    """`obj` (read from `path`) as a validated results document."""
    if is_fault_matrix(obj):
        written = dt.datetime.fromtimestamp(path.stat().st_mtime, dt.timezone.utc)
        started = written.isoformat(timespec="seconds")
        obj = fault_matrix_results(obj, run_id=f"fault-matrix:{path.name}", started_at=started)
    elif is_replay(obj):
        try:
            obj = replay_results(obj, run_id=f"replay:{path.parent.name}/{path.name}",
                                 started_at=_replay_started(obj, path))
        except ResultsError as exc:
            raise ResultsError(f"{path}: {exc}") from None
    return validate_results(obj, where=str(path))


def read_inputs(paths: Iterable[str | Path]) -> list[tuple[Path, dict[str, Any]]]:
    """Each input's documents as (file, validated results document), in merge order (see the module
    docstring); `ResultsError` for a missing input, a bad file, or a folder without any document."""
    out: list[tuple[Path, dict[str, Any]]] = []
    for raw in paths:
        path = Path(raw)
        if not path.is_dir():
            out.append((path, _document(path, read_results_json(path))))
            continue
        found = read_folder(path)
        if not found:
            raise ResultsError(f"{path}: no harnesscheck results document in this folder "
                               "(results.json of a check or a replay, bench-NAME.json or fault-matrix.json)")
        out.extend(found)
    return out


def read_folder(path: str | Path) -> list[tuple[Path, dict[str, Any]]]:
    """The documents at the top level of folder `path`, in the order their runs started (then by
    name); empty when there are none. Other JSON files are passed over; see the module docstring."""
    found = []
    for file in sorted(Path(path).glob("*.json")):
        if file.name.startswith("."):  # hidden: an editor's or an interrupted writer's temporary file
            continue
        obj = read_results_json(file)
        if is_fault_matrix(obj) or is_replay(obj) or (isinstance(obj, dict) and obj.get("schema") == SCHEMA_NAME):
            found.append((file, _document(file, obj)))
    found.sort(key=lambda item: _started(item[1]))
    return found


def _started(doc: dict[str, Any]) -> dt.datetime:
    """When a document's run started (an aware datetime, for ordering a folder's documents)."""
    when = dt.datetime.fromisoformat(doc["run"]["started_at"].replace("Z", "+00:00"))
    return when if when.tzinfo else when.replace(tzinfo=dt.timezone.utc)


def load_merged(paths: Iterable[str | Path]) -> dict[str, Any]:
    """Read every input (files and folders) and merge the documents; `ResultsError` on bad input."""
    return merge_results([doc for _, doc in read_inputs(paths)])


def _source_runs(doc: dict[str, Any]) -> list[dict[str, Any]]:
    run = doc["run"]
    if run.get("merged_from"):
        return [copy.deepcopy(r) for r in run["merged_from"]]
    return [{k: copy.deepcopy(v) for k, v in run.items() if k != "merged_from"}]


def _by_name(docs: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    order: list[str] = []
    items: dict[str, dict[str, Any]] = {}
    for doc in docs:
        for item in doc.get(key) or []:
            if item["name"] not in items:
                order.append(item["name"])
            items[item["name"]] = copy.deepcopy(item)
    return [items[n] for n in order]


def merge_results(docs: Iterable[dict[str, Any]], *, validate: bool = True) -> dict[str, Any]:
    """Merge results documents, earliest first; returns a new, valid document.

    One document is returned as a deep copy (without `merged_from`); none raises `ResultsError`.
    """
    docs = list(docs)
    if not docs:
        raise ResultsError("nothing to merge: no results documents given")
    if validate:
        for i, d in enumerate(docs):
            validate_results(d, where=f"results #{i + 1}")
    if len(docs) == 1:
        return copy.deepcopy(docs[0])

    checks: dict[tuple[str, str], dict[str, Any]] = {}
    for doc in docs:
        for check in doc.get("checks") or []:
            checks[(check["id"], check["api"])] = copy.deepcopy(check)

    fault_matrix = None
    for doc in docs:
        if doc.get("fault_matrix"):
            fault_matrix = copy.deepcopy(doc["fault_matrix"])

    sources = [r for doc in docs for r in _source_runs(doc)]
    lead = next((d for d in reversed(docs) if d.get("checks")), docs[-1])
    run = {k: copy.deepcopy(v) for k, v in lead["run"].items() if k != "merged_from"}
    starts = [r["started_at"] for r in sources if r.get("started_at")]
    ends = [r["finished_at"] for r in sources if r.get("finished_at")]
    if starts:
        run["started_at"] = min(starts)
    if ends:
        run["finished_at"] = max(ends)
    apis: list[str] = []
    for r in sources:
        for api in r.get("apis") or []:
            if api not in apis:
                apis.append(api)
    run["apis"] = apis
    run["id"] = "merge:" + "+".join(r["id"] for r in sources)
    run["merged_from"] = sources

    merged = results_document(run, list(checks.values()), benchmarks=_by_name(docs, "benchmarks"),
                              comparisons=_by_name(docs, "comparisons"), fault_matrix=fault_matrix)
    if validate:
        validate_results(merged, where="merged results")
    return merged
