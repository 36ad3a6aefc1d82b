"""GPU kernels: all threads of all blocks run in lockstep lanes.

Each thread-bound loop nest that is reached outside any other (a *kernel*) gets a lane space: one
lane per (block, thread), blocks outermost, the extent of each thread axis being the largest extent
bound to it in the kernel. Values that differ between lanes are arrays over the lanes; a variable
bound to a thread axis is the lanes' coordinate on it. Local buffers allocated in a kernel get one
copy per lane and shared buffers one per block. Control flow on a lane-varying condition becomes a
mask (a branch no lane takes is skipped), loops with lane-varying bounds run to the largest active
trip count under a mask, loads under a mask read only the active lanes and stores write only them.
A barrier checks that every block is either entirely in or entirely out of the current mask
(``barrier in divergent control flow``); lockstep execution satisfies it otherwise. ``vthread``
loops run as serial loops.
"""
from __future__ import annotations

import numpy as np

from ...ir import dtype as dt
from ...ir.expr import Const
from ...ir.loop import For, ForKind, ThreadAxis
from .errors import InterpError

_BLOCK_AXES = (ThreadAxis.BLOCK_Z, ThreadAxis.BLOCK_Y, ThreadAxis.BLOCK_X)
_THREAD_AXES = (ThreadAxis.THREAD_Z, ThreadAxis.THREAD_Y, ThreadAxis.THREAD_X)


def is_thread_loop(s) -> bool:
    """Whether ``s`` is a loop bound to a block or thread axis (not a ``vthread``)."""
    return (isinstance(s, For) and s.kind is ForKind.THREAD_BOUND
            and s.thread is not ThreadAxis.VTHREAD)


def kernel_axes(s: For) -> dict:
    """The thread axes bound in the kernel rooted at ``s`` -> the largest extent bound to each."""
    axes: dict = {}

    def collect(x, bound):
        if is_thread_loop(x):
            if x.thread in bound:
                raise InterpError(f"thread axis {x.thread.value} bound twice on one path "
                                  f"(loop '{x.var.name}')")
            if not isinstance(x.extent, Const):
                raise InterpError(f"thread-bound loop '{x.var.name}' ({x.thread.value}) needs "
                                  f"a constant extent")
            axes[x.thread] = max(axes.get(x.thread, 0), int(x.extent.value))
            bound = bound | {x.thread}
        for c in x.children():
            collect(c, bound)

    collect(s, frozenset())
    return axes


class Kernel:
    """Lane space of one kernel: the Python names of its per-lane arrays (in :attr:`arrays`)."""

    def __init__(self, idx: int, axes: dict):
        block_axes = [a for a in _BLOCK_AXES if a in axes]
        thread_axes = [a for a in _THREAD_AXES if a in axes]
        self.axes = dict(axes)  # axis -> largest extent
        self.n_blocks = int(np.prod([axes[a] for a in block_axes], dtype=np.int64))
        self.n_threads = int(np.prod([axes[a] for a in thread_axes], dtype=np.int64))
        self.n_lanes = self.n_blocks * self.n_threads
        prefix = f"_k{idx}"
        self.lane, self.blk, self.tid = f"{prefix}_lane", f"{prefix}_blk", f"{prefix}_tid"
        lane = np.arange(self.n_lanes, dtype=np.int64)
        self.arrays = {self.lane: lane, self.blk: lane // self.n_threads,
                       self.tid: lane % max(self.n_threads, 1)}
        self.coord = {}  # axis -> name of the lanes' coordinate on it
        rest = lane.copy()
        for a in reversed(block_axes + thread_axes):  # innermost (threadIdx.x) varies fastest
            name = f"{prefix}_{a.name.lower()}"
            self.arrays[name] = rest % axes[a]
            rest //= axes[a]
            self.coord[a] = name


class KernelGen:
    """Code generation of kernels and their thread-bound loops (a mixin of the generator)."""

    def kernel_root(self, s: For) -> None:
        k = Kernel(self.n_kernels, kernel_axes(s))
        self.n_kernels += 1
        self.ns.update(k.arrays)
        if k.n_lanes == 0:
            return
        saved = (self.lanes, self.kernel, self.varying, self.mask, self.bound_axes, self.lane_shape)
        self.lanes, self.kernel, self.varying, self.mask = True, k, set(self.varying), None
        self.bound_axes, self.lane_shape = set(), f"({k.n_lanes},)"
        try:
            self.bind(s)
        finally:
            (self.lanes, self.kernel, self.varying, self.mask, self.bound_axes,
             self.lane_shape) = saved

    def bind(self, s: For) -> None:
        """A thread-bound loop inside a kernel: its variable is the lanes' coordinate (+ begin)."""
        k = self.kernel
        if s.thread in self.bound_axes:
            raise InterpError(f"thread axis {s.thread.value} bound twice on one path")
        ext = int(s.extent.value)
        self._vmemo = {}
        if self.is_varying(s.begin):
            raise InterpError(f"thread-bound loop '{s.var.name}' has a lane-varying begin")
        v = self.var_name(s.var)
        coord = k.coord[s.thread]
        conv = "" if s.var.dtype is dt.INDEX else f".astype({self.np_type(s.var.dtype)})"
        if isinstance(s.begin, Const) and s.begin.value == 0:
            self.emit(f"{v} = {coord}{conv}")
        else:
            self.emit(f"{v} = ({self.ex(s.begin)} + {coord}){conv}")
        saved = self.mask
        self.set_range(s.var, s.begin, s.extent)
        self.varying.add(s.var)
        self.bound.add(id(s.var))
        self.bound_axes.add(s.thread)
        try:
            if ext < k.axes[s.thread]:
                m = self.fresh("m")
                self.emit(f"{m} = {coord} < {ext}" if saved is None
                          else f"{m} = {saved} & ({coord} < {ext})")
                self.mask = m
                self.emit(f"if {m}.any():")
                self.block(self.stmt, s.body)
            else:
                self.stmt(s.body)
        finally:
            self.mask = saved
            self.varying.discard(s.var)
            self.bound.discard(id(s.var))
            self.bound_axes.discard(s.thread)
            self.ranges.pop(s.var, None)
