"""The schedule a fused group gets when the tuning log has no record for it.

Better than every stage at root: every inlineable stage (padding, bias, activations, index maps)
is inlined into its readers, so a group is one loop nest per remaining stage rather than one per
operator, and each remaining nest runs its outer spatial loops on the thread pool.
"""
from __future__ import annotations

from ..schedule import Schedule

__all__ = ["default_schedule"]

_MIN_PARALLEL = 4  # fuse outer loops until this many parallel iterations


def default_schedule(dag) -> Schedule:
    """Inline what can be inlined; parallelize each root stage's outer spatial loops."""
    s = Schedule(dag)
    for st in dag.compute_stages:
        if st.inlineable:
            s[st.tensor].compute_inline()
    for st in dag.compute_stages:
        if st.inlineable:
            continue
        h = s[st.tensor]
        axes = h.axes
        if len(axes) < 1 or st.op.is_ragged:
            continue
        extents = [a.const_extent for a in st.op.axes]
        take, total = 0, 1
        # leave the innermost axis alone so that it stays a contiguous (vectorizable) loop
        while take < len(axes) - 1 and total < _MIN_PARALLEL:
            total *= extents[take] or 1
            take += 1
        if take == 0:
            continue
        outer = h.fuse(*axes[:take]) if take > 1 else axes[0]
        if total > 1:
            h.parallel(outer)
    return s
