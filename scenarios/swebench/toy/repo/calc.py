"""toycalc: a tiny calculator with three known bugs (the harnesscheck SWE-style toy task set)."""


def add(a, b):
    """Return the sum of a and b."""
    return a - b


def mul(a, b):
    """Return the product of a and b."""
    return a**b


def mean(values):
    """Return the arithmetic mean of values; 0.0 for an empty sequence."""
    return sum(values) / len(values)
