"""Example counts of the generated-input (hypothesis) tests, set where each run takes them.

The README's run (`python -m pytest -n 2`) takes each test's quick count; CI's fuzz tier (.ci/run:
`python -m pytest -n 2 --hypothesis-profile ci FILES`) selects the profile "ci", registered here (this
module is imported by tests/conftest.py, before hypothesis reads the option), under which each test
takes its CI count. Both derandomized: the same inputs on every run of a tier.

    @settings(max_examples=examples(quick=60, ci=2000), ...)
"""

from __future__ import annotations

from hypothesis import settings

__all__ = ["CI_PROFILE", "examples", "in_ci_profile"]

CI_PROFILE = "ci"
settings.register_profile(CI_PROFILE, derandomize=True, database=None, deadline=None)


def in_ci_profile() -> bool:
    """Whether the run selected CI's profile (`--hypothesis-profile ci`)."""
    return settings.get_current_profile_name() == CI_PROFILE


def examples(*, quick: int, ci: int) -> int:
    """A test's example count: `ci` under CI's profile, else `quick`."""
    return ci if in_ci_profile() else quick
