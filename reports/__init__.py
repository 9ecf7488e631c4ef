"""Results schema, HTML report, plots and the regression gate.

    from harnesscheck.reports import load_results, validate_results, merge_results, render_report
    from harnesscheck.reports.gate import gate  # `reports.gate` is the module: its function has the same name

- `schema`: `validate_results(obj)`, `load_results(path)`, `ResultsError`, `SCHEMA_VERSION`, and the one
  builder of a results document and its run header (`results_document`, `run_header`)
- `merge`: `merge_results([doc, ...])`
- `html`: `render_report(doc) -> str`, `write_report(paths, out)`
- `plots`: matplotlib figures as data URIs
- `gate`: `gate(baseline, current, ...) -> GateReport`, `format_gate(report)`
- `summary`: `summarize(doc)`, `format_summary(doc)` (the per-API table)
- `markdown`: `to_markdown(doc)` (`report --format md`: a summary for an issue, a PR or a CI job)

The names are loaded on first use (PEP 562): every writer of a results document imports
`reports.schema`, and the pytest plugin, loaded in every pytest session, must not pay for numpy,
matplotlib and the HTML templates to write one.
"""

from __future__ import annotations

from harnesscheck.lazy import lazy_exports

# public name -> the module that defines it
_EXPORTS = {name: f"harnesscheck.reports.{module}" for module, names in {
    "schema": ("SCHEMA_NAME", "SCHEMA_VERSION", "ResultsError", "load_results", "validate_results"),
    "gate": ("GateReport", "format_gate"),
    "html": ("render_report", "write_report"),
    "merge": ("merge_results",),
    "summary": ("format_summary", "summarize"),
}.items() for name in names}

__all__ = [
    "SCHEMA_NAME",
    "SCHEMA_VERSION",
    "GateReport",
    "ResultsError",
    "format_gate",
    "format_summary",
    "load_results",
    "merge_results",
    "render_report",
    "summarize",
    "validate_results",
    "write_report",
]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
