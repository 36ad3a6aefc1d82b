"""A kernel called on reshaped views of its arguments.

Why: some layers compute faster on another view of the same bytes. A 1x1, stride-1, unpadded
convolution is one matrix product over the image's pixels: viewed as one row of ``H * W`` pixels
(``tecomp.workloads.networks.FLAT``), its pixel axis tiles and vectorizes across row ends, where
a row of 28, 14 or 7 pixels otherwise leaves a vector tail per row. The kernel is built for the
flat shapes; its callers (a compiled model's buffers, a benchmark's layer inputs) hold arrays of
the layer's own shapes. Reshaping a C-contiguous array is a view, so nothing is copied.
"""
from __future__ import annotations

import math

import numpy as np

from .call_memo import CallMemo
from .target import TargetKind

__all__ = ["ReshapedKernel"]


def _view(a, shape: tuple, what: str):
    """``a`` as an array of ``shape`` without a copy, or ValueError."""
    if tuple(a.shape) == shape:
        return a
    if not isinstance(a, np.ndarray) or not a.flags.c_contiguous:
        raise ValueError(f"{what}: a view of shape {shape} needs a C-contiguous numpy array, "
                         f"got {type(a).__name__} of shape {tuple(a.shape)}")
    if a.size != math.prod(shape):
        raise ValueError(f"{what}: shape {tuple(a.shape)} ({a.size} elements) cannot be viewed "
                         f"as {shape} ({math.prod(shape)} elements)")
    return a.reshape(shape)


class ReshapedKernel:
    """``kernel`` (a :class:`tecomp.Kernel`) called on arrays of other shapes that hold the same
    elements in the same order: each input and output is passed as a view of the shape the
    kernel's DAG gives it, and new outputs come back in ``out_shapes``.

    Parameters
    ----------
    kernel : Kernel
        A CPU kernel built for the viewed shapes.
    out_shapes : sequence of tuple
        The callers' shape of each output, in order.

    Raises
    ------
    ValueError
        On a call, an argument whose element count differs from the kernel's, or one that is not
        C-contiguous (its reshape would be a copy, and an output copy would never be filled).
    """

    def __init__(self, kernel, out_shapes):
        self.kernel = kernel
        self.out_shapes = tuple(tuple(s) for s in out_shapes)
        outs = kernel.dag.outputs
        if len(self.out_shapes) != len(outs):
            raise ValueError(f"ReshapedKernel: {len(self.out_shapes)} output shapes for a kernel "
                             f"of {len(outs)} outputs")
        for shape, t in zip(self.out_shapes, outs):
            if math.prod(shape) != math.prod(t.shape):
                raise ValueError(f"ReshapedKernel: output shape {shape} cannot view the kernel's "
                                 f"{tuple(t.shape)}")
        bound = set(kernel.constant_names)
        self._free = [tuple(t.shape) for t in kernel.dag.inputs if t.name not in bound]
        # the last checked call on the callers' arrays: a loop calling again on the same arrays
        # runs the kernel without making views or checking them again. Right after a kernel
        # that swept megabytes, the interpreter's own objects are out of the caches, and those
        # few microseconds of Python cost 20-40 (a 0.4 ms 1x1 layer ran 7-10% slower than its
        # raw call)
        self._memo = CallMemo()

    def __getattr__(self, name):  # dag, target, source(), loop_ir, ...: the kernel's
        return getattr(self.kernel, name)

    def _inputs(self, inputs) -> list:
        if len(inputs) != len(self._free):
            raise TypeError(f"kernel takes {len(self._free)} inputs, got {len(inputs)}")
        return [_view(np.asarray(a), s, f"input {k}") for k, (a, s) in enumerate(zip(inputs, self._free))]

    def _outputs(self, out) -> list:
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        if len(outs) != len(self.out_shapes):
            raise TypeError(f"kernel writes {len(self.out_shapes)} outputs, got {len(outs)}")
        return [_view(a, tuple(t.shape), f"output {k}")
                for k, (a, t) in enumerate(zip(outs, self.kernel.dag.outputs))]

    def call_inputs(self, inputs) -> list:
        """Of ``inputs`` (one per DAG input), those a call takes (see ``Kernel.call_inputs``)."""
        return self.kernel.call_inputs(inputs)

    def __call__(self, *inputs, out=None):
        if out is not None:
            outs = out if type(out) is tuple else tuple(out) if isinstance(out, list) else (out,)
            run = self._memo.lookup(inputs + outs)
            if run is not None:
                run()
                return out
        views = self._inputs(inputs)
        if out is None:
            res = self.kernel(*views)
            res = res if isinstance(res, tuple) else (res,)
            res = tuple(r.reshape(s) for r, s in zip(res, self.out_shapes))
            return res[0] if len(res) == 1 else res
        outviews = self._outputs(out)
        args = inputs + outs
        if all(type(a) is np.ndarray for a in args) and self.kernel.target.kind is TargetKind.LLVM:
            # checked here once (prepared_call's checks are __call__'s); the runner holds no
            # array, and the memo runs it only on these very arrays, alive and unchanged
            run = self.kernel.prepared_call(views, outviews, keep=False)
            self._memo.remember(args, len(outs), run)
            run()
        else:
            self.kernel(*views, out=outviews)
        return out

    def prepared_call(self, inputs, out):
        """``Kernel.prepared_call`` on the views of ``inputs`` and ``out``."""
        outs = self._outputs(out)
        return self.kernel.prepared_call(self._inputs(list(inputs)),
                                         outs[0] if len(outs) == 1 else outs)
