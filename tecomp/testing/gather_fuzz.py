"""Fuzzing the index validator against an independent reference on random gathers.

A case is a random integer expression of int32 index data (``+ - * // % min max neg``, casts to
int8/int64, constants up to the int32 limits), used as the index of a gather from a float tensor,
sometimes guarded by ``if_then_else(0 <= e < n, X[e], 0)``. The reference evaluates it in Python
integers, wrapping every node in its own type as two's complement; with random index data (values
near the int32 limits included) a case then requires:

- every read the reference finds in range: the kernel runs, and its native result and the
  interpreter's both equal the reference gather;
- a read out of range: both the native call and ``emulate()`` raise ``ValueError`` before any
  code runs.

So no data makes the native code read outside its buffers.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from .. import ir as tc

__all__ = ["FuzzStats", "fuzz_gathers", "random_index_data"]

N_SRC = 16  # the gathered tensor's length
N_OUT = 8   # the gather's length (and the index arrays')
_EDGE = [0, 1, -1, 2, 3, 7, 15, 16, 17, 2**15, 2**16, 2**30 - 1, 2**30, 2**31 - 1, -2**31,
         -2**31 + 1, 1431655765, -1431655765, 715827882, 2**31 // 3 + 1]
_BITS = {"int8": 8, "int32": 32, "int64": 64}


def _wrap(v: int, bits: int) -> int:
    half = 1 << (bits - 1)
    return (v + half) % (2 * half) - half


@dataclass
class _Node:
    expr: object          # the tecomp expression
    fn: object            # (a, b) -> python int, the reference over the two index arrays' values
    bits: int             # the integer type's width


@dataclass
class FuzzStats:
    """Counts of a fuzz run."""

    expressions: int = 0
    cases: int = 0
    in_range: int = 0
    rejected: int = 0
    guarded: int = 0
    failures: list = field(default_factory=list)


def _const(rng) -> int:
    if rng.random() < 0.5:
        return int(rng.choice(_EDGE))
    return int(rng.integers(-40, 40))


def _expr(rng, a, b, depth: int) -> _Node:
    if depth == 0 or rng.random() < 0.25:
        if rng.random() < 0.5:
            return _Node(a[tc_i()], lambda x, y: x, 32)
        return _Node(b[tc_i()], lambda x, y: y, 32)
    kind = rng.choice(["add", "sub", "mul", "div", "mod", "min", "max", "neg", "cast", "cmix"])
    x = _expr(rng, a, b, depth - 1)
    if kind == "neg":
        return _Node(-x.expr, lambda p, q, f=x.fn, w=x.bits: _wrap(-f(p, q), w), x.bits)
    if kind == "cast":
        to = str(rng.choice(["int8", "int64", "int32"]))
        w = _BITS[to]
        return _Node(tc.cast(x.expr, to), lambda p, q, f=x.fn: _wrap(f(p, q), w), w)
    if kind in ("div", "mod"):
        c = int(rng.choice([1, 2, 3, 7, 16] + ([] if x.bits == 8 else [1000, 2**20, 2**31 - 1])))
        if kind == "div":
            return _Node(x.expr // c, lambda p, q, f=x.fn: f(p, q) // c, x.bits)
        return _Node(x.expr % c, lambda p, q, f=x.fn: f(p, q) % c, x.bits)
    if kind == "cmix" or rng.random() < 0.5:  # with a constant operand
        c = _const(rng)
        if x.bits == 8:
            c = _wrap(c, 8)
        y = _Node(c, lambda p, q, c=c: c, x.bits)
    else:
        y = _expr(rng, a, b, depth - 1)
    w = max(x.bits, y.bits)
    op = {"add": lambda u, v: u + v, "sub": lambda u, v: u - v, "mul": lambda u, v: u * v,
          "min": min, "max": max, "cmix": lambda u, v: u * v}[kind]
    ex = {"add": lambda u, v: u + v, "sub": lambda u, v: u - v, "mul": lambda u, v: u * v,
          "min": tc.minimum, "max": tc.maximum, "cmix": lambda u, v: u * v}[kind]
    return _Node(ex(x.expr, y.expr),
                 lambda p, q, f=x.fn, g=y.fn: _wrap(op(f(p, q), g(p, q)), w), w)


_I = []


def tc_i():
    """The gather's iteration variable (set while a case's expression is drawn)."""
    return _I[-1]


def random_index_data(rng, n: int = N_OUT) -> np.ndarray:
    """int32 index data: small values, values near the int32 limits and uniform ones."""
    kind = rng.integers(3)
    if kind == 0:
        v = rng.integers(-20, 40, n)
    elif kind == 1:
        v = rng.choice(np.array(_EDGE, dtype=np.int64), n)
    else:
        v = rng.integers(-2**31, 2**31, n)
    return v.astype(np.int32)


def _one_expression(rng, stats: FuzzStats, datasets: int) -> None:
    a = tc.placeholder((N_OUT,), "int32", "a")
    b = tc.placeholder((N_OUT,), "int32", "b")
    X = tc.placeholder((N_SRC,), "float32", "X")
    depth = int(rng.integers(1, 5))
    guarded = rng.random() < 0.3
    clamp = rng.random() < 0.4
    lo_c, hi_c = int(rng.integers(-2, 1)), int(rng.integers(N_SRC - 1, N_SRC + 2))

    def body(i):
        _I.append(i)
        try:
            node = _expr(rng, a, b, depth)
        finally:
            _I.pop()
        e = node.expr
        if clamp:  # most data then indexes in range, or out by a little
            e = tc.minimum(tc.maximum(e, lo_c), hi_c)
        holder.append(node)
        if guarded:
            return tc.if_then_else((e >= 0) & (e < N_SRC), X[e], -1.0)
        return X[e]

    holder: list = []
    try:
        Y = tc.compute((N_OUT,), body, name="Y")
        k = tc_build(tc.ComputeDAG([X, a, b, Y]))
    except (ValueError, IndexError):
        return  # a constant index out of range, or an index the validator cannot decide: refused
    node = holder[0]
    stats.expressions += 1
    x = (np.arange(N_SRC) + 1).astype(np.float32) * 1.5
    for _ in range(datasets):
        da, db = random_index_data(rng), random_index_data(rng)
        idx = [node.fn(int(p), int(q)) for p, q in zip(da, db)]
        if clamp:
            idx = [min(max(v, lo_c), hi_c) for v in idx]
        ok = [0 <= v < N_SRC for v in idx]
        stats.cases += 1
        if guarded:
            stats.guarded += 1
            want = np.array([x[v] if o else -1.0 for v, o in zip(idx, ok)], np.float32)
            expect_ok = True
        else:
            want = np.array([x[v] if o else 0 for v, o in zip(idx, ok)], np.float32)
            expect_ok = all(ok)
        for run in (k.emulate, k):  # the interpreter first: it never reads out of bounds
            try:
                got = run(x, da, db)
            except ValueError:
                if expect_ok:
                    stats.failures.append(("rejected valid data", repr(node.expr), da, db))
                continue
            except IndexError:  # the interpreter's own bounds check: the validator missed it
                stats.failures.append(("accepted out-of-range data", repr(node.expr), da, db))
                break
            if not expect_ok:
                stats.failures.append(("accepted out-of-range data", repr(node.expr), da, db))
                break  # the native kernel is not run with data that would read out of bounds
            if not np.array_equal(got, want):
                stats.failures.append(("wrong values", repr(node.expr), da, db))
        stats.in_range += expect_ok
        stats.rejected += not expect_ok


def tc_build(dag):
    from ..build import build
    return build(dag, cache=False)


def fuzz_gathers(seconds: float = 10.0, seed: int = 0, datasets: int = 40,
                 max_expressions: int | None = None) -> FuzzStats:
    """Fuzz for ``seconds`` (or ``max_expressions`` built kernels); returns the counts."""
    rng = np.random.default_rng(seed)
    stats = FuzzStats()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if max_expressions is not None and stats.expressions >= max_expressions:
            break
        _one_expression(rng, stats, datasets)
    return stats
