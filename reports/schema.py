"""The results schema: one JSON document per run (or per merge of runs).

The shape lives in `results.schema.json` beside this module (JSON Schema, draft 2020-12); the
helpers here load it, validate against it and add the few checks a schema cannot state (unique
check keys, ratios that name existing arms). Documented for users in `docs/results-schema.md`.

Every writer builds its document here (`run_header`, `results_document`): the conformance run
(conformance/results.py), each benchmark (replay/benchmarks/common.py), a merge and a fault matrix
read as a document (merge.py), so the schema's name and version and the run header have one home.

Errors: `ResultsError(ValueError)` for anything wrong with a results document, with a message that
names the file (when there is one) and the JSON path of the first problem.
"""

from __future__ import annotations

import json
import os
import platform
import socket
import uuid
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harnesscheck import __version__
from harnesscheck.protocol import apis
from harnesscheck.errors import HarnesscheckError
from harnesscheck.protocol.wire.files import JSON_ERRORS, json_problem, read_text

if TYPE_CHECKING:
    import jsonschema

SCHEMA_NAME = "harnesscheck.results"
SCHEMA_VERSION = "1.0"
SCHEMA_FILE = Path(__file__).with_name("results.schema.json")

OUTCOMES = ("pass", "fail", "skip", "inconclusive", "error")
LEVELS = ("MUST", "SHOULD")

__all__ = [
    "LEVELS",
    "OUTCOMES",
    "SCHEMA_NAME",
    "SCHEMA_VERSION",
    "ResultsError",
    "load_results",
    "machine",
    "new_run_id",
    "now_iso",
    "results_document",
    "results_schema",
    "run_header",
    "validate_results",
]

_SECTIONS = ("benchmarks", "comparisons", "fault_matrix")  # what a document may carry beside its checks


class ResultsError(HarnesscheckError, ValueError):
    """A results document is missing, unreadable, or does not match the schema."""


def now_iso() -> str:
    """The current time in UTC, ISO 8601 to the second (a run's started_at / finished_at)."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def new_run_id() -> str:
    return uuid.uuid4().hex[:12]


def machine() -> dict[str, Any]:
    """The run header's `machine`: where the kit ran."""
    return {"hostname": socket.gethostname(), "platform": platform.platform(), "python": platform.python_version(),
            "cpus": os.cpu_count()}


def run_header(*, endpoint: str, model: str, apis: list[str], server: dict[str, Any], settings: dict[str, Any],
               started_at: str | None = None, finished_at: str | None = None) -> dict[str, Any]:
    """A results document's `run`: a new id, when it started (now unless given) and finished (when
    given), the kit's version, what ran against what, and on which machine."""
    run: dict[str, Any] = {"id": new_run_id(), "started_at": started_at or now_iso()}
    if finished_at is not None:
        run["finished_at"] = finished_at
    return {**run, "kit_version": __version__, "endpoint": endpoint, "model": model, "apis": apis,
            "machine": machine(), "settings": settings, "server": server}


def results_document(run: dict[str, Any], checks: list[dict[str, Any]], **sections: Any) -> dict[str, Any]:
    """A results document: the schema's name and version, `run`, `checks`, then the sections given
    (`benchmarks`, `comparisons`, `fault_matrix`), in the order given."""
    unknown = set(sections) - set(_SECTIONS)
    if unknown:
        raise TypeError(f"results_document: unknown section(s) {sorted(unknown)}; a document carries {_SECTIONS}")
    return {"schema": SCHEMA_NAME, "schema_version": SCHEMA_VERSION, "run": run, "checks": checks, **sections}


ANY = "any"  # the `api` of a check no single API owns


def api_names() -> tuple[str, ...]:
    """The values a check's `api` takes: the registered APIs (read now), and "any"."""
    return (*apis.names(), ANY)


def __getattr__(name: str) -> Any:
    if name == "APIS":  # read when asked: an API registered later is in it
        return api_names()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def results_schema() -> dict[str, Any]:
    """The JSON Schema of a results document (cached per registry; do not mutate): results.schema.json, whose
    check `api` enum lists the APIs the kit ships, with that enum read from the registry (a registered API's
    checks validate; tests/reports/test_schema.py checks the file's list against the registry)."""
    return _schema(api_names())


def file_apis() -> list[str]:
    """The check `api` enum as results.schema.json writes it."""
    return list(_file_schema()["$defs"]["check"]["properties"]["api"]["enum"])


@lru_cache(maxsize=1)
def _file_schema() -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    return schema


@lru_cache(maxsize=4)
def _schema(names: tuple[str, ...]) -> dict[str, Any]:
    schema = json.loads(json.dumps(_file_schema()))
    schema["$defs"]["check"]["properties"]["api"]["enum"] = list(names)
    return schema  # type: ignore[no-any-return]


def _validator() -> jsonschema.protocols.Validator:
    return _validator_for(api_names())


@lru_cache(maxsize=4)
def _validator_for(names: tuple[str, ...]) -> jsonschema.protocols.Validator:
    import jsonschema  # on first validation: a writer that only builds documents never needs it

    schema = _schema(names)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def _path(parts: Any) -> str:
    out = "$"
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else f".{p}"
    return out


def validate_results(obj: Any, *, where: str | None = None) -> dict[str, Any]:
    """Check `obj` against the results schema; return it unchanged or raise `ResultsError`.

    The message names the JSON path of the most relevant error and how many errors there are in
    all. `where` (a file name) is prefixed to the message.
    """
    prefix = f"{where}: " if where else ""
    if not isinstance(obj, dict):
        raise ResultsError(f"{prefix}a results document is a JSON object, got {type(obj).__name__}")
    if obj.get("schema") != SCHEMA_NAME:
        raise ResultsError(
            f"{prefix}not a harnesscheck results document: \"schema\" is {obj.get('schema')!r}, "
            f"expected {SCHEMA_NAME!r}"
        )
    version = obj.get("schema_version")
    if not isinstance(version, str) or version.split(".")[0] != SCHEMA_VERSION.split(".")[0]:
        raise ResultsError(
            f"{prefix}unsupported schema_version {version!r}; this kit reads {SCHEMA_VERSION.split('.')[0]}.x"
        )
    errors = sorted(_validator().iter_errors(obj), key=lambda e: (len(e.absolute_path), e.json_path))
    if errors:
        from jsonschema.exceptions import best_match

        best = best_match(errors)
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise ResultsError(f"{prefix}{_path(best.absolute_path)}: {best.message}{more}")
    _semantic_checks(obj, prefix)
    return obj


def _semantic_checks(obj: dict[str, Any], prefix: str) -> None:
    seen: dict[tuple[str, str], int] = {}
    for i, check in enumerate(obj.get("checks", [])):
        key = (check["id"], check["api"])
        if key in seen:
            raise ResultsError(
                f"{prefix}$.checks[{i}]: duplicate check {key[0]} for api {key[1]} "
                f"(first at $.checks[{seen[key]}])"
            )
        seen[key] = i
    for i, bench in enumerate(obj.get("benchmarks", [])):
        arms = {a["name"] for a in bench["arms"]}
        for j, ratio in enumerate(bench.get("ratios", [])):
            for side in ("numerator", "denominator"):
                if ratio[side] not in arms:
                    raise ResultsError(
                        f"{prefix}$.benchmarks[{i}].ratios[{j}].{side}: arm {ratio[side]!r} is not one of "
                        f"{sorted(arms)} in benchmark {bench['name']!r}"
                    )


#: The most of one results file the kit reads (a bench run with every request's samples is a few MB).
MAX_RESULTS_BYTES = 256 << 20


def read_results_json(path: str | Path) -> Any:
    """A results file's JSON, unvalidated: a regular file of at most MAX_RESULTS_BYTES
    (protocol.wire.files). `ResultsError`, one line, for a file that cannot be read or parsed."""
    p = Path(path)
    try:
        text = read_text(p, limit=MAX_RESULTS_BYTES)
    except OSError as exc:
        raise ResultsError(f"{p}: cannot read results file: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ResultsError(f"{p}: not a results file (not UTF-8 text at byte {exc.start})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ResultsError(f"{p}: not valid JSON: {exc}") from None
    except JSON_ERRORS as exc:  # a number past Python's 4300 digits, nesting too deep
        raise ResultsError(f"{p}: not a results file ({json_problem(exc)})") from None


def load_results(path: str | Path) -> dict[str, Any]:
    """Read and validate one results file; `ResultsError` if it is missing, not JSON, or invalid."""
    return validate_results(read_results_json(path), where=str(path))
