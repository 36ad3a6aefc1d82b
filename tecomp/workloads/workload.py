"""The :class:`Workload` every builder returns, and the random inputs the builders draw."""
from __future__ import annotations

import numpy as np

__all__ = ["Workload", "random_values", "nonzero_values"]


class Workload(tuple):
    """``(dag, make_inputs, reference)`` with attributes ``dag``, ``make_inputs``, ``reference``,
    ``name``, ``params`` (the builder's arguments) and ``index_data`` (sparse index arrays by
    input name)."""

    def __new__(cls, dag, make_inputs, reference, name="", params=None, index_data=None):
        self = super().__new__(cls, (dag, make_inputs, reference))
        self.name = name
        self.params = dict(params or {})
        self.index_data = dict(index_data or {})
        return self

    @property
    def dag(self):
        return self[0]

    @property
    def make_inputs(self):
        return self[1]

    @property
    def reference(self):
        return self[2]

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        return f"Workload({self.name}({args}))"


def random_values(rng, shape, dtype):
    """Random values of ``shape``: standard normal floats, fair booleans, integers in [-4, 4]."""
    dtype = np.dtype(dtype)
    if np.issubdtype(dtype, np.floating):
        return rng.standard_normal(shape).astype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    return rng.integers(-4, 5, size=shape).astype(dtype)


def nonzero_values(rng, n, dtype):
    """Values bounded away from zero: uniform in +-[0.5, 1.5] (ints: +-1..3)."""
    dtype = np.dtype(dtype)
    sign = np.where(rng.random(n) < 0.5, -1, 1)
    if np.issubdtype(dtype, np.floating):
        return (sign * rng.uniform(0.5, 1.5, n)).astype(dtype)
    return (sign * rng.integers(1, 4, n)).astype(dtype)
