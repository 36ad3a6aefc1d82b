"""Build-time check of a kernel's buffers against this machine's memory.

A kernel allocates its intermediate buffers itself (``aligned_alloc``); one that cannot exist here
(a (2**20, 2**20) float32 intermediate behind a small output: 4 TiB) made the allocation fail and
the kernel write through a null pointer. Such a kernel is refused when it is built, with a
``MemoryError`` naming the buffer and its size.
"""
from __future__ import annotations

import os

from ..ir.loop import Allocate, PrimFunc

__all__ = ["physical_memory", "check_allocations"]


def physical_memory() -> int | None:
    """Bytes of physical memory of this machine (None when the platform does not say)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def check_allocations(func: PrimFunc, limit: int | None = None) -> None:
    """Raise ``MemoryError`` when the buffers ``func`` allocates with constant sizes, together,
    need more than ``limit`` bytes (default: this machine's physical memory)."""
    limit = physical_memory() if limit is None else limit
    if limit is None:
        return
    sizes = []
    stack = [func.body]
    while stack:
        s = stack.pop()
        if isinstance(s, Allocate):
            b = s.buffer
            if all(isinstance(d, int) for d in b.shape):
                sizes.append((b.alloc_size * b.dtype.itemsize, b))
        stack.extend(s.children())
    total = sum(n for n, _ in sizes)
    if total > limit:
        n, b = max(sizes, key=lambda x: x[0])
        raise MemoryError(f"{func.name}: buffer '{b.name}' {b.dtype}{list(b.shape)} needs "
                          f"{n / 2**30:.4g} GiB ({n} bytes), and the kernel's buffers "
                          f"{total / 2**30:.4g} GiB in all, more than this machine's "
                          f"{limit / 2**30:.4g} GiB of memory; compute it in smaller parts or "
                          f"inline it (compute_inline)")
