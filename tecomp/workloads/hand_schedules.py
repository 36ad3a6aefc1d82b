"""Hand-written schedules of the standard workloads, written only with the public step API
(``tc.Schedule``). They show what the schedule language and the CPU backend reach, and they are the
yardstick the auto-scheduler has to meet.
"""
from __future__ import annotations

from ..schedule import Schedule

__all__ = ["matmul_schedule", "conv2d_schedule", "gpu_matmul_schedule"]


def _output(dag):
    return dag.outputs[0]


def matmul_schedule(dag, tile_i: int = 8, tile_j: int = 32, pack: bool = True,
                    parallel: bool = True, unroll_k: int = 4) -> Schedule:
    """Matmul ``C = A @ B``: B packed into column panels of ``tile_j`` (contiguous per k), a
    ``tile_i x tile_j`` accumulator tile in registers (cache_write local, computed at the tile),
    k innermost-but-two with the tile's rows unrolled and its columns vectorized, panels in
    parallel.

    Works for any M, N, K (non-divisible extents are guarded).
    """
    s = Schedule(dag)
    C = _output(dag)
    B = dag.inputs[1]
    if pack:
        s.cache_read(B, "global", [s[C]], pack=(1, tile_j))
    CC = s.cache_write(C, "local")
    i, j = s[C].axes
    jo, ji = s[C].split(j, factor=tile_j)
    io, ii = s[C].split(i, factor=tile_i)
    s[C].reorder(jo, io, ii, ji)
    s[C].vectorize(ji)
    if parallel:
        s[C].parallel(jo)
    s[CC].compute_at(s[C], io)
    ci, cj = s[CC].axes
    (k,) = s[CC].reduce_axes
    ko, ki = s[CC].split(k, factor=unroll_k)
    s[CC].reorder(ko, ki, ci, cj)
    s[CC].unroll(ki)
    s[CC].unroll(ci)
    s[CC].vectorize(cj)
    return s


def conv2d_schedule(dag, layout: str = "NHWC", method: str = "direct", tile_x: int | None = None,
                    tile_o: int | None = None, parallel: bool = True,
                    pack: bool = False) -> Schedule:
    """Conv2d (a DAG from ``tc.ops.conv2d``): padding materialized at root (rows in parallel), an
    accumulator tile of output pixels x output channels computed at the tile loop (cache_write
    local), the reduction outermost inside the tile, the tile's rows unrolled and its vector
    dimension (channels in NHWC, pixels in NCHW) vectorized; output rows in parallel.

    For ``implicit_gemm`` the fused reduction is split at the channel radix so that the im2col
    index arithmetic simplifies to plain loop indices.

    ``pack=True`` re-lays the weight out so that each ``tile_o`` output channels are contiguous
    (a root ``cache_read`` with ``pack``): the stage ``tc.build(..., constants=...)`` runs once.
    """
    s = Schedule(dag)
    C = _output(dag)
    if layout == "NHWC":
        tile_x, tile_o = tile_x or 8, tile_o or 32
    else:
        tile_x, tile_o = tile_x or 28, tile_o or 8
    if pack:  # the weight's output-channel dimension: HWIO's last, OIHW's first
        s.cache_read(dag.inputs[1], "global", [s[C]], pack=(3 if layout == "NHWC" else 0, tile_o))
    pad = next((st.tensor for st in dag.compute_stages if st.name == "pad"), None)
    if pad is not None:
        ph = s[pad].axes
        fused = s[pad].fuse(ph[0], ph[1], ph[2]) if len(ph) == 4 else ph[0]
        if parallel:
            s[pad].parallel(fused)
    CC = s.cache_write(C, "local")
    n, a1, a2, a3 = s[C].axes
    if layout == "NHWC":  # (n, y, x, o): vectorize o, tile x
        tx, to = tile_x, tile_o
        y, x, o = a1, a2, a3
        xo, xi = s[C].split(x, factor=tx)
        oo, oi = s[C].split(o, factor=to)
        s[C].reorder(n, y, xo, oo, xi, oi)
        outer = s[C].fuse(n, y)
        rows, vec = xi, oi
    else:  # NCHW (n, o, y, x): vectorize x, tile o
        tx, to = tile_x, tile_o
        o, y, x = a1, a2, a3
        oo, oi = s[C].split(o, factor=to)
        xo, xi = s[C].split(x, factor=tx)
        s[C].reorder(n, oo, y, xo, oi, xi)
        outer = s[C].fuse(n, oo, y)
        rows, vec = oi, xi
    del rows
    s[C].vectorize(vec)
    if parallel:
        s[C].parallel(outer)
    tile_loop = s[C].loops[-3]
    s[CC].compute_at(s[C], tile_loop)
    cax = s[CC].axes
    red = s[CC].reduce_axes
    if method == "implicit_gemm":
        (rk,) = red
        radix = _gemm_radix(dag, layout)
        rko, rki = s[CC].split(rk, factor=radix)
        red = (rko, rki)
    if layout == "NHWC":
        c_rows, c_vec = cax[2], cax[3]
    else:
        c_rows, c_vec = cax[1], cax[3]
    s[CC].reorder(*red, c_rows, c_vec)
    s[CC].unroll(c_rows)
    s[CC].vectorize(c_vec)
    return s


def _gemm_radix(dag, layout: str) -> int:
    """The extent of the fastest-varying part of the implicit GEMM's fused reduction: channels per
    group in NHWC (``rk % C``), kernel positions in NCHW (``rk % (KH*KW)``)."""
    w = dag.inputs[1].shape
    return w[2] if layout == "NHWC" else w[2] * w[3]


def gpu_matmul_schedule(dag, tile: tuple = (4, 4), threads: tuple = (8, 8), vthreads: tuple = (2, 2),
                        k_tile: int = 8, vector: int = 4) -> Schedule:
    """The classic shared-memory tiled GPU matmul for ``C = A @ B`` (target ``cuda``).

    A block computes a ``vthreads * threads * tile`` tile of C (per dimension) with
    ``threads[0] * threads[1]`` threads (one fused threadIdx.x); each thread accumulates
    ``vthreads`` sub-tiles of ``tile`` elements in registers (cache_write local). For each
    ``k_tile`` slice of the reduction, the slices of A and B the block needs are staged in shared
    memory (cache_read, computed at the reduction-outer loop) by a cooperative fetch: the copy's
    loops fused, split by ``vector`` (vectorized) and by the thread count (bound to threadIdx.x).
    Works for any M, N, K (non-divisible extents are guarded).
    """
    s = Schedule(dag)
    C = _output(dag)
    A, B = dag.inputs[0], dag.inputs[1]
    CC = s.cache_write(C, "local")
    AA = s.cache_read(A, "shared", [s[CC]])
    BB = s.cache_read(B, "shared", [s[CC]])
    (ty_n, tx_n), (vy_n, vx_n), (yi_n, xi_n) = threads, vthreads, tile
    i, j = s[C].axes
    by, i = s[C].split(i, factor=vy_n * ty_n * yi_n)
    bx, j = s[C].split(j, factor=vx_n * tx_n * xi_n)
    vy, i = s[C].split(i, nparts=vy_n)
    vx, j = s[C].split(j, nparts=vx_n)
    ty, yi = s[C].split(i, nparts=ty_n)
    tx, xi = s[C].split(j, nparts=tx_n)
    s[C].reorder(by, bx, vy, vx, ty, tx, yi, xi)
    s[C].bind(by, "blockIdx.y")
    s[C].bind(bx, "blockIdx.x")
    s[C].bind(vy, "vthread")
    s[C].bind(vx, "vthread")
    t = s[C].fuse(ty, tx)
    s[C].bind(t, "threadIdx.x")
    s[CC].compute_at(s[C], t)
    ci, cj = s[CC].axes
    (k,) = s[CC].reduce_axes
    ko, ki = s[CC].split(k, factor=k_tile)
    s[CC].reorder(ko, ki, ci, cj)
    s[CC].unroll(cj)
    n_threads = ty_n * tx_n
    for cache in (AA, BB):
        s[cache].compute_at(s[CC], ko)
        fused = s[cache].fuse(*s[cache].axes)
        outer, vec = s[cache].split(fused, factor=vector)
        _, thread = s[cache].split(outer, factor=n_threads)
        s[cache].bind(thread, "threadIdx.x")
        s[cache].vectorize(vec)
    return s
