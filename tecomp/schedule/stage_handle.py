"""``s[tensor]``: the scheduling calls of one stage (loop splits, fusion, order, annotations,
compute location), each recording one step in its :class:`~tecomp.schedule.schedule.Schedule`.

The examples assume a matmul ``C`` of a DAG ``dag`` and ``s = tc.Schedule(dag)``.
"""
from __future__ import annotations

from ..ir.expr import IterKind
from .compute_steps import ComputeAtStep, ComputeInlineStep, ComputeRootStep, StorageAlignStep
from .state import Annotation, ScheduleError
from .steps import AnnotationStep, FuseStep, PragmaStep, ReorderStep, SplitStep

__all__ = ["StageHandle", "IterHandle"]

_THREADS = {a.thread.value: a for a in Annotation if a.thread is not None}


class IterHandle:
    """A loop of a stage, named as in the printed schedule (``i``, ``i.0``, ``i.0@j.0``)."""

    __slots__ = ("stage", "name")

    def __init__(self, stage: "StageHandle", name: str):
        self.stage, self.name = stage, name

    def __repr__(self):
        return f"<loop {self.name} of {self.stage.name}>"


class StageHandle:
    """``s[tensor]``: the scheduling calls of one stage.

    ``ref`` is what the handle was made from (a tensor or a stage name); the handle follows the
    stage when steps insert stages before it.
    """

    def __init__(self, sched, ref):
        self._s, self.ref = sched, ref  # sched: the Schedule (schedule.py imports this module)

    @property
    def index(self) -> int:
        """The stage's position in the schedule's current state."""
        return self._s.state.stage_index(self.ref)

    @property
    def name(self) -> str:
        return self._s.state.stages[self.index].name

    def _iters(self):
        return self._s.state.stages[self.index].iters

    @property
    def loops(self) -> tuple:
        """All loops of the stage, outer to inner."""
        return tuple(IterHandle(self, it.name) for it in self._iters())

    @property
    def axes(self) -> tuple:
        """The spatial loops, outer to inner."""
        return tuple(IterHandle(self, it.name) for it in self._iters()
                     if it.kind is IterKind.SPATIAL)

    @property
    def reduce_axes(self) -> tuple:
        """The reduction loops, outer to inner."""
        return tuple(IterHandle(self, it.name) for it in self._iters()
                     if it.kind is IterKind.REDUCE)

    def loop_index(self, it) -> int:
        """The position of loop ``it`` (an :class:`IterHandle` of this stage or a loop name)."""
        if isinstance(it, IterHandle) and it.stage.index != self.index:
            raise ScheduleError(f"loop {it.name!r} belongs to stage '{it.stage.name}', not "
                                f"'{self.name}'")
        return self._s.state.iter_index(self.index, it)

    def _new_loops(self, first: int, count: int) -> tuple:
        its = self._iters()[first:first + count]
        return tuple(IterHandle(self, it.name) for it in its)

    def split(self, it, factor: int | None = None, nparts: int | None = None,
              lengths=None, inner_to_outer: bool = True) -> tuple:
        """Split a loop into two or more; non-divisible extents are allowed (the tail is guarded).

        Parameters
        ----------
        it : IterHandle or str
            The loop to split.
        factor, nparts, lengths : int, int, sequence of int
            Exactly one: the inner extent, the outer extent, or the extents of several loops
            (inner ones with ``inner_to_outer``, the outermost taking the rest; else outer ones).
        inner_to_outer : bool
            How ``lengths`` is read.

        Returns
        -------
        tuple of IterHandle
            The new loops, outer to inner.

        Examples
        --------
        >>> i, j = s[C].axes
        >>> io, ii = s[C].split(i, factor=32)
        >>> jo, jm, ji = s[C].split(j, lengths=(4, 16))
        """
        given = [x is not None for x in (factor, nparts, lengths)]
        if sum(given) != 1:
            raise ScheduleError("split: give exactly one of factor=, nparts=, lengths=")
        if factor is not None:
            lens, i2o = (factor,), True
        elif nparts is not None:
            lens, i2o = (nparts,), False
        else:
            lens, i2o = tuple(lengths), inner_to_outer
        iid = self.loop_index(it)
        self._s.apply_step(SplitStep(self.index, iid, lens, i2o))
        return self._new_loops(iid, len(lens) + 1)

    def fuse(self, *its) -> IterHandle:
        """Fuse adjacent loops into one.

        Parameters
        ----------
        *its : IterHandle or str
            Adjacent loops, outer to inner.

        Returns
        -------
        IterHandle
            The fused loop.

        Examples
        --------
        >>> ij = s[C].fuse(*s[C].axes)
        """
        ids = tuple(self.loop_index(i) for i in its)
        self._s.apply_step(FuseStep(self.index, ids))
        return self._new_loops(ids[0], 1)[0]

    def reorder(self, *its) -> None:
        """Reorder loops: the given loops take the positions they occupy, in the given order.

        Parameters
        ----------
        *its : IterHandle or str
            Loops of this stage, in their new order; loops not given keep their place.

        Examples
        --------
        >>> i, j = s[C].axes; (k,) = s[C].reduce_axes
        >>> s[C].reorder(k, i, j)
        """
        ids = [self.loop_index(i) for i in its]
        if len(set(ids)) != len(ids):
            raise ScheduleError("reorder: a loop is given twice")
        order = list(range(len(self._iters())))
        for slot, iid in zip(sorted(ids), ids):
            order[slot] = iid
        self._s.apply_step(ReorderStep(self.index, tuple(order)))

    def _annotate(self, it, ann: Annotation) -> None:
        self._s.apply_step(AnnotationStep(self.index, self.loop_index(it), ann))

    def parallel(self, it) -> None:
        """Run the iterations of loop ``it`` on the CPU thread pool.

        Parameters
        ----------
        it : IterHandle or str
            Usually the outermost loop of a root stage.

        Examples
        --------
        >>> s[C].parallel(s[C].axes[0])
        """
        self._annotate(it, Annotation.PARALLEL)

    def vectorize(self, it) -> None:
        """Turn loop ``it`` (innermost, of constant extent) into vector instructions.

        Parameters
        ----------
        it : IterHandle or str

        Examples
        --------
        >>> io, ii = s[C].split(s[C].axes[1], factor=8)
        >>> s[C].vectorize(ii)
        """
        self._annotate(it, Annotation.VECTORIZE)

    def unroll(self, it) -> None:
        """Unroll loop ``it`` (of constant extent) in the generated code.

        Parameters
        ----------
        it : IterHandle or str

        Examples
        --------
        >>> s[C].unroll(s[C].reduce_axes[0])
        """
        self._annotate(it, Annotation.UNROLL)

    def bind(self, it, thread: str) -> None:
        """Bind loop ``it`` to a GPU thread axis (cuda target).

        Parameters
        ----------
        it : IterHandle or str
        thread : str
            ``"blockIdx.x"`` ... ``"blockIdx.z"``, ``"threadIdx.x"`` ... ``"threadIdx.z"`` or
            ``"vthread"``. A block or thread axis binds at most one loop of a stage (a stage
            computed inside another stage's thread loop may bind that axis again: a cooperative
            fetch shares the block's threads).

        Examples
        --------
        >>> bx, tx = s[C].split(s[C].fuse(*s[C].axes), factor=256)
        >>> s[C].bind(bx, "blockIdx.x"); s[C].bind(tx, "threadIdx.x")
        """
        if thread not in _THREADS:
            raise ScheduleError(f"bind: unknown thread axis {thread!r}; use one of {list(_THREADS)}")
        ann, iid = _THREADS[thread], self.loop_index(it)
        other = next((x.name for n, x in enumerate(self._iters())
                      if n != iid and x.annotation is ann), None)
        if other is not None and ann is not Annotation.VTHREAD:
            raise ScheduleError(f"bind: stage '{self.name}' has loop {other!r} bound to {thread} "
                                f"already; loop {self._iters()[iid].name!r} cannot be bound to it "
                                f"too (one loop nest cannot bind a GPU axis twice)")
        self._annotate(it, ann)

    def pragma(self, it, name: str, value: int) -> None:
        """Attach a pragma to loop ``it`` (e.g. ``"auto_unroll_max_step"``, the parallel chunk).

        Parameters
        ----------
        it : IterHandle or str
        name : str
            The pragma's name, as the lowering reads it.
        value : int

        Examples
        --------
        >>> s[C].pragma(s[C].axes[0], "auto_unroll_max_step", 64)
        """
        self._s.apply_step(PragmaStep(self.index, self.loop_index(it), name, int(value)))

    def compute_at(self, target: "StageHandle", it) -> None:
        """Compute this stage inside loop ``it`` of ``target`` (TVM semantics): its region comes
        from bound inference, in a buffer of that region's size.

        Parameters
        ----------
        target : StageHandle or Tensor
            A consumer of this stage.
        it : IterHandle or str
            A loop of ``target``.

        Examples
        --------
        >>> CC = s.cache_write(C, "local")
        >>> s[CC].compute_at(s[C], s[C].axes[0])
        """
        if not isinstance(target, StageHandle):
            target = self._s[target]
        self._s.apply_step(ComputeAtStep(self.index, target.index, target.loop_index(it)))

    def storage_align(self, axis: int, factor: int, offset: int) -> None:
        """Pad the stride of buffer dimension ``axis`` to ``k * factor + offset`` elements
        (against shared-memory bank conflicts).

        Parameters
        ----------
        axis : int
            A dimension of this stage's buffer (not the last).
        factor, offset : int

        Examples
        --------
        >>> s[AS].storage_align(0, 32, 1)   # doctest: +SKIP
        """
        self._s.apply_step(StorageAlignStep(self.index, int(axis), int(factor), int(offset)))

    def compute_inline(self) -> None:
        """Substitute this stage's expression into its readers (no buffer, no loops of its own).

        Examples
        --------
        >>> s[D].compute_inline()   # doctest: +SKIP
        """
        self._s.apply_step(ComputeInlineStep(self.index))

    def compute_root(self) -> None:
        """Compute this stage at the top level again (undo ``compute_at`` / ``compute_inline``).

        Examples
        --------
        >>> s[CC].compute_root()   # doctest: +SKIP
        """
        self._s.apply_step(ComputeRootStep(self.index))

    def __repr__(self):
        return f"<stage {self.name}>"
