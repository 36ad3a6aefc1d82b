"""3x3 convolution by Winograd's minimal filtering F(m x m, 3 x 3) (Lavin & Gray, 2016), written
as ordinary stages of the DAG so that the search schedules each of them:

- ``U[e, v, c, o] = sum G[e, i] w[i, j, c, o] G[v, j]``: the weight transform. It depends only on
  the weight, so where the weight is a build-time constant (a model's layer) it runs once at build
  time;
- ``t[e, b, p, c]`` and ``V[e, v, p, c]``: the input transform ``B^T d B`` of every ``alpha x
  alpha`` input tile ``d`` (``alpha = m + 2``; tiles overlap by 2), one axis at a time;
- ``M[e, v, p, o] = sum_c V[e, v, p, c] U[e, v, c, o]``: ``alpha^2`` independent matrix products,
  where the FLOPs are (``(m + 2)^2 / (9 m^2)`` of the direct convolution's: 0.44 for ``m = 2``,
  0.25 for ``m = 4``);
- ``s[e, x, p, o]`` and the output: the inverse transform ``A^T M A``, the output stage reading
  its tile's element ``(h % m, w % m)``.

Every stage after the padding runs channels-last. For NCHW the padding copy is also the transpose
to channels-last, and a last stage transposes the result back: two cheap passes, where reading the
tiles straight from the channel planes (and writing them back) gathered every vector lane.

The transform matrices are compile-time numbers, not tensors: each coefficient is a ``select`` on
the loop index it depends on, which the code generator folds to a constant wherever that loop is
unrolled, and hoists out of the vectorized channel loop elsewhere.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from .. import ir
from ..ir.tensor import Tensor
from .layout import nhwc_to_nchw, pad_to_nhwc

__all__ = ["winograd_matrices", "winograd_conv2d", "winograd_tile", "winograd_applies",
           "WINOGRAD_TILES"]

WINOGRAD_TILES = (2, 4)
# interpolation points of the Cook-Toom construction, in the order that keeps the transforms'
# entries small (and so the rounding error low); infinity is always the last point
_POINTS = (Fraction(0), Fraction(1), Fraction(-1), Fraction(2), Fraction(-2), Fraction(1, 2),
           Fraction(-1, 2))


def _poly(roots) -> list:
    """Ascending coefficients of ``prod (x - r)``."""
    c = [Fraction(1)]
    for r in roots:
        c = [Fraction(0)] + c
        for i in range(len(c) - 1):
            c[i] -= r * c[i + 1]
    return c


def winograd_matrices(m: int, r: int = 3) -> tuple:
    """The transforms of F(m, r): ``(A, B, G)`` as float64 arrays of shapes ``(alpha, m)``,
    ``(alpha, alpha)`` and ``(alpha, r)`` (``alpha = m + r - 1``), such that for a 1-d input ``d``
    of ``alpha`` points and a filter ``g`` of ``r``, ``A.T @ ((G @ g) * (B.T @ d))`` is the
    ``m``-point correlation ``[d[i:i + r] @ g for i in range(m)]``."""
    alpha = m + r - 1
    if m < 1 or r < 1 or alpha - 1 > len(_POINTS):
        raise ValueError(f"winograd_matrices: F({m}, {r}) needs {alpha - 1} finite points; "
                         f"at most {len(_POINTS)} are known")
    pts = _POINTS[:alpha - 1]
    at = [[p ** i for p in pts] + [Fraction(int(i == m - 1))] for i in range(m)]
    g = []
    for j, pj in enumerate(pts):
        den = Fraction(1)
        for k, pk in enumerate(pts):
            if k != j:
                den *= pj - pk
        g.append([pj ** i / den for i in range(r)])
    g.append([Fraction(int(i == r - 1)) for i in range(r)])
    bt = []
    for j in range(alpha - 1):
        c = _poly([p for k, p in enumerate(pts) if k != j])
        bt.append(c + [Fraction(0)] * (alpha - len(c)))
    bt.append(_poly(pts))
    f = lambda rows: np.array([[float(x) for x in row] for row in rows])  # noqa: E731
    return f(at).T, f(bt).T, f(g)


def winograd_applies(kernel, stride, dilation, groups: int) -> bool:
    """Whether F(m x m, 3 x 3) computes a convolution of this ``kernel`` size, ``stride`` and
    ``dilation`` (pairs) and ``groups``: a 3x3 kernel, stride 1, no dilation, one group."""
    return (tuple(kernel) == (3, 3) and tuple(stride) == (1, 1) and tuple(dilation) == (1, 1)
            and groups == 1)


def winograd_tile(oh: int, ow: int) -> int:
    """The output tile ``m`` used for an ``oh x ow`` output: 4 (fewer FLOPs) unless the output
    is so small that most of a 4x4 tile would be padding."""
    return 4 if min(oh, ow) >= 8 else 2


def _coef(table: np.ndarray, i: int, j, dtype) -> ir.Expr:
    """``table[i, j]`` for a Python ``i`` and a loop index ``j``: a select chain on ``j``."""
    col = [float(v) for v in table[i]]
    out = ir.const(col[-1], dtype)
    for k in range(len(col) - 2, -1, -1):
        out = ir.if_then_else(j == k, ir.const(col[k], dtype), out)
    return out


def _weighted(table: np.ndarray, j, term) -> ir.Expr:
    """``sum_i table[i, j] * term(i)`` over the rows ``i`` that are not all zero."""
    out = None
    for i in range(table.shape[0]):
        if not np.any(table[i]):
            continue
        x = term(i)
        t = _coef(table, i, j, x.dtype) * x
        out = t if out is None else out + t
    return out


def winograd_conv2d(data: Tensor, weight: Tensor, padding: tuple, layout: str, m: int,
                    name: str) -> Tensor:
    """The stages of a stride-1, undilated, ungrouped 3x3 convolution by F(m x m, 3 x 3).
    Arguments as for :func:`tecomp.ops.conv2d` (already checked there); ``padding`` is
    ``(top, left, bottom, right)``."""
    from .conv2d import conv2d_output_shape, pad2d
    if m not in WINOGRAD_TILES:
        raise ValueError(f"conv2d: the Winograd tile must be one of {WINOGRAD_TILES}, got {m!r}")
    nchw = layout == "NCHW"
    if nchw:
        N, C, H, W = data.shape
        O = weight.shape[0]
    else:
        N, H, W, C = data.shape
        O = weight.shape[3]
    OH, OW = conv2d_output_shape(H, W, 3, 3, 1, padding, 1)
    A, B, G = winograd_matrices(m)
    alpha = m + 2
    TH, TW = -(-OH // m), -(-OW // m)
    P = N * TH * TW
    pt, pl = padding[0], padding[1]
    # pad so that every tile is whole: TH * m + 2 rows from the top padding on (zeros beyond the
    # convolution's own bottom/right padding are never read into a kept output)
    bottom, right = TH * m + 2 - H - pt, TW * m + 2 - W - pl
    bottom, right = max(bottom, 0), max(right, 0)
    if nchw:
        # NCHW is transposed to channels-last here, in the padding copy: a tile's reads and the
        # vectorized transforms then run along the contiguous channels, as in NHWC, where
        # gathering each lane across the channel planes made the transforms slower than the
        # direct convolution
        pad = pad_to_nhwc(data, pt, pl, bottom, right, f"{name}_pad")
    else:
        pad = pad2d(data, (pt, pl, bottom, right), layout, name=f"{name}_pad")

    def tap(i, j, c, o):  # weight tap (i, j) of (c, o), in the op's weight layout
        return weight[o, c, i, j] if nchw else weight[i, j, c, o]

    U = ir.compute((alpha, alpha, C, O), lambda e, v, c, o: _weighted(
        G.T, e, lambda i: _weighted(G.T, v, lambda j: tap(i, j, c, o))),
        name=f"{name}_wtrans", tag="winograd_weight")

    def tile_read(p, a, b, c):
        n, th, tw = p // (TH * TW), p // TW % TH, p % TW
        return pad[n, th * m + a, tw * m + b, c]

    t = ir.compute((alpha, alpha, P, C), lambda e, b, p, c: _weighted(
        B, e, lambda a: tile_read(p, a, b, c)), name=f"{name}_itrans0", tag="winograd_input")
    V = ir.compute((alpha, alpha, P, C), lambda e, v, p, c: _weighted(
        B, v, lambda b: t[e, b, p, c]), name=f"{name}_itrans", tag="winograd_input")
    rc = ir.reduce_axis(C, name="rc")
    M = ir.compute((alpha, alpha, P, O), lambda e, v, p, o: ir.sum(
        V[e, v, p, rc] * U[e, v, rc, o], axis=rc), name=f"{name}_bgemm", tag="winograd_bgemm")
    s = ir.compute((alpha, m, P, O), lambda e, x, p, o: _weighted(
        A, x, lambda v: M[e, v, p, o]), name=f"{name}_otrans0", tag="winograd_output")

    def out(n, o, h, w):
        p = n * (TH * TW) + (h // m) * TW + w // m
        return _weighted(A, h % m, lambda e: s[e, w % m, p, o])

    if not nchw:
        return ir.compute((N, OH, OW, O), lambda n, h, w, o: out(n, o, h, w), name=name,
                          tag="conv2d_winograd")
    # the inverse transform runs channels-last too; one transposing pass writes NCHW (reading
    # its tile's elements straight into NCHW would gather alpha values per output element)
    y = ir.compute((N, OH, OW, O), lambda n, h, w, o: out(n, o, h, w), name=f"{name}_nhwc",
                   tag="winograd_output")
    return nhwc_to_nchw(y, name, "conv2d_winograd")
