"""Results schema, HTML report, plots and the regression gate.

    from harnesscheck.reports import load_results, validate_results, merge_results, render_report, gate

- `schema`: `validate_results(obj)`, `load_results(path)`, `ResultsError`, `SCHEMA_VERSION`
- `merge`: `merge_results([doc, ...])`
- `html`: `render_report(doc) -> str`, `write_report(paths, out)`
- `plots`: matplotlib figures as data URIs
- `gate`: `gate(baseline, current, ...) -> GateReport`, `format_gate(report)`
- `summary`: `summarize(doc)`, `format_summary(doc)` (the per-API table)
"""

from harnesscheck.reports.gate import GateReport, format_gate, gate
from harnesscheck.reports.html import render_report, write_report
from harnesscheck.reports.merge import merge_results
from harnesscheck.reports.schema import SCHEMA_NAME, SCHEMA_VERSION, ResultsError, load_results, validate_results
from harnesscheck.reports.summary import format_summary, summarize

__all__ = [
    "SCHEMA_NAME",
    "SCHEMA_VERSION",
    "GateReport",
    "ResultsError",
    "format_gate",
    "format_summary",
    "gate",
    "load_results",
    "merge_results",
    "render_report",
    "summarize",
    "validate_results",
    "write_report",
]
