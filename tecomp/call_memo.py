"""The arguments of a kernel's last checked call, so that a loop calling it again on the very
same arrays (``kernel(x, out=y)`` in a loop, a benchmark, a layer-by-layer pipeline) skips the
checks that cannot have changed their answer.

The full checks (types, shapes, dtypes, contiguity, writeable outputs, no overlap between
outputs and inputs) cost about 4 microseconds a call, a fifth of a 20-microsecond kernel
(a small depthwise layer). A numpy array's data never moves, so an argument that is the same
object as last time, still alive, with the same shape, dtype object and flags, passes them
again; only index data (a sparse kernel's indices, which the caller may rewrite in place) is
validated on every call, by the caller.

With the record goes the call itself, its addresses taken once (``CompiledCPU.bind`` without
keeping the arrays): ``kernel(x, out=y)`` on the same arrays then costs about 1.4 microseconds
in all (Zen 4), where converting the arguments to addresses again made it 2.1.

An argument that is another ndarray object over the same memory (same data address, shape,
dtype and flags: a fresh view, as :class:`tecomp.ReshapedKernel` makes on every call) matches
too. Every check's answer depends only on those (overlap on the addresses and sizes), and the
runner uses only the addresses; without this, a reshaped kernel paid the full checks, 50-80
microseconds a call on the Zen 1, on every call.
"""
from __future__ import annotations

import weakref

__all__ = ["CallMemo"]


def _address(a) -> int:
    return a.__array_interface__["data"][0]


class CallMemo:
    """One kernel's last checked call: per argument a weak reference, its type, data address,
    shape and dtype and whether it must be writeable (an output), and a zero-argument callable
    that runs the kernel on those arrays. Swapped whole, so concurrent callers never see half of
    one call's record."""

    __slots__ = ("_entry",)

    def __init__(self):
        self._entry = None

    def remember(self, args, n_out: int, run) -> None:
        """Record ``args`` (the inputs, then the ``n_out`` outputs), which passed every check, and
        ``run``, which runs the kernel on them. ``run`` must not hold the arrays (the record
        must not keep a caller's arrays alive), only what it needs to run on them while they
        live."""
        n_in = len(args) - n_out
        self._entry = (tuple((weakref.ref(a), type(a), _address(a), a.shape, a.dtype, k >= n_in)
                             for k, a in enumerate(args)), run)

    def lookup(self, args):
        """The remembered call's runner if ``args`` are its very arrays, or arrays of the same
        type over the same memory, unchanged in shape, dtype, contiguity and (outputs)
        writeability; else None."""
        entry = self._entry
        if entry is None:
            return None
        record, run = entry
        if len(args) != len(record):
            return None
        for a, (ref, kind, address, shape, dtype, is_out) in zip(args, record):
            if ref() is not a and (type(a) is not kind or _address(a) != address):
                return None
            if a.shape != shape or a.dtype is not dtype:
                return None
            flags = a.flags
            if not flags.c_contiguous or (is_out and not flags.writeable):
                return None
        return run
