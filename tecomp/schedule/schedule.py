"""``tc.Schedule``: hand scheduling, TVM-like. Every call records one step; the step list is the
schedule (replayable, printable as Python, storable as a record)."""
from __future__ import annotations

from ..ir.dag import ComputeDAG
from ..ir.tensor import Tensor
from .compute_steps import (
    CacheReadStep,
    CacheWriteStep,
    ComputeAtStep,
    ComputeInlineStep,
    ComputeRootStep,
)
from .state import Annotation, ScheduleError, State
from .steps import AnnotationStep, FuseStep, PragmaStep, ReorderStep, SplitStep, step_from_record

__all__ = ["Schedule", "StageHandle", "IterHandle"]

_THREADS = {a.thread.value: a for a in Annotation if a.thread is not None}


class IterHandle:
    """A loop of a stage, named as in the printed schedule (``i``, ``i.0``, ``i.0@j.0``)."""

    __slots__ = ("stage", "name")

    def __init__(self, stage: "StageHandle", name: str):
        self.stage, self.name = stage, name

    def __repr__(self):
        return f"<loop {self.name} of {self.stage.name}>"


class StageHandle:
    """``s[tensor]``: the scheduling calls of one stage."""

    def __init__(self, sched: "Schedule", key):
        self._s, self._key = sched, key

    @property
    def index(self) -> int:
        return self._s.state.stage_index(self._key)

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
        return tuple(IterHandle(self, it.name) for it in self._iters() if it.kind.value == "spatial")

    @property
    def reduce_axes(self) -> tuple:
        """The reduction loops, outer to inner."""
        return tuple(IterHandle(self, it.name) for it in self._iters() if it.kind.value == "reduce")

    def _iid(self, it) -> int:
        if isinstance(it, IterHandle) and it.stage.index != self.index:
            raise ScheduleError(f"loop {it.name!r} belongs to stage '{it.stage.name}', not "
                                f"'{self.name}'")
        return self._s.state.iter_index(self.index, it)

    def _new_loops(self, first: int, count: int) -> tuple:
        its = self._iters()[first:first + count]
        return tuple(IterHandle(self, it.name) for it in its)

    def split(self, it, factor: int | None = None, nparts: int | None = None,
              lengths=None, inner_to_outer: bool = True) -> tuple:
        """Split a loop by ``factor`` (inner extent), by ``nparts`` (outer extent), or into several
        loops with ``lengths``. Returns the new loops, outer to inner. Non-divisible extents are
        allowed; the tail iterations are guarded."""
        given = [x is not None for x in (factor, nparts, lengths)]
        if sum(given) != 1:
            raise ScheduleError("split: give exactly one of factor=, nparts=, lengths=")
        if factor is not None:
            lens, i2o = (factor,), True
        elif nparts is not None:
            lens, i2o = (nparts,), False
        else:
            lens, i2o = tuple(lengths), inner_to_outer
        iid = self._iid(it)
        self._s._apply(SplitStep(self.index, iid, lens, i2o))
        return self._new_loops(iid, len(lens) + 1)

    def fuse(self, *its) -> IterHandle:
        """Fuse adjacent loops (given outer to inner) into one."""
        ids = tuple(self._iid(i) for i in its)
        self._s._apply(FuseStep(self.index, ids))
        return self._new_loops(ids[0], 1)[0]

    def reorder(self, *its) -> None:
        """Reorder loops: the given loops take the positions they occupy, in the given order."""
        ids = [self._iid(i) for i in its]
        if len(set(ids)) != len(ids):
            raise ScheduleError("reorder: a loop is given twice")
        order = list(range(len(self._iters())))
        for slot, iid in zip(sorted(ids), ids):
            order[slot] = iid
        self._s._apply(ReorderStep(self.index, tuple(order)))

    def _annotate(self, it, ann: Annotation) -> None:
        self._s._apply(AnnotationStep(self.index, self._iid(it), ann))

    def parallel(self, it) -> None:
        """Run the iterations of the loop on the thread pool."""
        self._annotate(it, Annotation.PARALLEL)

    def vectorize(self, it) -> None:
        """Turn the loop into vector instructions."""
        self._annotate(it, Annotation.VECTORIZE)

    def unroll(self, it) -> None:
        self._annotate(it, Annotation.UNROLL)

    def bind(self, it, thread: str) -> None:
        """Bind the loop to a GPU thread axis (``blockIdx.x`` ... ``threadIdx.z``, ``vthread``)."""
        if thread not in _THREADS:
            raise ScheduleError(f"bind: unknown thread axis {thread!r}; use one of {list(_THREADS)}")
        self._annotate(it, _THREADS[thread])

    def pragma(self, it, name: str, value: int) -> None:
        self._s._apply(PragmaStep(self.index, self._iid(it), name, int(value)))

    def compute_at(self, target: "StageHandle", it) -> None:
        """Compute this stage inside loop ``it`` of ``target`` (TVM semantics)."""
        if not isinstance(target, StageHandle):
            target = self._s[target]
        self._s._apply(ComputeAtStep(self.index, target.index, target._iid(it)))

    def storage_align(self, axis: int, factor: int, offset: int) -> None:
        """Pad the stride of buffer dimension ``axis`` to ``k * factor + offset`` elements."""
        from .compute_steps import StorageAlignStep
        self._s._apply(StorageAlignStep(self.index, int(axis), int(factor), int(offset)))

    def compute_inline(self) -> None:
        self._s._apply(ComputeInlineStep(self.index))

    def compute_root(self) -> None:
        self._s._apply(ComputeRootStep(self.index))

    def __repr__(self):
        return f"<stage {self.name}>"


class Schedule:
    """A schedule of ``dag`` (initially the default: every stage at root, natural loop order)."""

    def __init__(self, dag: ComputeDAG, steps=()):
        if not isinstance(dag, ComputeDAG):
            raise TypeError(f"Schedule expects a ComputeDAG, got {type(dag).__name__}")
        self.dag = dag
        self.state = State(dag)
        for st in steps:
            self._apply(st)

    def _apply(self, step) -> None:
        self.state.apply(step)

    def __getitem__(self, key) -> StageHandle:
        if isinstance(key, StageHandle):
            return key
        self.state.stage_index(key)  # fail early with a clear message
        return StageHandle(self, key)

    @property
    def steps(self) -> list:
        return list(self.state.steps)

    def cache_write(self, tensor, scope: str) -> Tensor:
        """Compute ``tensor`` into a new ``scope`` buffer; returns the cache tensor (a new stage)."""
        sid = self.state.stage_index(_key(tensor))
        self._apply(CacheWriteStep(sid, scope))
        return self.state.stages[sid].tensor

    def cache_read(self, tensor, scope: str, readers, pack=None) -> Tensor:
        """Copy ``tensor`` into a ``scope`` buffer read by ``readers``; returns the cache tensor.
        ``pack=(dim, factor)`` stores the copy packed (see :class:`CacheReadStep`)."""
        sid = self.state.stage_index(_key(tensor))
        rids = tuple(self.state.stage_index(_key(r)) for r in readers)
        self._apply(CacheReadStep(sid, scope, rids, tuple(pack) if pack else ()))
        return self.state.stages[sid + 1].tensor

    def rfactor(self, tensor, loop, factor_axis: int | None = None) -> Tensor:
        """Factor reduction ``loop`` of ``tensor``'s stage out into a new stage of partial results
        (returned), with that loop as a spatial axis at ``factor_axis`` (default: innermost)."""
        from .rfactor import RfactorStep
        h = self[tensor]
        sid = h.index
        n_axes = len(self.state.stages[sid].op.axes)
        pos = n_axes if factor_axis is None else factor_axis
        self._apply(RfactorStep(sid, h._iid(loop), pos))
        return self.state.stages[sid].tensor

    def lower(self):
        """The loop IR of this schedule."""
        from .lower import lower_state
        return lower_state(self.state)

    @property
    def key(self) -> str:
        """The step records as one string: de-duplication and cache key."""
        return self.state.key

    def records(self) -> list:
        return [s.record() for s in self.state.steps]

    @staticmethod
    def from_records(dag: ComputeDAG, records) -> "Schedule":
        return Schedule(dag, [step_from_record(r) for r in records])

    def __str__(self):
        from .printing import steps_python
        return steps_python(self.dag, self.state.steps)

    def __repr__(self):
        return f"<Schedule of {len(self.state.steps)} steps>\n{self.state!r}"


def _key(x):
    if isinstance(x, StageHandle):
        return x._key
    return x
