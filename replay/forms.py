"""Each API's request shape as replay builds and reads it (``Form``, one per API module: ``apis.get(api).FORM``),
keyed by API name in ``FORMS``, so that the trace, import, capture and replay code asks a table instead
of branching on the API's name; ``api_for_path`` finds the API of a captured route.
"""

from __future__ import annotations

from harnesscheck.conformance import apis
from harnesscheck.conformance.apis.base import Form

__all__ = ["FORMS", "Form", "api_for_path", "form"]

FORMS: dict[str, Form] = {name: module.FORM for name, module in apis.APIS.items()}


def form(api: str) -> Form:
    """The form of ``api``; KeyError (naming the APIs) for any other."""
    apis.get(api)
    return FORMS[api]


def api_for_path(path: str) -> str | None:
    """The API whose route ``path`` ends with (any prefix before /v1's route), or None."""
    p = path.split("?", 1)[0].rstrip("/")
    for name, mod in apis.APIS.items():
        if p.endswith(mod.PATH.removeprefix("/v1")):
            return name
    return None
