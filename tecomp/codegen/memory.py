"""A kernel's buffers against this machine's memory: checked at build time, and failed
allocations reported at run time.

A kernel allocates its intermediate buffers itself (from the runtime's scratch cache,
:mod:`.scratch_ir`, or ``aligned_alloc``); one that cannot exist here
(a (2**20, 2**20) float32 intermediate behind a small output: 4 TiB) made the allocation fail and
the kernel write through a null pointer. Such a kernel is refused when it is built, with a
``MemoryError`` naming the buffer and its size. An allocation that fails when the kernel runs
(memory taken by others, a ulimit) skips the code that uses the buffer and sets the kernel's
alloc-failure word (:func:`alloc_flag`); the call then raises ``MemoryError`` naming the buffer.
"""
from __future__ import annotations

import ctypes
import math
import os

import numpy as np
from llvmlite import ir

from ..ir.loop import Allocate, PrimFunc, stmts

__all__ = ["physical_memory", "check_allocations", "heap_buffers", "alloc_flag",
           "failed_allocation", "ALIGN", "aligned_empty", "aligned_copy"]

#: byte alignment of the host arrays tecomp allocates for kernels (a cache line)
ALIGN = 64


def aligned_empty(shape, dtype) -> np.ndarray:
    """An uninitialized C-contiguous array whose data starts on an :data:`ALIGN`-byte boundary.

    numpy's allocator only promises 16 bytes, so a large array may start at any multiple of 16
    modulo 64: a packed weight read with 32-byte vector loads then splits every other load across
    two cache lines, and the same kernel ran up to 20% slower on one copy of its weights than
    on another. Kernel arguments that tecomp allocates (packed weights, outputs, a compiled
    model's buffers, the search's measurement arrays) come from here so that a layer runs at the
    speed the search measured.
    """
    dtype = np.dtype(dtype)
    # math.prod: np.prod cost 3 of the 9.5 microseconds this took (every kernel(x) call's output)
    dims = (shape,) if isinstance(shape, (int, np.integer)) else shape
    n = math.prod(int(d) for d in dims) * dtype.itemsize
    raw = np.empty(n + ALIGN, np.uint8)
    off = -raw.ctypes.data % ALIGN
    return raw[off:off + n].view(dtype).reshape(shape)


def aligned_copy(a) -> np.ndarray:
    """A C-contiguous copy of ``a`` in an :func:`aligned_empty` array."""
    a = np.asarray(a)
    out = aligned_empty(a.shape, a.dtype)
    out[...] = a
    return out


def heap_buffers(func: PrimFunc) -> list:
    """Every buffer ``func`` allocates, in a fixed order: a failed allocation is reported by its
    position here (plus one)."""
    return [s.buffer for s in stmts(func.body) if isinstance(s, Allocate)]


def alloc_flag(module: ir.Module, symbol: str) -> ir.GlobalVariable:
    """The kernel's alloc-failure word (an exported ``i32``, 0 while every allocation succeeds)."""
    name = f"{symbol}_alloc_failed"
    g = module.globals.get(name)
    if g is None:
        g = ir.GlobalVariable(module, ir.IntType(32), name)
        g.initializer = ir.Constant(ir.IntType(32), 0)
        g.align = 4
    return g


class FailedAllocation:
    """The alloc-failure word of a loaded kernel: ``value`` nonzero after a failed call."""

    def __init__(self, address: int):
        self._word = ctypes.c_int32.from_address(address)

    @property
    def value(self) -> int:
        return self._word.value

    def raise_error(self, func: PrimFunc):
        n, self._word.value = self._word.value, 0
        bufs = heap_buffers(func)
        b = bufs[n - 1] if 0 < n <= len(bufs) else None
        what = f"buffer '{b.name}' {b.dtype}{list(b.shape)}" if b is not None else "a buffer"
        raise MemoryError(f"{func.name}: allocating {what} failed when the kernel ran (out of "
                          f"memory); its outputs are incomplete")


def failed_allocation(engine, symbol: str):
    """The alloc-failure word of ``symbol`` in ``engine``, or None when the kernel has none (it
    allocates nothing on the heap)."""
    try:
        addr = engine.get_global_value_address(f"{symbol}_alloc_failed")
    except Exception:  # noqa: BLE001 - an engine that does not know the name
        return None
    return FailedAllocation(addr) if addr else None


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
    sizes, seen = [], set()
    stack = [func.body]
    while stack:
        s = stack.pop()
        if isinstance(s, Allocate) and s.buffer not in seen:
            # a buffer allocated on several paths (the versions of a guarded tile) exists once
            b = s.buffer
            seen.add(b)
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
