"""Sparse products over CSR/BSR index arrays (int32); reduction bounds are loaded from ``indptr``."""
from __future__ import annotations

from .. import ir
from ..ir.tensor import CSRCheck, Tensor
from . import arguments as chk

__all__ = ["csr_spmm", "bsr_spmm", "sddmm"]


def csr_spmm(data: Tensor, indices: Tensor, indptr: Tensor, dense: Tensor, *,
             name: str = "csr_spmm") -> Tensor:
    """Sparse (CSR) times dense: ``(M x K sparse) @ (K x N dense) -> (M x N)``.

    Parameters
    ----------
    data : Tensor
        ``(nnz,)`` nonzero values.
    indices : Tensor
        ``(nnz,)`` int32 column index of each value, in ``[0, K)``.
    indptr : Tensor
        ``(M + 1,)`` int32 row pointers: row ``i`` holds positions ``[indptr[i], indptr[i+1])``.
    dense : Tensor
        ``(K, N)``, the dtype of ``data``.
    name : str
        Name of the output stage.

    Returns
    -------
    Tensor
        ``(M, N)``: ``out[i, j] = sum(data[k] * dense[indices[k], j] for k in row i)``. The reduce
        axis ``k`` has the data-dependent range ``[indptr[i], indptr[i + 1])``; a
        :class:`~tecomp.ir.tensor.CSRCheck` makes every call validate ``indptr`` and ``indices``.

    Raises
    ------
    TypeError
        Non-tensor arguments, index arrays that are not int32, data/dense dtype mismatch.
    ValueError
        Wrong ranks or inconsistent lengths.
    """
    op = "csr_spmm"
    chk.tensor(op, "data", data, 1)
    chk.index_array(op, "indices", indices)
    chk.index_array(op, "indptr", indptr)
    chk.tensor(op, "dense", dense, 2)
    chk.same_dtype(op, "data", data, "dense", dense)
    chk.numeric(op, "data", data)
    nnz = data.shape[0]
    if indices.shape[0] != nnz:
        raise ValueError(f"csr_spmm: 'indices' has {indices.shape[0]} entries but 'data' has {nnz}")
    if indptr.shape[0] < 1:
        raise ValueError("csr_spmm: 'indptr' must have M + 1 >= 1 entries")
    M = indptr.shape[0] - 1
    K, N = dense.shape

    def body(i, j):
        k = ir.reduce_axis((indptr[i], indptr[i + 1]), name="k")
        return ir.sum(data[k] * dense[indices[k], j], axis=k)

    return ir.compute((M, N), body, name=name, tag="csr_spmm",
                      checks=(CSRCheck(indptr, nnz, indices, ncols=K),))


def bsr_spmm(data: Tensor, indices: Tensor, indptr: Tensor, dense: Tensor, *,
             name: str = "bsr_spmm") -> Tensor:
    """Block-sparse (BSR) times dense: ``(Mb*bs_r x Kb*bs_c sparse) @ (Kb*bs_c x N) -> (Mb*bs_r x N)``.

    Parameters
    ----------
    data : Tensor
        ``(nnzb, bs_r, bs_c)`` nonzero blocks.
    indices : Tensor
        ``(nnzb,)`` int32 block-column index of each block, in ``[0, Kb)``.
    indptr : Tensor
        ``(Mb + 1,)`` int32 block-row pointers.
    dense : Tensor
        ``(Kb * bs_c, N)``, the dtype of ``data``.
    name : str
        Name of the output stage.

    Returns
    -------
    Tensor
        ``(Mb * bs_r, N)``: ``out[i, j] = sum(data[k, i % bs_r, c] * dense[indices[k]*bs_c + c, j])``
        over blocks ``k`` in ``[indptr[i // bs_r], indptr[i // bs_r + 1])`` and ``c < bs_c``
        (reduce axes ``k``, ``c``). A CSRCheck on ``indptr`` (nnz = nnzb, ncols = Kb) validates
        the index data on every call.

    Raises
    ------
    TypeError
        Non-tensor arguments, index arrays that are not int32, data/dense dtype mismatch.
    ValueError
        Wrong ranks, inconsistent lengths, or a dense row count not divisible by ``bs_c``.
    """
    op = "bsr_spmm"
    chk.tensor(op, "data", data, 3)
    chk.index_array(op, "indices", indices)
    chk.index_array(op, "indptr", indptr)
    chk.tensor(op, "dense", dense, 2)
    chk.same_dtype(op, "data", data, "dense", dense)
    chk.numeric(op, "data", data)
    nnzb, bs_r, bs_c = data.shape
    if bs_r < 1 or bs_c < 1:
        raise ValueError(f"bsr_spmm: block shape must be at least 1x1, got {bs_r}x{bs_c}")
    if indices.shape[0] != nnzb:
        raise ValueError(f"bsr_spmm: 'indices' has {indices.shape[0]} entries but 'data' has "
                         f"{nnzb} blocks")
    if indptr.shape[0] < 1:
        raise ValueError("bsr_spmm: 'indptr' must have Mb + 1 >= 1 entries")
    Mb = indptr.shape[0] - 1
    K, N = dense.shape
    if K % bs_c:
        raise ValueError(f"bsr_spmm: 'dense' has {K} rows, not a multiple of the block width "
                         f"bs_c={bs_c}")
    Kb = K // bs_c
    c = ir.reduce_axis(bs_c, name="c")

    def body(i, j):
        ib = i // bs_r
        k = ir.reduce_axis((indptr[ib], indptr[ib + 1]), name="k")
        return ir.sum(data[k, i % bs_r, c] * dense[indices[k] * bs_c + c, j], axis=[k, c])

    return ir.compute((Mb * bs_r, N), body, name=name, tag="bsr_spmm",
                      checks=(CSRCheck(indptr, nnzb, indices, ncols=Kb),))


def sddmm(a: Tensor, b: Tensor, indices: Tensor, indptr: Tensor, *, name: str = "sddmm") -> Tensor:
    """Sampled dense-dense product: the values of ``a @ b.T`` at a CSR pattern.

    Parameters
    ----------
    a : Tensor
        ``(M, K)``.
    b : Tensor
        ``(N, K)``, the dtype of ``a``.
    indices : Tensor
        ``(nnz,)`` int32 column of each sampled entry, in ``[0, N)``.
    indptr : Tensor
        ``(M + 1,)`` int32 row pointers.
    name : str
        Name of the output stage.

    Returns
    -------
    Tensor
        ``(nnz,)``: for row ``i`` and ``p`` in ``[indptr[i], indptr[i+1])``,
        ``out[p] = sum(a[i, k] * b[indices[p], k] for k < K)``: a ragged
        :func:`~tecomp.ir.compute_csr` stage with one reduce axis ``k``. Its CSRCheck (indptr from
        0 to nnz, indices in ``[0, N)``) is validated on every call.

    Raises
    ------
    TypeError
        Non-tensor arguments, index arrays that are not int32, a/b dtype mismatch.
    ValueError
        Wrong ranks or inconsistent shapes.
    """
    op = "sddmm"
    chk.tensor(op, "a", a, 2)
    chk.tensor(op, "b", b, 2)
    chk.index_array(op, "indices", indices)
    chk.index_array(op, "indptr", indptr)
    chk.same_dtype(op, "a", a, "b", b)
    chk.numeric(op, "a", a)
    M, K = a.shape
    N, K2 = b.shape
    if K != K2:
        raise ValueError(f"sddmm: 'a' is ({M}, {K}) and 'b' is ({N}, {K2}); their second "
                         f"dimensions (K) must agree")
    if indptr.shape[0] != M + 1:
        raise ValueError(f"sddmm: 'indptr' has {indptr.shape[0]} entries; 'a' has M={M} rows, so "
                         f"it needs M + 1 = {M + 1}")
    nnz = indices.shape[0]
    k = ir.reduce_axis(K, name="k")
    out = ir.compute_csr(indptr, nnz, lambda i, p: ir.sum(a[i, k] * b[indices[p], k], axis=k),
                         name=name, tag="sddmm",
                         checks=(CSRCheck(indptr, nnz, indices, ncols=N),))
    return out
