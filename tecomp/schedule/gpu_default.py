"""The default GPU schedule: what ``tc.build(dag, target="cuda")`` runs without a schedule."""
from __future__ import annotations

from ..ir.dag import ComputeDAG
from ..ir.expr import IterKind
from .schedule import Schedule

__all__ = ["default_gpu_schedule", "DEFAULT_THREADS"]

#: threads per block of the default schedule
DEFAULT_THREADS = 256


def default_gpu_schedule(dag: ComputeDAG, threads: int = DEFAULT_THREADS) -> Schedule:
    """A correct, simple GPU schedule of ``dag``.

    Stages that are strictly inlineable (elementwise, no branch, no expensive op: the always-inline
    rule of the sketch search) are inlined. Every other stage fuses its leading constant-extent
    spatial loops into one, splits it by ``threads`` (or its extent when smaller) and binds the
    parts to blockIdx.x and threadIdx.x: one thread per output element (per sparse row for ragged
    outputs), reductions serial in each thread. A stage without such a loop (a scalar result) is
    left unbound; the GPU passes run it as a one-thread launch.

    Parameters
    ----------
    dag : ComputeDAG
    threads : int
        Threads per block (at most 1024).

    Returns
    -------
    Schedule
    """
    if not 1 <= threads <= 1024:
        raise ValueError(f"threads must be in [1, 1024], got {threads}")
    s = Schedule(dag)
    for st in dag.compute_stages:
        if st.strictly_inlineable:
            s[st.tensor].compute_inline()
    for st in dag.compute_stages:
        if st.strictly_inlineable:
            continue
        h = s[st.tensor]
        iters = s.state.stages[h.index].iters
        lead = []
        for it in iters:
            if it.kind is not IterKind.SPATIAL or it.const_extent is None:
                break
            lead.append(it)
        if not lead:
            continue
        loops = h.loops[:len(lead)]
        fused = h.fuse(*loops) if len(loops) > 1 else loops[0]
        total = 1
        for it in lead:
            total *= it.const_extent
        outer, inner = h.split(fused, factor=max(1, min(threads, total)))
        h.bind(outer, "blockIdx.x")
        h.bind(inner, "threadIdx.x")
    return s
