"""numpy/scipy reference implementations of the operators in :mod:`tecomp.ops`.

Float inputs are accumulated in float64 and the result is cast back to the input dtype; integer
inputs are computed in their own dtype (wrapping, as compiled code does).
"""
from __future__ import annotations

import numpy as np

__all__ = ["ref_matmul", "ref_batch_matmul", "ref_conv2d", "ref_pad2d", "ref_csr_spmm",
           "ref_bsr_spmm", "ref_sddmm", "ref_bias_add", "ref_relu", "ref_softmax"]


def _acc(*arrays):
    """Arrays to accumulate with (float64 for floats) and the dtype to return."""
    out = np.result_type(*arrays)
    if np.issubdtype(out, np.floating):
        return [np.asarray(a, dtype=np.float64) for a in arrays], out
    return [np.asarray(a) for a in arrays], out


def ref_matmul(a, b, transpose_a=False, transpose_b=False):
    (a, b), t = _acc(a, b)
    a = a.T if transpose_a else a
    b = b.T if transpose_b else b
    return (a @ b).astype(t)


def ref_batch_matmul(a, b, transpose_a=False, transpose_b=False):
    (a, b), t = _acc(a, b)
    a = np.swapaxes(a, 1, 2) if transpose_a else a
    b = np.swapaxes(b, 1, 2) if transpose_b else b
    return np.matmul(a, b).astype(t)


def _pair(v):
    return tuple(v) if isinstance(v, (tuple, list)) else (v, v)


def _pad4(p):
    p = tuple(p) if isinstance(p, (tuple, list)) else (p,)
    if len(p) == 1:
        return p * 4
    if len(p) == 2:
        return (p[0], p[1], p[0], p[1])
    return p


def ref_pad2d(data, padding, layout="NCHW"):
    pt, pl, pb, pr = _pad4(padding)
    if layout == "NCHW":
        widths = ((0, 0), (0, 0), (pt, pb), (pl, pr))
    else:
        widths = ((0, 0), (pt, pb), (pl, pr), (0, 0))
    return np.pad(data, widths)


def ref_conv2d(data, weight, stride=1, padding=0, dilation=1, groups=1, layout="NCHW"):
    """Grouped, strided, dilated, padded 2-d cross-correlation (PyTorch semantics).

    ``layout="NCHW"``: data (N, C, H, W), weight OIHW; ``"NHWC"``: data (N, H, W, C), weight HWIO.
    Sums over kernel positions with one einsum each.
    """
    (x, w), t = _acc(data, weight)
    if layout == "NHWC":
        x = x.transpose(0, 3, 1, 2)
        w = w.transpose(3, 2, 0, 1)
    elif layout != "NCHW":
        raise ValueError(f"unknown layout {layout!r}")
    sh, sw = _pair(stride)
    dh, dw = _pair(dilation)
    x = ref_pad2d(x, padding, "NCHW")
    N, C, Hp, Wp = x.shape
    O, CG, KH, KW = w.shape
    g = groups
    assert C == CG * g and O % g == 0
    OH = (Hp - dh * (KH - 1) - 1) // sh + 1
    OW = (Wp - dw * (KW - 1) - 1) // sw + 1
    xg = x.reshape(N, g, CG, Hp, Wp)
    wg = w.reshape(g, O // g, CG, KH, KW)
    out = np.zeros((N, g, O // g, OH, OW), dtype=np.result_type(x, w))
    for ky in range(KH):
        for kx in range(KW):
            y0, x0 = ky * dh, kx * dw
            patch = xg[:, :, :, y0:y0 + (OH - 1) * sh + 1:sh, x0:x0 + (OW - 1) * sw + 1:sw]
            out += np.einsum("ngchw,goc->ngohw", patch, wg[:, :, :, ky, kx])
    out = out.reshape(N, O, OH, OW)
    if layout == "NHWC":
        out = out.transpose(0, 2, 3, 1)
    return np.ascontiguousarray(out).astype(t)


def ref_csr_spmm(data, indices, indptr, dense):
    import scipy.sparse as sp
    (d, x), t = _acc(data, dense)
    m = sp.csr_matrix((d, np.asarray(indices), np.asarray(indptr)),
                      shape=(len(indptr) - 1, x.shape[0]))
    return np.asarray(m @ x).astype(t)


def ref_bsr_spmm(data, indices, indptr, dense):
    import scipy.sparse as sp
    (d, x), t = _acc(data, dense)
    _, bs_r, bs_c = d.shape
    mb = len(indptr) - 1
    m = sp.bsr_matrix((d, np.asarray(indices), np.asarray(indptr)),
                      shape=(mb * bs_r, x.shape[0]), blocksize=(bs_r, bs_c))
    return np.asarray(m @ x).astype(t)


def ref_sddmm(a, b, indices, indptr):
    (a, b), t = _acc(a, b)
    indptr = np.asarray(indptr)
    rows = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
    return np.einsum("pk,pk->p", a[rows], b[np.asarray(indices)]).astype(t)


def ref_bias_add(x, bias, axis=-1):
    axis = axis % x.ndim
    shape = [1] * x.ndim
    shape[axis] = -1
    return (x + np.asarray(bias).reshape(shape)).astype(x.dtype)


def ref_relu(x):
    return np.maximum(x, np.zeros((), dtype=x.dtype))


def ref_softmax(x, axis=-1):
    (y,), t = _acc(x)
    y = np.exp(y - y.max(axis=axis, keepdims=True))
    return (y / y.sum(axis=axis, keepdims=True)).astype(t)
