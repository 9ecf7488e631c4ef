"""Tests of toycalc (unittest; named check_* so that the kit's own pytest run never collects them)."""

import unittest

from calc import add, mean, mul


class TestAdd(unittest.TestCase):
    def test_add_positive(self):
        self.assertEqual(add(2, 3), 5)

    def test_add_negative(self):
        self.assertEqual(add(-2, -3), -5)


class TestMul(unittest.TestCase):
    def test_mul(self):
        self.assertEqual(mul(3, 4), 12)

    def test_mul_one(self):
        self.assertEqual(mul(7, 1), 7)


class TestMean(unittest.TestCase):
    def test_mean(self):
        self.assertEqual(mean([1, 2, 3, 6]), 3.0)

    def test_mean_empty(self):
        self.assertEqual(mean([]), 0.0)


if __name__ == "__main__":
    unittest.main()
