"""Sparse workloads (CSR and BSR SpMM, SDDMM) and the random sparse matrices they draw.

A sparse workload fixes its sparsity pattern when built (the DAG's nnz is static): ``make_inputs``
draws fresh values but always the same ``indptr``/``indices``, available as
``workload.index_data``.
"""
from __future__ import annotations

import numbers

import numpy as np

from .. import ir, ops
from . import reference as ref
from .workload import Workload, nonzero_values, random_values

__all__ = ["random_csr", "random_bsr", "random_pattern_like", "csr_spmm", "bsr_spmm", "sddmm"]


def _rows_setup(rng, M, empty_rows, dense_row):
    if isinstance(empty_rows, bool):
        n_empty = max(1, M // 4) if (empty_rows and M) else 0
    else:
        n_empty = int(empty_rows)
    n_empty = min(n_empty, M)
    perm = rng.permutation(M)
    empty = set(perm[:n_empty].tolist())
    dense = None
    if dense_row and M > n_empty:
        dense = int(perm[n_empty])
    return empty, dense


def random_csr(rng, M: int, K: int, density: float, empty_rows=0, dense_row: bool = False,
               dtype="float32"):
    """A random CSR matrix ``(data, indices, indptr)``.

    Parameters
    ----------
    rng : numpy.random.Generator
    M, K : int
        Rows and columns.
    density : float
        Expected fraction of nonzeros per row (each row draws ``Binomial(K, density)`` distinct,
        sorted columns).
    empty_rows : int or bool
        Rows forced empty: a count, or True for ``max(1, M // 4)``.
    dense_row : bool
        Make one (non-empty-forced) row fully dense.
    dtype : str
        Dtype of ``data``; values are never zero (``+-uniform(0.5, 1.5)``).

    Returns
    -------
    data : ndarray (nnz,) of dtype
    indices : ndarray (nnz,) int32
    indptr : ndarray (M + 1,) int32
    """
    empty, dense = _rows_setup(rng, M, empty_rows, dense_row)
    if isinstance(density, bool) or not isinstance(density, numbers.Real) \
            or not 0.0 <= density <= 1.0:
        raise ValueError(f"density must be a number in [0, 1], got {density!r}")
    counts = rng.binomial(K, density, size=M) if K else np.zeros(M, np.int64)
    cols = []
    for i in range(M):
        if i in empty:
            n = 0
        elif i == dense:
            n = K
        else:
            n = int(counts[i])
        cols.append(np.sort(rng.choice(K, n, replace=False)) if n else np.zeros(0, np.int64))
    lengths = np.array([len(c) for c in cols], dtype=np.int64)
    indptr = np.zeros(M + 1, dtype=np.int32)
    indptr[1:] = np.cumsum(lengths)
    indices = (np.concatenate(cols) if cols else np.zeros(0)).astype(np.int32)
    data = nonzero_values(rng, len(indices), dtype)
    return data, indices, indptr


def random_bsr(rng, Mb: int, Kb: int, bs_r: int, bs_c: int, density: float, empty_rows=0,
               dense_row: bool = False, dtype="float32"):
    """A random BSR matrix ``(data (nnzb, bs_r, bs_c), indices (nnzb,), indptr (Mb + 1,))`` with a
    block pattern from :func:`random_csr` (``density`` is the fraction of nonzero blocks)."""
    _, indices, indptr = random_csr(rng, Mb, Kb, density, empty_rows, dense_row, dtype)
    data = nonzero_values(rng, len(indices) * bs_r * bs_c, dtype).reshape(-1, bs_r, bs_c)
    return data, indices, indptr


def random_pattern_like(rng, indptr, ncols: int, dense_row: bool = False):
    """Other index data of the same shapes: ``(indices, indptr)`` with the rows of ``indptr``, the
    same nnz and columns in ``[0, ncols)``, drawn uniformly over the matrix (so row lengths differ
    from the original's); with ``dense_row``, one row is full when nnz allows. For running a tuned
    sparse kernel on data it was not tuned on."""
    M = len(indptr) - 1
    nnz = int(indptr[-1])
    if nnz > M * ncols:
        raise ValueError(f"random_pattern_like: nnz={nnz} does not fit {M} x {ncols}")
    full = int(rng.integers(M)) if dense_row and M and ncols <= nnz else None
    rest = nnz - (ncols if full is not None else 0)
    free = np.arange(M * ncols)
    if full is not None:
        free = free[free // ncols != full]
        rest = min(rest, len(free))
    pos = rng.choice(free, rest, replace=False)
    if full is not None:
        pos = np.concatenate([pos, full * ncols + np.arange(ncols)])
    pos = np.sort(pos)
    counts = np.bincount(pos // ncols, minlength=M) if M else np.zeros(0, np.int64)
    new_ptr = np.zeros(M + 1, np.int32)
    new_ptr[1:] = np.cumsum(counts)
    return (pos % ncols).astype(np.int32), new_ptr


def csr_spmm(M: int, K: int, N: int, density: float = 0.1, empty_rows=0, dense_row=False,
             dtype="float32", seed: int = 0):
    """``(M x K CSR) @ (K x N dense)``; inputs ``[data, indices, indptr, dense]``. The sparsity
    pattern is drawn once from ``seed``."""
    pat_rng = np.random.default_rng(seed)
    _, indices_np, indptr_np = random_csr(pat_rng, M, K, density, empty_rows, dense_row, dtype)
    nnz = len(indices_np)
    data = ir.placeholder((nnz,), dtype, name="data")
    indices = ir.placeholder((nnz,), "int32", name="indices")
    indptr = ir.placeholder((M + 1,), "int32", name="indptr")
    dense = ir.placeholder((K, N), dtype, name="dense")
    out = ops.csr_spmm(data, indices, indptr, dense)
    dag = ir.ComputeDAG([data, indices, indptr, dense, out])

    def make_inputs(rng):
        return [nonzero_values(rng, nnz, dtype), indices_np.copy(), indptr_np.copy(),
                random_values(rng, (K, N), dtype)]

    def reference(inputs):
        return [ref.ref_csr_spmm(*inputs)]

    return Workload(dag, make_inputs, reference, "csr_spmm",
                    dict(M=M, K=K, N=N, density=density, empty_rows=empty_rows,
                         dense_row=dense_row, dtype=dtype, seed=seed),
                    dict(indptr=indptr_np, indices=indices_np))


def bsr_spmm(Mb: int, Kb: int, N: int, bs_r: int, bs_c: int, density: float = 0.2, empty_rows=0,
             dense_row=False, dtype="float32", seed: int = 0):
    """``(Mb*bs_r x Kb*bs_c BSR) @ (Kb*bs_c x N dense)``; inputs ``[data, indices, indptr, dense]``."""
    pat_rng = np.random.default_rng(seed)
    _, indices_np, indptr_np = random_csr(pat_rng, Mb, Kb, density, empty_rows, dense_row, dtype)
    nnzb = len(indices_np)
    data = ir.placeholder((nnzb, bs_r, bs_c), dtype, name="data")
    indices = ir.placeholder((nnzb,), "int32", name="indices")
    indptr = ir.placeholder((Mb + 1,), "int32", name="indptr")
    dense = ir.placeholder((Kb * bs_c, N), dtype, name="dense")
    out = ops.bsr_spmm(data, indices, indptr, dense)
    dag = ir.ComputeDAG([data, indices, indptr, dense, out])

    def make_inputs(rng):
        vals = nonzero_values(rng, nnzb * bs_r * bs_c, dtype).reshape(nnzb, bs_r, bs_c)
        return [vals, indices_np.copy(), indptr_np.copy(), random_values(rng, (Kb * bs_c, N), dtype)]

    def reference(inputs):
        return [ref.ref_bsr_spmm(*inputs)]

    return Workload(dag, make_inputs, reference, "bsr_spmm",
                    dict(Mb=Mb, Kb=Kb, N=N, bs_r=bs_r, bs_c=bs_c, density=density,
                         empty_rows=empty_rows, dense_row=dense_row, dtype=dtype, seed=seed),
                    dict(indptr=indptr_np, indices=indices_np))


def sddmm(M: int, N: int, K: int, density: float = 0.1, empty_rows=0, dense_row=False,
          dtype="float32", seed: int = 0):
    """Values of ``a @ b.T`` (a: (M, K), b: (N, K)) at a random M x N CSR pattern; inputs
    ``[a, b, indices, indptr]``."""
    pat_rng = np.random.default_rng(seed)
    _, indices_np, indptr_np = random_csr(pat_rng, M, N, density, empty_rows, dense_row, dtype)
    nnz = len(indices_np)
    a = ir.placeholder((M, K), dtype, name="a")
    b = ir.placeholder((N, K), dtype, name="b")
    indices = ir.placeholder((nnz,), "int32", name="indices")
    indptr = ir.placeholder((M + 1,), "int32", name="indptr")
    out = ops.sddmm(a, b, indices, indptr)
    dag = ir.ComputeDAG([a, b, indices, indptr, out])

    def make_inputs(rng):
        return [random_values(rng, (M, K), dtype), random_values(rng, (N, K), dtype), indices_np.copy(),
                indptr_np.copy()]

    def reference(inputs):
        return [ref.ref_sddmm(*inputs)]

    return Workload(dag, make_inputs, reference, "sddmm",
                    dict(M=M, N=N, K=K, density=density, empty_rows=empty_rows,
                         dense_row=dense_row, dtype=dtype, seed=seed),
                    dict(indptr=indptr_np, indices=indices_np))
