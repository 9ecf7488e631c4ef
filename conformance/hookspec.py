"""The kit's own pytest hooks (plugin.py registers them through `pytest_addhooks`, as pytest-benchmark
does): a conftest.py or a plugin of one's own implements them to follow a run as it goes.

    # conftest.py
    def pytest_harnesscheck_result(result, item):
        print(result.check.id, result.outcome, result.weight, result.rules)

`pytest_harnesscheck_result` is called once per check, as soon as its result is made (before it is
written to results.json, which holds the same result), in the process that ran the check: under
pytest-xdist (`-n N`) that is a worker, so an implementation in a conftest.py runs there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    import pytest

    from harnesscheck.conformance.results import CheckResult

hookspec = pluggy.HookspecMarker("pytest")


@hookspec
def pytest_harnesscheck_result(result: CheckResult, item: pytest.Item) -> None:
    """A check's result, just made: `result` (conformance.results.CheckResult: the check's catalog entry,
    outcome, message, level, failing rules, findings, transcript) for the test `item` that judged it. The
    result is the kit's: read it, do not change it."""
