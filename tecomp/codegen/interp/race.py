"""The shared-memory race check of GPU kernels.

Lockstep execution would hide a missing barrier, so shared buffers are checked for races: between
two barriers, a thread may not read an element that another thread wrote, nor write one that
another thread read (InterpError ``shared memory race``).
"""
from __future__ import annotations

import numpy as np

from .errors import InterpError


class Race:
    """Shared-memory hazard tracking of one shared buffer between barriers.

    Every access records, per element, the smallest and largest thread (within its block) that
    wrote or read it since the last barrier. A read of an element that one other thread wrote, or a
    write of an element that another thread read, raises InterpError. (Several threads writing one
    element, as redundant stores do, are not reported.) Elements of different blocks are different
    elements of the storage (its last axis is the block)."""

    _NONE = np.iinfo(np.int32).max

    def __init__(self, name, shape, tid):
        n = int(np.prod(shape, dtype=np.int64))
        self.name, self.shape, self.tid = name, shape, tid.astype(np.int32)
        self.strides = [int(np.prod(shape[d + 1:], dtype=np.int64)) for d in range(len(shape))]
        self.lo = {w: np.full(n, self._NONE, np.int32) for w in (False, True)}
        self.hi = {w: np.full(n, -1, np.int32) for w in (False, True)}
        self.used = {False: False, True: False}

    def barrier(self):
        for w in (False, True):
            if self.used[w]:
                self.lo[w].fill(self._NONE)
                self.hi[w].fill(-1)
                self.used[w] = False

    def access(self, idx, sel, write):
        """``idx`` indexes the storage for the lanes (``sel``: the active lanes' numbers, a mask
        of them, or None when all lanes are active)."""
        flat = 0
        for i, stride in zip(idx, self.strides):
            flat = flat + i * stride
        tid = self.tid
        if sel is not None:
            if sel.dtype == bool:
                sel = np.flatnonzero(sel)
            tid = tid[sel]
            if flat.shape != tid.shape:
                flat = flat[sel]
        other = not write  # the opposite kind of access is the hazard
        if self.used[other]:
            lo_o, hi_o = self.lo[other][flat], self.hi[other][flat]
            if write:  # WAR: any other thread read it
                bad = (hi_o >= 0) & ((lo_o != tid) | (hi_o != tid))
            else:      # RAW: exactly one writer, another thread
                bad = (lo_o == hi_o) & (lo_o != tid)
            if bad.any():
                j = int(np.flatnonzero(bad)[0])
                elem = np.unravel_index(int(flat[j]), self.shape)
                who = int(lo_o[j]) if lo_o[j] != tid[j] else int(hi_o[j])
                what = (f"thread {int(tid[j])} writes an element that thread {who} read" if write
                        else f"thread {int(tid[j])} reads an element that thread {who} wrote")
                raise InterpError(f"shared memory race on '{self.name}' (element "
                                  f"{tuple(int(x) for x in elem[:-1])} of block {int(elem[-1])}): "
                                  f"{what} with no barrier in between")
        np.minimum.at(self.lo[write], flat, tid)
        np.maximum.at(self.hi[write], flat, tid)
        self.used[write] = True
