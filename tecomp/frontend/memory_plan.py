"""Where a compiled model's intermediate values live: one arena, with byte offsets planned from the
values' live ranges, so that values whose ranges do not overlap share memory whatever their shapes.

Why one packed arena rather than a buffer per shape: a network's call touches every buffer it
owns once, and a smaller footprint leaves more of the last-level cache to the weights and to the
value the next layer reads. MobileNet-V2 needs 20 MB with a buffer per distinct shape and 6 MB
planned by range; the model ran 9% faster (``docs/search_notes.md``, "Memory plan").

The plan is a pure function of the steps, so an exported model planned again at load gets the
same one, and a manifest whose slots already share (one slot written by several steps) is still
planned safely: a slot's range covers every step that touches it.
"""
from __future__ import annotations

import numpy as np

from ..codegen.memory import ALIGN, aligned_empty

__all__ = ["ALIGN", "live_ranges", "plan_offsets", "allocate"]



def live_ranges(n_slots: int, steps, pinned) -> list:
    """``[(first step, last step)]`` per slot, the steps that write or read it (inclusive), or
    None for a slot no step touches or one in ``pinned`` (the caller's inputs and the per-call
    outputs, which live outside the arena)."""
    ranges: list = [None] * n_slots
    for k, st in enumerate(steps):
        for s in (*st.args, st.out):
            if s in pinned:
                continue
            r = ranges[s]
            ranges[s] = (k, k) if r is None else (min(r[0], k), max(r[1], k))
    return ranges


def plan_offsets(sizes, ranges, align: int = ALIGN) -> tuple:
    """Byte offsets for values of ``sizes`` live over ``ranges`` (None: not placed): two values
    overlap in memory only if their ranges are disjoint. Largest first, each at the lowest offset
    that fits beside the placed values it is live with (the greedy best-fit of TFLite's and ONNX
    Runtime's planners). Returns ``(offsets, total bytes)``; an unplaced value's offset is None.
    """
    order = sorted((v for v, r in enumerate(ranges) if r is not None), key=lambda v: -sizes[v])
    offsets: list = [None] * len(sizes)
    placed: list = []  # (offset, end, first, last)
    total = 0
    for v in order:
        first, last = ranges[v]
        size = -(-max(sizes[v], 1) // align) * align
        busy = sorted((o, e) for o, e, f, la in placed if not (la < first or last < f))
        at = 0
        for o, e in busy:
            if at + size <= o:
                break
            at = max(at, e)
        offsets[v] = at
        placed.append((at, at + size, first, last))
        total = max(total, at + size)
    return offsets, total


def allocate(specs, ranges) -> list:
    """Arrays of ``specs`` (``(shape, dtype)`` per slot) laid out in one arena by
    :func:`plan_offsets`; None for the slots ``ranges`` leaves out."""
    sizes = [int(np.prod(s, dtype=np.int64)) * np.dtype(d).itemsize for s, d in specs]
    offsets, total = plan_offsets(sizes, ranges)
    raw = aligned_empty((total,), np.uint8)
    return [None if o is None else
            raw[o:o + n].view(d).reshape(s)
            for o, n, (s, d) in zip(offsets, sizes, specs)]
