"""Each API's request shape as replay builds and reads it (``Form``, one per API module: ``apis.get(api).FORM``),
keyed by API name in ``FORMS``, so that the trace, import, capture and replay code asks a table instead
of branching on the API's name; ``api_for_path`` finds the API of a captured route.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from harnesscheck.protocol import apis
from harnesscheck.protocol.apis.base import Form

__all__ = ["FORMS", "Form", "api_for_path", "form"]


class _Forms(Mapping[str, Form]):
    """API name -> its module's FORM, read from the registry at each use (a registered API's too)."""

    def __getitem__(self, api: str) -> Form:
        form: Form = apis.APIS[api].FORM
        return form

    def __iter__(self) -> Iterator[str]:
        return iter(apis.APIS)

    def __len__(self) -> int:
        return len(apis.APIS)


FORMS: Mapping[str, Form] = _Forms()


def form(api: str) -> Form:
    """The form of ``api`` (a registered API's too); KeyError (naming the APIs) for any other."""
    return apis.get(api).FORM


def api_for_path(path: str) -> str | None:
    """The API whose route ``path`` ends with (any prefix before /v1's route), or None."""
    api = apis.for_path(path)
    return api.NAME if api else None
