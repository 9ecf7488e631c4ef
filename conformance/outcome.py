"""The closed set of outcomes a check can have, and how much a failure weighs.

``Outcome`` follows DESIGN.md: PASS, FAIL, SKIP (the endpoint lacks an optional feature),
INCONCLUSIVE (a non-deterministic model never took the path), plus ERROR: a crash inside the kit.
ERROR is a kit bug and is never a verdict on the endpoint.

``Level`` says how much a FAIL weighs (Autobahn's FAILED vs NON-STRICT): a MUST failure fails
the run, a SHOULD failure is reported but does not.
"""

from __future__ import annotations

from enum import Enum

__all__ = ["Level", "Outcome"]


class Outcome(str, Enum):
    PASS = "pass"
    FAIL = "fail"
    SKIP = "skip"
    INCONCLUSIVE = "inconclusive"
    ERROR = "error"

    def __str__(self) -> str:  # "pass", not "Outcome.PASS"
        return self.value


class Level(str, Enum):
    MUST = "MUST"
    SHOULD = "SHOULD"

    def __str__(self) -> str:
        return self.value
