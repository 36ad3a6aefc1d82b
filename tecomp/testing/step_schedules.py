"""Small schedules that together use every step kind; the step and record tests share them."""
from __future__ import annotations

from ..schedule import Schedule
from ..workloads import builders as W
from .contraction_ops import matrix_chain

__all__ = ["matmul_every_loop_step", "conv_compute_locations", "rfactor_and_align",
           "factor_out_chain", "EVERY_STEP_KIND"]


def matmul_every_loop_step():
    """Cache write, split (factor, nparts, lengths), reorder, fuse, parallel, vectorize, unroll,
    compute_at and pragma on a matmul with non-divisible extents."""
    wl = W.matmul(37, 45, 29)
    s = Schedule(wl.dag)
    C = wl.dag.outputs[0]
    CC = s.cache_write(C, "local")
    i, j = s[C].axes
    io, ii = s[C].split(i, factor=8)
    jo, ji = s[C].split(j, nparts=3)
    s[C].reorder(io, jo, ii, ji)
    f = s[C].fuse(io, jo)
    s[C].parallel(f)
    s[C].vectorize(ji)
    s[CC].compute_at(s[C], f)
    ci, cj = s[CC].axes
    (k,) = s[CC].reduce_axes
    k0, k1, k2 = s[CC].split(k, lengths=[2, 3])
    s[CC].reorder(k0, ci, k1, k2, cj)
    s[CC].unroll(k2)
    s[CC].vectorize(cj)
    s[CC].pragma(k0, "auto_unroll_max_step", 16)
    return wl, s


def conv_compute_locations():
    """Padding inlined, back to root, then computed at the conv's rows; weights cache-read."""
    wl = W.conv2d(1, 3, 9, 8, 4, 3, 3, 1, 1, 1, 1, "NCHW", "direct")
    dag = wl.dag
    s = Schedule(dag)
    pad = dag.stage("pad").tensor
    out = dag.outputs[0]
    s[pad].compute_inline()
    s[pad].compute_root()
    s[pad].compute_at(s[out], s[out].axes[2])
    s.cache_read(dag.inputs[1], "global", [s[out]])
    return wl, s


def rfactor_and_align():
    """rfactor of a split reduction, then storage_align on a global cache stage."""
    wl = W.matmul(5, 7, 37)
    s = Schedule(wl.dag)
    C = wl.dag.outputs[0]
    (k,) = s[C].reduce_axes
    ko, ki = s[C].split(k, factor=8)
    rf = s.rfactor(C, ki)
    s[rf].vectorize(s[rf].axes[-1])
    CC = s.cache_write(C, "global")
    s[CC].storage_align(0, 8, 1)
    return wl, s


def factor_out_chain():
    """factor_out of a matrix chain along ``l`` (``A @ B`` first), then a split of the rest."""
    wl = matrix_chain(6, 5, 7, 4)
    s = Schedule(wl.dag)
    D = wl.dag.outputs[0]
    _, rl = s[D].reduce_axes
    AB = s.factor_out(D, rl)
    s[AB].split(s[AB].axes[1], factor=4)
    return wl, s


EVERY_STEP_KIND = [matmul_every_loop_step, conv_compute_locations, rfactor_and_align,
                   factor_out_chain]
