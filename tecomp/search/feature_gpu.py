"""The GPU figures of a feature row (group ``O_GPU2`` of :mod:`tecomp.search.feature_layout`):
the launch shape around a store and the on-chip memory its kernel allocates."""
from __future__ import annotations

from ..ir.loop import Allocate, ForKind, Scope, Store

__all__ = ["gpu_figures"]


def gpu_figures(st, loops, kernels: dict) -> list:
    """``[threads, blocks, vthreads, shared bytes, local bytes, writes shared, fetch vector
    length]`` of store ``st`` under ``loops`` (``(var, extent, For, data-dependent)`` outermost
    first); ``kernels`` caches the allocation totals per kernel (its outermost bound loop)."""
    threads = blocks = vthreads = 1.0
    root = None
    for _, ext, f, _ in loops:
        if f.kind is not ForKind.THREAD_BOUND:
            continue
        root = root or f
        name = f.thread.value
        if name.startswith("threadIdx"):
            threads *= ext
        elif name.startswith("blockIdx"):
            blocks *= ext
        else:
            vthreads *= ext
    stats = kernels.get(id(root))
    if stats is None:
        shared = local = 0.0
        stack = [root]
        while stack:
            x = stack.pop()
            if isinstance(x, Allocate):
                n = float(x.buffer.alloc_size * x.buffer.dtype.itemsize)
                if x.buffer.scope is Scope.SHARED:
                    shared += n
                elif x.buffer.scope is Scope.LOCAL:
                    local += n
            if not isinstance(x, Store):
                stack.extend(x.children())
        stats = kernels[id(root)] = (shared, local)
    is_shared = st.buffer.scope is Scope.SHARED
    # a cooperative fetch: a store into shared memory; its vector length (1: scalar stores)
    vec = next((ext for _, ext, f, _ in reversed(loops) if f.kind is ForKind.VECTORIZED), 1.0)
    return [threads, blocks, vthreads, stats[0], stats[1], float(is_shared),
            vec if is_shared else 0.0]
