"""The suite's contractions beyond one matmul: a bilinear form (a sum over two axes), a
matrix-vector product and a chain of three matrices written as one sum (the search factors the
sums over several axes, :mod:`tecomp.search.factor_sketch`)."""
from __future__ import annotations

import numpy as np

from .. import ir as tc
from .op_case import OpCase, inputs_of, rand_input

__all__ = ["bilinear_form", "matvec", "matrix_chain"]


def bilinear_form(B, M, N, name="bilinear"):
    """``s[b] = sum_{i, j} x[b, i] W[i, j] y[b, j]``: one reduction over two axes to a short
    vector; lanes along ``b`` would gather from both ``x`` and ``y``."""
    x, y = tc.placeholder((B, M), "float32", name="x"), tc.placeholder((B, N), "float32", name="y")
    W = tc.placeholder((M, N), "float32", name="W")
    i, j = tc.reduce_axis(M, name="i"), tc.reduce_axis(N, name="j")
    s = tc.compute((B,), lambda b: tc.sum(x[b, i] * W[i, j] * y[b, j], axis=[i, j]), name=name)
    return OpCase(name, tc.ComputeDAG([x, W, y, s]),
                  inputs_of(rand_input(x.shape), rand_input(W.shape), rand_input(y.shape)),
                  lambda a: [np.einsum("bi,ij,bj->b", a[0].astype(np.float64), a[1], a[2])],
                  lambda torch, a: (lambda p=torch.from_numpy(a[0]), w=torch.from_numpy(a[1]),
                                    q=torch.from_numpy(a[2]): lambda: ((p @ w) * q).sum(1))(),
                  least_flops=2.0 * B * N * (M + 1))


def matvec(M, N, name="gemv"):
    """``y[i] = sum_j A[i, j] x[j]``, a linear layer's weight as torch stores it (out x in) times
    one vector: memory-bound, and lanes along ``i`` would gather a column of ``A``."""
    A, x = tc.placeholder((M, N), "float32", name="A"), tc.placeholder((N,), "float32", name="x")
    j = tc.reduce_axis(N, name="j")
    y = tc.compute((M,), lambda i: tc.sum(A[i, j] * x[j], axis=j), name=name)
    return OpCase(name, tc.ComputeDAG([A, x, y]), inputs_of(rand_input(A.shape), rand_input(x.shape)),
                  lambda a: [a[0].astype(np.float64) @ a[1]],
                  lambda torch, a: (lambda p=torch.from_numpy(a[0]), q=torch.from_numpy(a[1]):
                                    lambda: torch.mv(p, q))())


def matrix_chain(M, K, L, N, name="chain"):
    """``D[i, j] = sum_{k, l} A[i, k] B[k, l] C[l, j]``: three matrices in one sum over two axes,
    as an einsum ``ik,kl,lj->ij``. As written it is ``M N K L`` points; torch's ``multi_dot``
    picks the cheaper order of two matmuls."""
    A = tc.placeholder((M, K), "float32", name="A")
    B = tc.placeholder((K, L), "float32", name="B")
    C = tc.placeholder((L, N), "float32", name="C")
    k, m = tc.reduce_axis(K, name="k"), tc.reduce_axis(L, name="l")
    D = tc.compute((M, N), lambda i, j: tc.sum(A[i, k] * B[k, m] * C[m, j], axis=[k, m]),
                   name=name)
    return OpCase(name, tc.ComputeDAG([A, B, C, D]),
                  inputs_of(rand_input(A.shape), rand_input(B.shape), rand_input(C.shape)),
                  lambda a: [np.linalg.multi_dot([x.astype(np.float64) for x in a])],
                  lambda torch, a: (lambda ts=[torch.from_numpy(x) for x in a]:
                                    lambda: torch.linalg.multi_dot(ts))(),
                  least_flops=2.0 * min(M * L * (K + N), N * K * (L + M)))
