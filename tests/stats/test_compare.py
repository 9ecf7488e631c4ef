"""`stats.compare`: two profiles' per-task counts compared as pure functions (pairing, the exact
tests, the tables). Reading counts from CSVs and run folders is `agents.counts`'
(tests/agents/test_counts.py)."""

from __future__ import annotations

import pytest

from harnesscheck.stats.compare import compare_counts


def test_unpaired_tasks_are_reported() -> None:
    comp = compare_counts({"t1": 3, "t2": 5, "t3": 4}, {"t2": 6, "t3": 4, "t4": 9}, label_a="x", label_b="y")
    assert comp.n_tasks == 2 and comp.only_a == ("t1",) and comp.only_b == ("t4",)
    assert comp.permutation.method == "exact"
    assert comp.to_dict()["unpaired"] == {"a_only": ["t1"], "b_only": ["t4"]}
    assert "Only in A: t1; only in B: t4" in comp.to_markdown()
    with pytest.raises(ValueError):
        compare_counts({"a": 1}, {"b": 1})
