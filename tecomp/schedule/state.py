"""The schedule state: per stage, its loop structure (from split/fuse/reorder/annotate relations),
its compute location, and the ops that cache/rfactor steps introduced.

A :class:`State` is built by replaying a list of steps on a ComputeDAG; it is never edited by hand.
Each stage keeps its *relations* (the loop-structure history) instead of finished iterators, because
the extents of a stage computed at another stage's loop come from bound inference, which runs after
every step; the iterators are re-derived from the relations with those extents.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass

from ..ir import dtype as dt
from ..ir.dag import ComputeDAG
from ..ir.expr import BinOpKind, Const, Expr, IterKind, Var, binary
from ..ir.loop import Scope, ThreadAxis
from ..ir.tensor import PlaceholderOp
from ..ir.traverse import substitute

__all__ = ["Annotation", "ComputeLocation", "Iter", "LoopNest", "StageState", "State",
           "ScheduleError"]


class ScheduleError(ValueError):
    """A step that cannot be applied to the state (illegal or unsupported schedule)."""


class Annotation(enum.Enum):
    """Loop annotations; the values are the record codes (Ansor's numbering)."""
    NONE = 0
    UNROLL = 1
    VECTORIZE = 2
    PARALLEL = 3
    VTHREAD = 4
    BLOCK_X = 5
    THREAD_X = 6
    BLOCK_Y = 7
    THREAD_Y = 8
    BLOCK_Z = 9
    THREAD_Z = 10

    @property
    def thread(self) -> ThreadAxis | None:
        return None if self.value < 4 else ThreadAxis[self.name]


class ComputeLocation(enum.Enum):
    ROOT = "root"
    INLINE = "inline"
    AT = "at"


@dataclass(frozen=True)
class Iter:
    """A loop of a stage: ``var`` runs over ``[0, extent)``; ``extent`` is a constant or an
    expression of the op's root axes (data-dependent loops)."""
    name: str
    var: Var
    extent: Expr
    kind: IterKind
    annotation: Annotation = Annotation.NONE
    pragmas: tuple = ()

    @property
    def const_extent(self) -> int | None:
        return self.extent.value if isinstance(self.extent, Const) else None


@dataclass
class LoopNest:
    """A stage's loops, the values of its root axes in terms of the loop variables, and the guards
    that non-divisible splits need (each an expression of loop variables)."""
    iters: list
    root_values: dict
    guards: list


class StageState:
    """One stage of a state. ``op`` is its current definition (cache steps rewrite it); ``tensor``
    is its identity for readers."""

    def __init__(self, tensor, op):
        self.tensor, self.op = tensor, op
        self.relations: list = []
        self.location = ComputeLocation.ROOT
        self.attach: tuple | None = None  # (target stage index, target iterator index)
        self.scope = Scope.GLOBAL  # where the stage's buffer lives (cache steps set it)
        # per root spatial axis, if attached: (lo expr, extent, may leave the domain below/above)
        self.region: list | None = None
        self.align: dict = {}  # buffer dimension -> (factor, offset) from storage_align
        self._nest: LoopNest | None = None

    @property
    def name(self) -> str:
        return self.op.name

    @property
    def is_placeholder(self) -> bool:
        return isinstance(self.op, PlaceholderOp)

    @property
    def root_axes(self) -> tuple:
        return () if self.is_placeholder else self.op.axes + self.op.reduce_axes

    def copy(self) -> "StageState":
        s = StageState(self.tensor, self.op)
        s.relations, s.location, s.attach = list(self.relations), self.location, self.attach
        s.scope, s.region, s.align = self.scope, self.region, self.align
        # a step never edits a loop nest in place (it builds a new one), so copies share it, and
        # the memo of bound inference with it: neither is derived again for the copy
        s._nest = self._nest
        memo = self.__dict__.get("_region_source")
        if memo is not None:
            s._region_source = memo
        return s

    # ------------------------------------------------------------------ loop structure
    def invalidate(self):
        self._nest = None

    def nest(self) -> LoopNest:
        if self._nest is None:
            self._nest = self._derive()
        return self._nest

    @property
    def iters(self) -> list:
        return [] if self.is_placeholder else self.nest().iters

    def _derive(self) -> LoopNest:
        op = self.op
        iters, values, guards = [], {}, []
        n_spatial = len(op.axes)
        for n, a in enumerate(self.root_axes):
            v = Var(a.name)
            if self.region is not None and n < n_spatial:
                lo, ext, below, above = self.region[n]
                extent = Const(ext, dt.INDEX)
                values[a] = lo + v
                if above:
                    guards.append(binary(BinOpKind.LT, values[a], a.end))
                if below:
                    guards.append(binary(BinOpKind.GE, values[a], a.begin))
            else:
                extent = a.end - a.begin
                values[a] = substitute(a.begin, values) + v
            iters.append(Iter(a.name, v, extent, a.kind))
        nest = LoopNest(iters, values, guards)
        for rel in self.relations:
            rel.replay(self, nest)
        return nest


class State:
    """A DAG under a list of steps. ``stages`` follow the DAG's order, with the stages that cache
    steps add inserted where they belong."""

    def __init__(self, dag: ComputeDAG):
        self.dag = dag
        self.stages = [StageState(s.tensor, s.op) for s in dag.stages]
        self.steps: list = []

    def copy(self) -> "State":
        s = State.__new__(State)
        s.dag, s.steps = self.dag, list(self.steps)
        s.stages = [st.copy() for st in self.stages]
        return s

    def apply(self, step, atomic: bool = True) -> "State":
        """Apply ``step`` (it is appended to ``steps``); returns self. With ``atomic`` a step that
        raises leaves the state as it was; without, the state is unusable after an error (cheaper:
        for replays whose failure discards the state anyway)."""
        from .bounds import infer_bounds
        trial = self.copy() if atomic else self
        step.apply(trial)
        infer_bounds(trial)
        self.stages = trial.stages
        self.steps.append(step)
        return self

    @staticmethod
    def replay(dag: ComputeDAG, steps) -> "State":
        """The state of ``steps`` applied to ``dag``'s default schedule (raises ScheduleError)."""
        st = State(dag)
        for step in steps:
            st.apply(step, atomic=False)
        return st

    # ------------------------------------------------------------------ lookup
    def stage_index(self, key) -> int:
        """Index of a stage given an index, a name, or a tensor."""
        if isinstance(key, int):
            if not 0 <= key < len(self.stages):
                raise ScheduleError(f"stage index {key} out of range")
            return key
        for n, s in enumerate(self.stages):
            if s.tensor is key or s.name == key:
                return n
        name = getattr(key, "name", key)
        raise ScheduleError(f"no stage {name!r} in this schedule")

    def iter_index(self, stage: int, key) -> int:
        """Index of a loop of ``stage`` given an index, a name or an iterator handle."""
        iters = self.stages[stage].iters
        if isinstance(key, int):
            if not 0 <= key < len(iters):
                raise ScheduleError(f"stage '{self.stages[stage].name}' has no loop {key}")
            return key
        name = getattr(key, "name", key)
        for n, it in enumerate(iters):
            if it.name == name:
                return n
        raise ScheduleError(f"stage '{self.stages[stage].name}' has no loop {name!r} "
                            f"(loops: {', '.join(i.name for i in iters)})")

    def readers(self, stage: int) -> list:
        """Indices of stages whose current op reads ``stage``'s tensor."""
        t = self.stages[stage].tensor
        return [n for n, s in enumerate(self.stages)
                if not s.is_placeholder and any(x is t for x in s.op.inputs)]

    def steps_records(self) -> list:
        """The step records (``[code, fields...]``) of this state's steps."""
        return [s.record() for s in self.steps]

    @property
    def key(self) -> str:
        """The de-duplication key: the step records."""
        import json
        return json.dumps(self.steps_records(), separators=(",", ":"))

    def __repr__(self):
        from .printing import state_str
        return state_str(self)
