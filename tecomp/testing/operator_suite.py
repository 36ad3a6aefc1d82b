"""Operators written directly in the DSL — no ``tc.ops`` rule knows them — from the categories of
Ansor's single-operator evaluation: 1-d/3-d/depthwise/grouped/dilated/transposed convolutions, a
capsule convolution (rank-6 tensors), batch matmuls over permuted operands (BERT's Q.K^T and
P.V per head), conv + bias + ReLU, softmax, layer normalization and a Frobenius norm (a reduction
to a scalar); and beyond Ansor's list, column sums (a reduction over an outer axis), a tanh-form
GELU, a log-softmax, pairwise squared distances, a bilinear form (a reduction over two axes),
a matrix-vector product and a chain of three matrices written as one sum (the last three in
:mod:`tecomp.testing.contraction_ops`).

Each entry of :data:`OPERATORS` builds a :class:`OpCase` at its ``"bench"`` shape or its
``"small"`` one (tests, the interpreter). The reference is numpy in float64; ``torch_fn`` (for the
benchmarks, where torch exists) returns a callable computing the same with torch, or None.
"""
from __future__ import annotations

import inspect

import numpy as np

from .. import ir as tc
from .contraction_ops import bilinear_form, matrix_chain, matvec
from .op_case import OpCase, inputs_of, rand_input
from .random_dags import layer_norm_dag

__all__ = ["OpCase", "OPERATORS", "operator_case", "bilinear_form", "matvec", "matrix_chain"]


def _windows(x, axes_k, stride, dil):
    """Sliding windows of ``x`` over trailing spatial axes: shape (..., out..., k...)."""
    from numpy.lib.stride_tricks import sliding_window_view
    nd = len(axes_k)
    span = [(k - 1) * dil + 1 for k in axes_k]
    w = sliding_window_view(x, span, axis=tuple(range(x.ndim - nd, x.ndim)))
    sl = (Ellipsis,) + tuple(slice(None, None, stride) for _ in range(nd)) \
        + tuple(slice(None, None, dil) for _ in range(nd))
    return w[sl]


def _conv_nd_ref(x, w, stride, pad, dil, groups=1):
    """N-d convolution (cross-correlation) in float64: x (N, C, *S), w (O, C/g, *K)."""
    nd = x.ndim - 2
    x = np.pad(x.astype(np.float64), [(0, 0), (0, 0)] + [(pad, pad)] * nd)
    win = _windows(x, w.shape[2:], stride, dil)          # (N, C, *out, *K)
    cg, og = x.shape[1] // groups, w.shape[0] // groups
    sp, ks = "pqr"[:nd], "xyz"[:nd]
    return np.concatenate(
        [np.einsum(f"nc{sp}{ks},oc{ks}->no{sp}", win[:, g * cg:(g + 1) * cg],
                   w[g * og:(g + 1) * og].astype(np.float64)) for g in range(groups)], axis=1)


def _pad_stage(x, pads, name):
    """Zero padding of the trailing spatial axes of ``x`` as its own stage."""
    nd = len(pads)
    lead = x.ndim - nd
    shape = x.shape[:lead] + tuple(s + 2 * p for s, p in zip(x.shape[lead:], pads))

    def body(*idx):
        cond = None
        src = list(idx)
        for d, p in enumerate(pads):
            if p:
                v = idx[lead + d]
                c = (v >= p) & (v < x.shape[lead + d] + p)
                cond = c if cond is None else cond & c
                src[lead + d] = v - p
        return x[tuple(src)] if cond is None else tc.if_then_else(cond, x[tuple(src)], 0.0)
    return tc.compute(shape, body, name=name)


def conv_nd(N, C, S, O, K, stride=1, pad=0, dil=1, groups=1, bias_relu=False, name="conv"):
    """An N-d grouped/dilated convolution, NC(D)(H)W, written in the DSL."""
    nd = len(S)
    X = tc.placeholder((N, C) + tuple(S), "float32", name="X")
    W = tc.placeholder((O, C // groups) + tuple(K), "float32", name="W")
    P = _pad_stage(X, [pad] * nd, "pad")
    out = tuple((s + 2 * pad - dil * (k - 1) - 1) // stride + 1 for s, k in zip(S, K))
    rc = tc.reduce_axis(C // groups, name="rc")
    rk = [tc.reduce_axis(k, name=f"r{'xyz'[d]}") for d, k in enumerate(K)]
    og = O // groups

    def body(n, o, *sp):
        cin = (o // og) * (C // groups) + rc if groups > 1 else rc
        idx = tuple(s * stride + r * dil for s, r in zip(sp, rk))
        return tc.sum(P[(n, cin) + idx] * W[(o, rc) + tuple(rk)], axis=[rc] + rk)
    Y = tc.compute((N, O) + out, body, name=name)
    ins = [X, W]
    makers = [rand_input(X.shape), rand_input(W.shape)]
    if bias_relu:
        B = tc.placeholder((O,), "float32", name="bias")
        Y = tc.compute(Y.shape, lambda n, o, *sp: tc.maximum(Y[(n, o) + sp] + B[o], 0.0),
                       name="bias_relu")
        ins.append(B)
        makers.append(rand_input((O,)))

    def reference(x):
        y = _conv_nd_ref(x[0], x[1], stride, pad, dil, groups)
        if bias_relu:
            y = np.maximum(y + x[2].reshape((1, -1) + (1,) * nd), 0)
        return [y]

    def torch_fn(torch, x):
        F = torch.nn.functional
        conv = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[nd]
        t = [torch.from_numpy(a) for a in x]
        if bias_relu:
            return lambda: F.relu(conv(t[0], t[1], t[2], stride, pad, dil, groups))
        return lambda: conv(t[0], t[1], None, stride, pad, dil, groups)
    return OpCase(name, tc.ComputeDAG(ins + [Y]), inputs_of(*makers), reference, torch_fn)


def conv2d_transpose(N, C, H, O, K, stride, pad, name="conv_t"):
    """A transposed 2-d convolution as TVM writes it: the input dilated by ``stride`` and padded
    by ``K - 1 - pad`` (one stage), then a convolution with the flipped, transposed weight."""
    X = tc.placeholder((N, C, H, H), "float32", name="X")
    W = tc.placeholder((C, O, K, K), "float32", name="W")   # torch's ConvTranspose2d layout
    p = K - 1 - pad
    D = (H - 1) * stride + 1 + 2 * p

    def dil(n, c, y, x):
        yy, xx = y - p, x - p
        ok = (yy >= 0) & (xx >= 0) & (yy < (H - 1) * stride + 1) & (xx < (H - 1) * stride + 1) \
            & (yy % stride == 0) & (xx % stride == 0)
        return tc.if_then_else(ok, X[n, c, yy // stride, xx // stride], 0.0)
    Dx = tc.compute((N, C, D, D), dil, name="dilate_pad")
    OH = D - K + 1
    rc, ry, rx = (tc.reduce_axis(C, name="rc"), tc.reduce_axis(K, name="ry"),
                  tc.reduce_axis(K, name="rx"))
    Y = tc.compute((N, O, OH, OH), lambda n, o, y, x: tc.sum(
        Dx[n, rc, y + ry, x + rx] * W[rc, o, K - 1 - ry, K - 1 - rx], axis=[rc, ry, rx]),
        name=name)

    def reference(x):
        xs, w = x[0].astype(np.float64), x[1].astype(np.float64)
        full = np.zeros((N, O, (H - 1) * stride + K, (H - 1) * stride + K))
        for i in range(H):
            for j in range(H):
                full[:, :, i * stride:i * stride + K, j * stride:j * stride + K] += np.einsum(
                    "nc,cokl->nokl", xs[:, :, i, j], w)
        return [full[:, :, pad:pad + OH, pad:pad + OH]]

    def torch_fn(torch, x):
        t = [torch.from_numpy(a) for a in x]
        return lambda: torch.nn.functional.conv_transpose2d(t[0], t[1], None, stride, pad)
    # the products with an input pixel, not with an inserted zero (the DAG counts 4x as many
    # at stride 2, which put a transposed conv's GFLOP/s above the FMA peak)
    real = np.zeros(D, bool)
    real[p:p + (H - 1) * stride + 1:stride] = True
    taps = sum(int(real[y:y + K].sum()) for y in range(OH))
    return OpCase(name, tc.ComputeDAG([X, W, Y]), inputs_of(rand_input(X.shape), rand_input(W.shape)),
                  reference, torch_fn, least_flops=2.0 * N * O * C * taps * taps)


def capsule_conv(N, H, CI, CO, K, stride, pad, cap=4, name="capsule"):
    """A capsule convolution (TVM's C2D capsule benchmark): 4x4 pose matrices multiplied along
    the convolution, NHWC with two extra matrix axes (rank-6 tensors)."""
    X = tc.placeholder((N, H, H, CI, cap, cap), "float32", name="X")
    W = tc.placeholder((K, K, CI, CO, cap, cap), "float32", name="W")
    P = tc.compute((N, H + 2 * pad, H + 2 * pad, CI, cap, cap), lambda n, y, x, c, i, j:
                   tc.if_then_else((y >= pad) & (y < H + pad) & (x >= pad) & (x < H + pad),
                                   X[n, y - pad, x - pad, c, i, j], 0.0), name="pad")
    OH = (H + 2 * pad - K) // stride + 1
    ry, rx, rc, rk = (tc.reduce_axis(K, name="ry"), tc.reduce_axis(K, name="rx"),
                      tc.reduce_axis(CI, name="rc"), tc.reduce_axis(cap, name="rk"))
    Y = tc.compute((N, OH, OH, CO, cap, cap), lambda n, y, x, o, i, j: tc.sum(
        P[n, y * stride + ry, x * stride + rx, rc, i, rk] * W[ry, rx, rc, o, rk, j],
        axis=[ry, rx, rc, rk]), name=name)

    def reference(x):
        xp = np.pad(x[0].astype(np.float64), [(0, 0), (pad, pad), (pad, pad)] + [(0, 0)] * 3)
        win = np.lib.stride_tricks.sliding_window_view(xp, (K, K), axis=(1, 2))
        win = win[:, ::stride, ::stride]                     # n y x c i k ky kx
        return [np.einsum("nyxcikab,abcokj->nyxoij", win, x[1].astype(np.float64))]

    def torch_fn(torch, x):
        xt, wt = torch.from_numpy(x[0]), torch.from_numpy(x[1])
        F = torch.nn.functional

        def run():  # pad, windows by unfold, one einsum: how torch users write it
            xp = F.pad(xt, (0, 0, 0, 0, 0, 0, pad, pad, pad, pad))
            win = xp.unfold(1, K, stride).unfold(2, K, stride)
            return torch.einsum("nyxcikab,abcokj->nyxoij", win, wt)
        return run
    return OpCase(name, tc.ComputeDAG([X, W, Y]), inputs_of(rand_input(X.shape), rand_input(W.shape)),
                  reference, torch_fn)


def batch_matmul_qkt(B, Hh, L, D, name="qkt"):
    """Attention scores per head, ``S[b, h, i, j] = sum_d Q[b, i, h, d] K[b, j, h, d]``, reading
    Q and K in the (batch, sequence, head, dim) layout a BERT projection writes."""
    def torch_fn(torch, x):
        q, k = (torch.from_numpy(a).permute(0, 2, 1, 3) for a in x)
        return lambda: torch.matmul(q, k.transpose(-1, -2))
    return _einsum_case(name, "bihd,bjhd->bhij", dict(b=B, h=Hh, i=L, j=L, d=D), ("Q", "K"),
                        torch_fn)


def batch_matmul_pv(B, Hh, L, D, name="pv"):
    """Attention output per head, ``O[b, i, h, d] = sum_k P[b, h, i, k] V[b, k, h, d]``: the
    probabilities by head, V and the output in the (batch, sequence, head, dim) layout that the
    next projection reads (torch: a matmul on permuted views, then the copy to that layout)."""
    def torch_fn(torch, x):
        p, v = torch.from_numpy(x[0]), torch.from_numpy(x[1]).permute(0, 2, 1, 3)
        return lambda: torch.matmul(p, v).permute(0, 2, 1, 3).contiguous()
    return _einsum_case(name, "bhik,bkhd->bihd", dict(b=B, h=Hh, i=L, k=L, d=D), ("P", "V"),
                        torch_fn)


def _einsum_case(name, spec: str, sizes: dict, names: tuple, torch_fn) -> OpCase:
    """The two-input contraction ``spec`` (``"ab,bc->ac"``: one letter an axis, ``sizes`` its
    extent) written in the DSL: inputs named ``names``, the loops named by the letters and a
    reduction axis ``r<letter>`` per letter missing from the output; the reference is
    ``numpy.einsum`` in float64."""
    (a_s, b_s), out = spec.split("->")[0].split(","), spec.split("->")[1]
    A = tc.placeholder(tuple(sizes[c] for c in a_s), "float32", name=names[0])
    Bt = tc.placeholder(tuple(sizes[c] for c in b_s), "float32", name=names[1])
    red = {c: tc.reduce_axis(sizes[c], name=f"r{c}") for c in dict.fromkeys(a_s + b_s)
           if c not in out}

    def body(*idx):
        at = dict(zip(out, idx), **red)
        return tc.sum(A[tuple(at[c] for c in a_s)] * Bt[tuple(at[c] for c in b_s)],
                      axis=list(red.values()))
    P = inspect.Parameter  # the loops take the letters' names, as a lambda's parameters would
    body.__signature__ = inspect.Signature([P(c, P.POSITIONAL_OR_KEYWORD) for c in out])
    Y = tc.compute(tuple(sizes[c] for c in out), body, name=name)
    return OpCase(name, tc.ComputeDAG([A, Bt, Y]), inputs_of(rand_input(A.shape), rand_input(Bt.shape)),
                  lambda x: [np.einsum(spec, *(a.astype(np.float64) for a in x))], torch_fn)


def matmul(M, N, K, name="matmul"):
    A, Bm = tc.placeholder((M, K), "float32", name="A"), tc.placeholder((K, N), "float32", name="B")
    k = tc.reduce_axis(K, name="k")
    C = tc.compute((M, N), lambda i, j: tc.sum(A[i, k] * Bm[k, j], axis=k), name=name)
    return OpCase(name, tc.ComputeDAG([A, Bm, C]), inputs_of(rand_input(A.shape), rand_input(Bm.shape)),
                  lambda x: [x[0].astype(np.float64) @ x[1]],
                  lambda torch, x: (lambda a=torch.from_numpy(x[0]), b=torch.from_numpy(x[1]):
                                    lambda: a @ b)())


def softmax(M, N, name="softmax"):
    X = tc.placeholder((M, N), "float32", name="X")
    k1, k2 = tc.reduce_axis(N, name="k1"), tc.reduce_axis(N, name="k2")
    mx = tc.compute((M,), lambda i: tc.max(X[i, k1], axis=k1), name="rowmax")
    e = tc.compute((M, N), lambda i, j: tc.exp(X[i, j] - mx[i]), name="exp")
    s = tc.compute((M,), lambda i: tc.sum(e[i, k2], axis=k2), name="rowsum")
    Y = tc.compute((M, N), lambda i, j: e[i, j] / s[i], name=name)

    def reference(x):
        z = np.exp(x[0].astype(np.float64) - x[0].max(axis=1, keepdims=True))
        return [z / z.sum(axis=1, keepdims=True)]
    return OpCase(name, tc.ComputeDAG([X, Y]), inputs_of(rand_input(X.shape, -4, 4)), reference,
                  lambda torch, x: (lambda t=torch.from_numpy(x[0]):
                                    lambda: torch.softmax(t, dim=1))())


def layer_norm(M, N, name="layer_norm"):
    dag, make_inputs, reference = layer_norm_dag(M, N)
    return OpCase(name, dag, make_inputs, reference,
                  lambda torch, x: (lambda t=torch.from_numpy(x[0]):
                                    lambda: torch.nn.functional.layer_norm(t, (N,)))())


def frobenius_norm(M, N, name="frobenius"):
    """``sqrt(sum x^2)`` over a matrix: a reduction to one scalar."""
    X = tc.placeholder((M, N), "float32", name="X")
    i, j = tc.reduce_axis(M, name="i"), tc.reduce_axis(N, name="j")
    s = tc.compute((1,), lambda z: tc.sum(X[i, j] * X[i, j], axis=[i, j]), name="sumsq")
    Y = tc.compute((1,), lambda z: tc.sqrt(s[z]), name=name)
    return OpCase(name, tc.ComputeDAG([X, Y]), inputs_of(rand_input(X.shape)),
                  lambda x: [np.sqrt(np.sum(x[0].astype(np.float64) ** 2)).reshape(1)],
                  lambda torch, x: (lambda t=torch.from_numpy(x[0]):
                                    lambda: torch.linalg.matrix_norm(t).reshape(1))())


def column_sum(M, N, name="column_sum"):
    """``S[j] = sum_i X[i, j]``: a reduction over the outer axis of its input, read contiguously
    along the output's axis and with a stride along the reduction."""
    X = tc.placeholder((M, N), "float32", name="X")
    i = tc.reduce_axis(M, name="i")
    S = tc.compute((N,), lambda j: tc.sum(X[i, j], axis=i), name=name)
    return OpCase(name, tc.ComputeDAG([X, S]), inputs_of(rand_input(X.shape)),
                  lambda x: [x[0].astype(np.float64).sum(axis=0)],
                  lambda torch, x: (lambda t=torch.from_numpy(x[0]): lambda: t.sum(dim=0))())


def gelu_tanh(M, N, name="gelu"):
    """GELU in its tanh form, elementwise: transcendental math in a vectorized loop."""
    X = tc.placeholder((M, N), "float32", name="X")
    Y = tc.compute((M, N), lambda i, j: 0.5 * X[i, j] * (1.0 + tc.tanh(0.7978845608028654 * (
        X[i, j] + 0.044715 * X[i, j] * X[i, j] * X[i, j]))), name=name)

    def reference(x):
        v = x[0].astype(np.float64)
        return [0.5 * v * (1 + np.tanh(0.7978845608028654 * (v + 0.044715 * v ** 3)))]
    return OpCase(name, tc.ComputeDAG([X, Y]), inputs_of(rand_input(X.shape, -4, 4)), reference,
                  lambda torch, x: (lambda t=torch.from_numpy(x[0]): lambda:
                                    torch.nn.functional.gelu(t, approximate="tanh"))())


def log_softmax(M, N, name="log_softmax"):
    """``x - max - log(sum(exp(x - max)))`` along rows: two reductions and a log per row."""
    X = tc.placeholder((M, N), "float32", name="X")
    k1, k2 = tc.reduce_axis(N, name="k1"), tc.reduce_axis(N, name="k2")
    mx = tc.compute((M,), lambda i: tc.max(X[i, k1], axis=k1), name="rowmax")
    s = tc.compute((M,), lambda i: tc.sum(tc.exp(X[i, k2] - mx[i]), axis=k2), name="rowsum")
    Y = tc.compute((M, N), lambda i, j: X[i, j] - mx[i] - tc.log(s[i]), name=name)

    def reference(x):
        v = x[0].astype(np.float64)
        z = v - v.max(axis=1, keepdims=True)
        return [z - np.log(np.exp(z).sum(axis=1, keepdims=True))]
    return OpCase(name, tc.ComputeDAG([X, Y]), inputs_of(rand_input(X.shape, -4, 4)), reference,
                  lambda torch, x: (lambda t=torch.from_numpy(x[0]):
                                    lambda: torch.log_softmax(t, dim=1))())


def pairwise_sqdist(M, N, K, name="sqdist"):
    """``D[i, j] = sum_k (X[i, k] - Y[j, k])^2``, the squared distances of a k-NN search, with
    the difference written out twice (two reads of each operand at one place)."""
    X, Y = tc.placeholder((M, K), "float32", name="X"), tc.placeholder((N, K), "float32", name="Y")
    k = tc.reduce_axis(K, name="k")
    D = tc.compute((M, N), lambda i, j: tc.sum((X[i, k] - Y[j, k]) * (X[i, k] - Y[j, k]),
                                               axis=k), name=name)

    def reference(x):
        a, b = x[0].astype(np.float64), x[1].astype(np.float64)
        return [((a[:, None, :] - b[None, :, :]) ** 2).sum(axis=-1)]
    return OpCase(name, tc.ComputeDAG([X, Y, D]), inputs_of(rand_input(X.shape), rand_input(Y.shape)),
                  reference,
                  lambda torch, x: (lambda a=torch.from_numpy(x[0]), b=torch.from_numpy(x[1]):
                                    lambda: torch.cdist(a, b).square())())


#: name -> {"bench": builder, "small": builder}
OPERATORS = {
    "conv1d": {"bench": lambda: conv_nd(1, 64, (256,), 128, (3,), stride=2, pad=1, name="conv1d"),
               "small": lambda: conv_nd(1, 3, (11,), 4, (3,), stride=2, pad=1, name="conv1d")},
    "conv3d": {"bench": lambda: conv_nd(1, 16, (16, 28, 28), 32, (3, 3, 3), pad=1, name="conv3d"),
               "small": lambda: conv_nd(1, 2, (4, 5, 5), 3, (3, 3, 3), pad=1, name="conv3d")},
    "depthwise": {"bench": lambda: conv_nd(1, 128, (56, 56), 128, (3, 3), pad=1, groups=128,
                                           name="depthwise"),
                  "small": lambda: conv_nd(1, 4, (6, 6), 4, (3, 3), pad=1, groups=4,
                                           name="depthwise")},
    "grouped": {"bench": lambda: conv_nd(1, 128, (28, 28), 128, (3, 3), pad=1, groups=4,
                                         name="grouped"),
                "small": lambda: conv_nd(1, 4, (6, 6), 6, (3, 3), pad=1, groups=2,
                                         name="grouped")},
    "dilated": {"bench": lambda: conv_nd(1, 64, (56, 56), 64, (3, 3), pad=2, dil=2,
                                         name="dilated"),
                "small": lambda: conv_nd(1, 3, (7, 7), 4, (3, 3), pad=2, dil=2, name="dilated")},
    "conv_bias_relu": {"bench": lambda: conv_nd(1, 64, (56, 56), 64, (3, 3), pad=1,
                                                bias_relu=True, name="conv_bias_relu"),
                       "small": lambda: conv_nd(1, 3, (6, 6), 4, (3, 3), pad=1, bias_relu=True,
                                                name="conv_bias_relu")},
    "conv_transpose": {"bench": lambda: conv2d_transpose(1, 128, 14, 64, 4, 2, 1),
                       "small": lambda: conv2d_transpose(1, 3, 4, 2, 4, 2, 1)},
    "capsule": {"bench": lambda: capsule_conv(1, 16, 32, 32, 3, 2, 1),
                "small": lambda: capsule_conv(1, 4, 2, 2, 3, 2, 1, cap=2)},
    "qkt": {"bench": lambda: batch_matmul_qkt(1, 12, 128, 64),
            "small": lambda: batch_matmul_qkt(1, 2, 5, 4)},
    "pv": {"bench": lambda: batch_matmul_pv(1, 12, 128, 64),
           "small": lambda: batch_matmul_pv(1, 2, 5, 4)},
    "matmul": {"bench": lambda: matmul(512, 512, 512), "small": lambda: matmul(7, 9, 5)},
    "softmax": {"bench": lambda: softmax(1024, 1024), "small": lambda: softmax(3, 17)},
    "layer_norm": {"bench": lambda: layer_norm(512, 768), "small": lambda: layer_norm(3, 17)},
    "frobenius": {"bench": lambda: frobenius_norm(1024, 1024),
                  "small": lambda: frobenius_norm(7, 13)},
    "column_sum": {"bench": lambda: column_sum(4096, 1024), "small": lambda: column_sum(9, 35)},
    "gelu": {"bench": lambda: gelu_tanh(1024, 2048), "small": lambda: gelu_tanh(3, 37)},
    "log_softmax": {"bench": lambda: log_softmax(512, 1024), "small": lambda: log_softmax(3, 17)},
    "sqdist": {"bench": lambda: pairwise_sqdist(1024, 1024, 64),
               "small": lambda: pairwise_sqdist(5, 7, 3)},
    "bilinear": {"bench": lambda: bilinear_form(256, 512, 512),
                 "small": lambda: bilinear_form(3, 5, 7)},
    "gemv": {"bench": lambda: matvec(2048, 2048), "small": lambda: matvec(5, 37)},
    "chain": {"bench": lambda: matrix_chain(256, 512, 512, 64),
              "small": lambda: matrix_chain(6, 5, 7, 4)},
}


def operator_case(name: str, size: str = "bench") -> OpCase:
    """The operator ``name`` of :data:`OPERATORS` at ``size`` (``"bench"`` or ``"small"``)."""
    try:
        return OPERATORS[name][size]()
    except KeyError:
        raise ValueError(f"unknown operator {name!r} or size {size!r}; operators: "
                         f"{', '.join(OPERATORS)}; sizes: bench, small") from None
