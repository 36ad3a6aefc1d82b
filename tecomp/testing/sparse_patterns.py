"""Sparsity patterns with a chosen nnz and row-length distribution, and the CSR SpMM / BSR SpMM /
SDDMM workloads over a given pattern: what running one tuned sparse record on many matrices
(other nnz, densities, empty rows, power-law rows as in graphs) needs, for tests and benchmarks.

A pattern is ``(indices, indptr)`` (int32, sorted distinct columns per row). Workloads follow
:class:`tecomp.workloads.builders.Workload` (fresh nonzero values per ``make_inputs``, the pattern
fixed, ``index_data`` set).
"""
from __future__ import annotations

import enum

import numpy as np

from .. import ir, ops
from ..workloads import reference as ref
from ..workloads.builders import Workload

__all__ = ["RowLengths", "pattern", "csr_spmm_on", "bsr_spmm_on", "sddmm_on", "nonzero_values"]


class RowLengths(enum.Enum):
    """How the nonzeros spread over rows."""
    #: every row about nnz / rows (binomial)
    UNIFORM = "uniform"
    #: row ``r`` (in a random order) gets weight ``(rank + 1) ** -alpha``: a few long rows and a
    #: long tail of short or empty ones, like a graph's degree distribution
    POWER_LAW = "power_law"


def nonzero_values(rng, n: int, dtype="float32") -> np.ndarray:
    """``n`` values bounded away from zero: ``+-uniform(0.5, 1.5)``."""
    sign = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    return (sign * rng.uniform(0.5, 1.5, n)).astype(dtype)


def pattern(rng, rows: int, cols: int, nnz: int, lengths: RowLengths = RowLengths.UNIFORM,
            alpha: float = 1.0, empty_rows: int = 0) -> tuple:
    """A random pattern of exactly ``nnz`` nonzeros in a ``rows x cols`` matrix.

    Parameters
    ----------
    rng : numpy.random.Generator
    rows, cols, nnz : int
        ``nnz`` must fit in the rows left non-empty.
    lengths : RowLengths
        The row-length distribution.
    alpha : float
        The power-law exponent (``POWER_LAW`` only): larger is more skewed.
    empty_rows : int
        Rows forced empty (chosen at random).

    Returns
    -------
    indices : ndarray (nnz,) int32
    indptr : ndarray (rows + 1,) int32
    """
    lengths = RowLengths(lengths)
    if rows < 0 or cols < 0 or nnz < 0 or not 0 <= empty_rows <= rows:
        raise ValueError(f"pattern: bad sizes rows={rows} cols={cols} nnz={nnz} "
                         f"empty_rows={empty_rows}")
    live = np.sort(rng.permutation(rows)[empty_rows:])
    if nnz > len(live) * cols:
        raise ValueError(f"pattern: nnz={nnz} does not fit {len(live)} non-empty rows of {cols}")
    if lengths is RowLengths.UNIFORM:
        weights = np.ones(len(live))
    else:
        weights = (rng.permutation(len(live)) + 1.0) ** -float(alpha)
    counts = np.zeros(rows, np.int64)
    left = nnz
    while left:  # a row capped at ``cols`` hands its excess to the others
        free = live[counts[live] < cols]
        w = weights[np.searchsorted(live, free)]
        add = rng.multinomial(left, w / w.sum())
        counts[free] = np.minimum(counts[free] + add, cols)
        left = nnz - int(counts.sum())
    indptr = np.zeros(rows + 1, np.int32)
    indptr[1:] = np.cumsum(counts)
    cols_list = [np.sort(rng.choice(cols, int(n), replace=False)) for n in counts if n]
    indices = (np.concatenate(cols_list) if cols_list else np.zeros(0)).astype(np.int32)
    return indices, indptr


def _placeholders(indices, indptr):
    nnz = len(indices)
    return (ir.placeholder((nnz,), "int32", name="indices"),
            ir.placeholder((len(indptr),), "int32", name="indptr"))


def csr_spmm_on(indices, indptr, K: int, N: int, dtype="float32") -> Workload:
    """``(M x K CSR with this pattern) @ (K x N)``; inputs ``[data, indices, indptr, dense]``."""
    indices, indptr = np.asarray(indices, np.int32), np.asarray(indptr, np.int32)
    nnz, M = len(indices), len(indptr) - 1
    data = ir.placeholder((nnz,), dtype, name="data")
    idx, ptr = _placeholders(indices, indptr)
    dense = ir.placeholder((K, N), dtype, name="dense")
    dag = ir.ComputeDAG([data, idx, ptr, dense, ops.csr_spmm(data, idx, ptr, dense)])

    def make_inputs(rng):
        return [nonzero_values(rng, nnz, dtype), indices.copy(), indptr.copy(),
                rng.standard_normal((K, N)).astype(dtype)]

    return Workload(dag, make_inputs, lambda x: [ref.ref_csr_spmm(*x)], "csr_spmm",
                    dict(M=M, K=K, N=N, nnz=nnz, dtype=dtype),
                    dict(indptr=indptr, indices=indices))


def bsr_spmm_on(indices, indptr, Kb: int, N: int, bs_r: int, bs_c: int,
                dtype="float32") -> Workload:
    """``(Mb*bs_r x Kb*bs_c BSR with this block pattern) @ (Kb*bs_c x N)``; inputs
    ``[data, indices, indptr, dense]``."""
    indices, indptr = np.asarray(indices, np.int32), np.asarray(indptr, np.int32)
    nnzb, Mb = len(indices), len(indptr) - 1
    data = ir.placeholder((nnzb, bs_r, bs_c), dtype, name="data")
    idx, ptr = _placeholders(indices, indptr)
    dense = ir.placeholder((Kb * bs_c, N), dtype, name="dense")
    dag = ir.ComputeDAG([data, idx, ptr, dense, ops.bsr_spmm(data, idx, ptr, dense)])

    def make_inputs(rng):
        vals = nonzero_values(rng, nnzb * bs_r * bs_c, dtype).reshape(nnzb, bs_r, bs_c)
        return [vals, indices.copy(), indptr.copy(),
                rng.standard_normal((Kb * bs_c, N)).astype(dtype)]

    return Workload(dag, make_inputs, lambda x: [ref.ref_bsr_spmm(*x)], "bsr_spmm",
                    dict(Mb=Mb, Kb=Kb, N=N, bs_r=bs_r, bs_c=bs_c, nnzb=nnzb, dtype=dtype),
                    dict(indptr=indptr, indices=indices))


def sddmm_on(indices, indptr, N: int, K: int, dtype="float32") -> Workload:
    """The values of ``a @ b.T`` (a: (M, K), b: (N, K)) at this M x N pattern; inputs
    ``[a, b, indices, indptr]``."""
    indices, indptr = np.asarray(indices, np.int32), np.asarray(indptr, np.int32)
    nnz, M = len(indices), len(indptr) - 1
    a = ir.placeholder((M, K), dtype, name="a")
    b = ir.placeholder((N, K), dtype, name="b")
    idx, ptr = _placeholders(indices, indptr)
    dag = ir.ComputeDAG([a, b, idx, ptr, ops.sddmm(a, b, idx, ptr)])

    def make_inputs(rng):
        return [rng.standard_normal((M, K)).astype(dtype),
                rng.standard_normal((N, K)).astype(dtype), indices.copy(), indptr.copy()]

    return Workload(dag, make_inputs, lambda x: [ref.ref_sddmm(*x)], "sddmm",
                    dict(M=M, N=N, K=K, nnz=nnz, dtype=dtype),
                    dict(indptr=indptr, indices=indices))
