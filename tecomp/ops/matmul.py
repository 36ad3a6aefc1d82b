"""Dense matrix products."""
from __future__ import annotations

from .. import ir
from ..ir.tensor import Tensor
from . import arguments as chk

__all__ = ["matmul", "batch_matmul"]


def matmul(A: Tensor, B: Tensor, transpose_a: bool = False, transpose_b: bool = False, *,
           name: str = "matmul") -> Tensor:
    """Matrix product ``op(A) @ op(B)``.

    Parameters
    ----------
    A : Tensor
        ``(M, K)``, or ``(K, M)`` when ``transpose_a``.
    B : Tensor
        ``(K, N)``, or ``(N, K)`` when ``transpose_b``.
    transpose_a, transpose_b : bool
        Read the operand transposed (no transposed copy is made).
    name : str
        Name of the output stage.

    Returns
    -------
    Tensor
        ``(M, N)`` of the inputs' dtype; one reduce axis ``k`` of extent ``K``. Accumulates in the
        output dtype.

    Raises
    ------
    TypeError
        Non-tensor arguments, mismatched or bool dtypes.
    ValueError
        Operands that are not 2-d or whose inner dimensions differ.
    """
    op = "matmul"
    chk.tensor(op, "A", A, 2)
    chk.tensor(op, "B", B, 2)
    chk.same_dtype(op, "A", A, "B", B)
    chk.numeric(op, "A", A)
    M, K = (A.shape[1], A.shape[0]) if transpose_a else A.shape
    K2, N = (B.shape[1], B.shape[0]) if transpose_b else B.shape
    if K != K2:
        raise ValueError(f"matmul: inner dimensions differ: A{'.T' if transpose_a else ''} is "
                         f"({M}, {K}) but B{'.T' if transpose_b else ''} is ({K2}, {N})")
    k = ir.reduce_axis(K, name="k")

    def lhs(i):
        return A[k, i] if transpose_a else A[i, k]

    def rhs(j):
        return B[j, k] if transpose_b else B[k, j]

    return ir.compute((M, N), lambda i, j: ir.sum(lhs(i) * rhs(j), axis=k), name=name,
                      tag="matmul")


def batch_matmul(A: Tensor, B: Tensor, transpose_a: bool = False, transpose_b: bool = False, *,
                 name: str = "batch_matmul") -> Tensor:
    """Batched matrix product: ``out[b] = op(A[b]) @ op(B[b])``.

    Parameters
    ----------
    A : Tensor
        ``(batch, M, K)``, or ``(batch, K, M)`` when ``transpose_a``.
    B : Tensor
        ``(batch, K, N)``, or ``(batch, N, K)`` when ``transpose_b``.
    transpose_a, transpose_b : bool
        Read the operand's last two dimensions transposed.
    name : str
        Name of the output stage.

    Returns
    -------
    Tensor
        ``(batch, M, N)`` of the inputs' dtype; one reduce axis ``k``.

    Raises
    ------
    TypeError
        Non-tensor arguments, mismatched or bool dtypes.
    ValueError
        Operands that are not 3-d, different batch sizes, or mismatched inner dimensions.
    """
    op = "batch_matmul"
    chk.tensor(op, "A", A, 3)
    chk.tensor(op, "B", B, 3)
    chk.same_dtype(op, "A", A, "B", B)
    chk.numeric(op, "A", A)
    if A.shape[0] != B.shape[0]:
        raise ValueError(f"batch_matmul: batch sizes differ: A has {A.shape[0]}, B has "
                         f"{B.shape[0]}")
    nb = A.shape[0]
    M, K = (A.shape[2], A.shape[1]) if transpose_a else A.shape[1:]
    K2, N = (B.shape[2], B.shape[1]) if transpose_b else B.shape[1:]
    if K != K2:
        raise ValueError(f"batch_matmul: inner dimensions differ: A gives (M, K) = ({M}, {K}) but "
                         f"B gives (K, N) = ({K2}, {N})")
    k = ir.reduce_axis(K, name="k")

    def lhs(bi, i):
        return A[bi, k, i] if transpose_a else A[bi, i, k]

    def rhs(bi, j):
        return B[bi, j, k] if transpose_b else B[bi, k, j]

    return ir.compute((nb, M, N), lambda b, i, j: ir.sum(lhs(b, i) * rhs(b, j), axis=k), name=name,
                      tag="batch_matmul")
