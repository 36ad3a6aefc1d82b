"""Schedule steps. Each kind is one frozen dataclass that applies itself to a State, writes and reads
its record (``[code, fields...]``, stage and loop ids positional at that point of the replay), and
prints as the ``tc.Schedule`` call that makes it.

Loop-structure steps (split, fuse, reorder, annotation, pragma) are also the stage's *relations*:
``replay`` re-derives the stage's loops from its root extents, which bound inference may change.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

from ..ir import dtype as dt
from ..ir.expr import BinOpKind, Const, IterKind, Var, binary
from ..ir.loop import PRAGMA_PARALLEL_CHUNK, PRAGMA_PARALLEL_SCHEDULE, ParallelSchedule
from ..ir.traverse import substitute
from .state import Annotation, ComputeLocation, Iter, LoopNest, ScheduleError, State

__all__ = ["Step", "SplitStep", "FuseStep", "ReorderStep", "AnnotationStep", "PragmaStep",
           "step_from_record", "STEP_KINDS", "register_step", "checked_stage", "checked_iter",
           "stage_repr", "iter_repr"]

STEP_KINDS: dict = {}


def register_step(cls):
    """Class decorator of a step kind: enters it in :data:`STEP_KINDS` under its ``code``, so that
    records of that code replay through it (docs/ARCHITECTURE.md: adding a step kind)."""
    STEP_KINDS[cls.code] = cls
    return cls


class Step:
    code: ClassVar[str] = ""

    def apply(self, state: State) -> None:
        raise NotImplementedError

    def record(self) -> list:
        out = [self.code]
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            out.append(v.value if isinstance(v, Annotation) else list(v) if isinstance(v, tuple) else v)
        return out

    @classmethod
    def from_record(cls, rec: list) -> "Step":
        fields = dataclasses.fields(cls)
        if len(rec) != len(fields) + 1:
            raise ValueError(f"record {rec!r}: a {cls.__name__} has {len(fields)} fields")
        vals = []
        for f, v in zip(fields, rec[1:]):
            if f.type in ("Annotation",):
                v = Annotation(v)
            elif isinstance(v, list):
                v = tuple(v)
            vals.append(v)
        return cls(*vals)

    def python(self, state: State) -> str:
        """The ``tc.Schedule`` call that makes this step, given the state before it."""
        raise NotImplementedError

    # loop-structure steps override these
    def replay(self, stage, nest: LoopNest) -> None:
        raise NotImplementedError

    def remap(self, pos: int) -> int:
        """Where the loop at position ``pos`` is after this step (a split loop: its innermost part;
        a fused group: the fused loop)."""
        return pos


def step_from_record(rec: list) -> Step:
    if not rec or rec[0] not in STEP_KINDS:
        raise ValueError(f"unknown step record {rec!r}")
    return STEP_KINDS[rec[0]].from_record(rec)


def checked_stage(state: State, sid: int, what: str):
    """``state.stages[sid]``, or a :class:`ScheduleError` naming ``what`` when ``sid`` is out of
    range or names an input (placeholder); every step's ``apply`` starts here."""
    if not 0 <= sid < len(state.stages):
        raise ScheduleError(f"{what}: stage {sid} out of range")
    s = state.stages[sid]
    if s.is_placeholder:
        raise ScheduleError(f"{what}: '{s.name}' is an input; it has no loops to schedule")
    if s.location is ComputeLocation.INLINE:
        raise ScheduleError(f"{what}: '{s.name}' is inlined; it has no loops of its own")
    return s


def checked_iter(stage, iid: int, what: str) -> Iter:
    """Loop ``iid`` of ``stage``, or a :class:`ScheduleError` naming ``what``."""
    iters = stage.iters
    if not 0 <= iid < len(iters):
        raise ScheduleError(f"{what}: stage '{stage.name}' has no loop {iid} "
                            f"(it has {len(iters)})")
    return iters[iid]


def stage_repr(state, sid):
    """The stage's name quoted, as a step's ``python()`` prints it."""
    return repr(state.stages[sid].name)


def iter_repr(state, sid, iid):
    """The loop's name quoted, as a step's ``python()`` prints it."""
    return repr(state.stages[sid].iters[iid].name)


def _relation(state: State, sid: int, step: Step) -> None:
    """Apply a loop-structure step: validate by replaying it on the current loops, then keep it."""
    s = state.stages[sid]
    nest = s.nest()
    trial = LoopNest(list(nest.iters), dict(nest.root_values), list(nest.guards))
    step.replay(s, trial)
    _check_order(s, trial)
    s.relations.append(step)
    s._nest = trial  # the replay above is exactly the new loop structure
    # stages attached to this one follow their loop to its new place; their loops are re-derived
    # only if bound inference (after every step) finds their region changed: an annotation of
    # the consumer changes none, and re-deriving a tiled producer replays all its splits
    for other in state.stages:
        if other.attach is not None and other.attach[0] == sid:
            other.attach = (sid, step.remap(other.attach[1]))


def _check_order(stage, nest: LoopNest) -> None:
    """A loop whose extent depends on other loops (sparse rows) must sit inside them."""
    bound = set()
    # only this stage's own loops can be misplaced; other free variables are the attach point's
    # region offsets (a stage computed at a consumer's loop), fixed outside every loop here
    own = {it.var for it in nest.iters}
    for it in nest.iters:
        if it.const_extent is None:
            ext = substitute(it.extent, nest.root_values)
            from ..ir.traverse import free_vars
            for v in free_vars(ext):
                if v in own and v not in bound:
                    raise ScheduleError(f"stage '{stage.name}': loop '{it.name}' has a data-dependent "
                                        f"extent that needs loop '{v.name}' outside it")
        bound.add(it.var)


def _subst(e, m: dict):
    """``substitute(e, m)`` for a map of loop variables, without its per-node callback: a split or
    fuse rewrites every root value and guard of the stage, and most do not use the loop. Nodes
    without a mapped variable are returned as they are (so are their parents), as substitute does;
    no ``simplify`` after it: rebuilt nodes are folded by their constructors, and simplify returns
    an expression whose nodes did not change as it is."""
    if isinstance(e, Var):
        r = m.get(e)
        return e if r is None else r
    ch = e.children()
    if not ch:
        return e
    new = [_subst(c, m) for c in ch]
    for a, b in zip(new, ch):
        if a is not b:
            return e.with_children(tuple(new))
    return e


def _substitute_nest(nest: LoopNest, m: dict) -> None:
    values = nest.root_values
    for a, v in values.items():
        values[a] = _subst(v, m)
    nest.guards[:] = [_subst(g, m) for g in nest.guards]


def _clamp(lengths: tuple, extent: int | None, inner_to_outer: bool) -> tuple:
    """Lengths no larger than what the extent leaves for them (a split of 10 by 32 makes loops of
    1 and 10, not 1 and 32): a stage computed at a small region keeps its tiling without idle
    iterations."""
    if extent is None:
        return lengths
    out, rem = [], extent
    for x in (reversed(lengths) if inner_to_outer else lengths):
        x = max(1, min(x, rem))
        out.append(x)
        rem = -(-rem // x)
    return tuple(reversed(out)) if inner_to_outer else tuple(out)


def _ceildiv(e, f: int):
    if isinstance(e, Const):
        return Const(-(-e.value // f), dt.INDEX)
    return binary(BinOpKind.FLOORDIV, e + (f - 1), f)


# ----------------------------------------------------------------------------- loop structure

@register_step
@dataclass(frozen=True)
class SplitStep(Step):
    """Split loop ``iter_id`` into ``len(lengths) + 1`` loops. With ``inner_to_outer`` the lengths
    are the extents of the inner loops (the outermost takes the rest); otherwise of the outer loops.
    Non-divisible extents are allowed: the tail is guarded."""
    code: ClassVar[str] = "SP"
    stage_id: int
    iter_id: int
    lengths: tuple
    inner_to_outer: bool = True

    def apply(self, state):
        s = checked_stage(state, self.stage_id, "split")
        it = checked_iter(s, self.iter_id, "split")
        if not self.lengths or any(not isinstance(x, int) or x < 1 for x in self.lengths):
            raise ScheduleError(f"split of '{it.name}': lengths must be positive ints, "
                                f"got {list(self.lengths)}")
        _relation(state, self.stage_id, self)

    def replay(self, stage, nest):
        it = nest.iters[self.iter_id]
        lengths = _clamp(self.lengths, it.const_extent, self.inner_to_outer)
        prod = 1
        for x in lengths:
            prod *= x
        rest = _ceildiv(it.extent, prod)
        exts = [rest] + [Const(x, dt.INDEX) for x in lengths] if self.inner_to_outer \
            else [Const(x, dt.INDEX) for x in lengths] + [rest]
        new = [Iter(f"{it.name}.{n}", Var(f"{it.name}.{n}"), e, it.kind) for n, e in enumerate(exts)]
        # extents may be expressions of root axes (data-dependent); in the value of the old loop
        # they must be in terms of loop variables like every root value
        lexts = [substitute(e, nest.root_values) for e in exts]
        value = new[0].var
        for n in range(1, len(new)):
            value = value * lexts[n] + new[n].var
        m = {it.var: value}
        _substitute_nest(nest, m)
        total = 1
        for e in exts:
            total = None if total is None or not isinstance(e, Const) else total * e.value
        if it.const_extent is None or total != it.const_extent:
            nest.guards.append(binary(BinOpKind.LT, value, it.extent))
        nest.iters[self.iter_id:self.iter_id + 1] = new

    def remap(self, pos):
        return pos + len(self.lengths) if pos >= self.iter_id else pos

    def python(self, state):
        s, i = stage_repr(state, self.stage_id), iter_repr(state, self.stage_id, self.iter_id)
        if len(self.lengths) == 1:
            kw = "factor" if self.inner_to_outer else "nparts"
            return f"s[{s}].split({i}, {kw}={self.lengths[0]})"
        return (f"s[{s}].split({i}, lengths={list(self.lengths)}"
                f"{'' if self.inner_to_outer else ', inner_to_outer=False'})")


@register_step
@dataclass(frozen=True)
class FuseStep(Step):
    """Fuse adjacent loops (outer to inner) into one."""
    code: ClassVar[str] = "FU"
    stage_id: int
    iter_ids: tuple

    def apply(self, state):
        s = checked_stage(state, self.stage_id, "fuse")
        ids = list(self.iter_ids)
        its = [checked_iter(s, i, "fuse") for i in ids]
        if len(ids) < 2 or ids != list(range(ids[0], ids[0] + len(ids))):
            raise ScheduleError(f"fuse on '{s.name}': loops {[i.name for i in its]} are not "
                                f"adjacent (positions {ids}); reorder them first")
        if any(i.const_extent is None for i in its):
            raise ScheduleError(f"fuse on '{s.name}': cannot fuse a data-dependent loop")
        if len({i.kind for i in its}) != 1:
            raise ScheduleError(f"fuse on '{s.name}': cannot fuse spatial and reduction loops")
        _relation(state, self.stage_id, self)

    def replay(self, stage, nest):
        ids = list(self.iter_ids)
        its = [nest.iters[i] for i in ids]
        exts = [i.const_extent for i in its]
        total = 1
        for e in exts:
            total *= e
        name = "@".join(i.name for i in its)
        f = Var(name)
        m, inner = {}, 1
        for it, e in zip(reversed(its), reversed(exts)):
            v = f if inner == 1 else binary(BinOpKind.FLOORDIV, f, inner)
            m[it.var] = v if it is its[0] else binary(BinOpKind.MOD, v, e)
            inner *= e
        _substitute_nest(nest, m)
        nest.iters[ids[0]:ids[-1] + 1] = [Iter(name, f, Const(total, dt.INDEX), its[0].kind)]

    def remap(self, pos):
        first, last = self.iter_ids[0], self.iter_ids[-1]
        if pos < first:
            return pos
        return first if pos <= last else pos - (last - first)

    def python(self, state):
        names = ", ".join(iter_repr(state, self.stage_id, i) for i in self.iter_ids)
        return f"s[{stage_repr(state, self.stage_id)}].fuse({names})"


@register_step
@dataclass(frozen=True)
class ReorderStep(Step):
    """Put the loops in the order ``order`` (a permutation of loop positions)."""
    code: ClassVar[str] = "RE"
    stage_id: int
    order: tuple

    def apply(self, state):
        s = checked_stage(state, self.stage_id, "reorder")
        if sorted(self.order) != list(range(len(s.iters))):
            raise ScheduleError(f"reorder on '{s.name}': {list(self.order)} is not a permutation of "
                                f"its {len(s.iters)} loops")
        _relation(state, self.stage_id, self)

    def replay(self, stage, nest):
        nest.iters[:] = [nest.iters[i] for i in self.order]

    def remap(self, pos):
        return self.order.index(pos)

    def python(self, state):
        names = ", ".join(iter_repr(state, self.stage_id, i) for i in self.order)
        return f"s[{stage_repr(state, self.stage_id)}].reorder({names})"


_ANN_METHOD = {Annotation.UNROLL: "unroll", Annotation.VECTORIZE: "vectorize",
               Annotation.PARALLEL: "parallel"}


@register_step
@dataclass(frozen=True)
class AnnotationStep(Step):
    """Mark a loop parallel, vectorized, unrolled, or bound to a GPU thread axis."""
    code: ClassVar[str] = "AN"
    stage_id: int
    iter_id: int
    annotation: Annotation

    def apply(self, state):
        s = checked_stage(state, self.stage_id, "annotate")
        it = checked_iter(s, self.iter_id, "annotate")
        a = self.annotation
        what = a.name.lower()
        if it.kind is IterKind.REDUCE and a in (Annotation.VECTORIZE, Annotation.PARALLEL) \
                or it.kind is IterKind.REDUCE and a.thread is not None:
            raise ScheduleError(f"cannot {what} reduction loop '{it.name}' of '{s.name}': its "
                                f"iterations update the same element (use rfactor first)")
        if a is not Annotation.NONE and a is not Annotation.PARALLEL and it.const_extent is None:
            raise ScheduleError(f"cannot {what} loop '{it.name}' of '{s.name}': its extent is "
                                f"data-dependent")
        if a is Annotation.PARALLEL and it.const_extent is None:
            raise ScheduleError(f"cannot parallelize data-dependent loop '{it.name}'")
        _relation(state, self.stage_id, self)

    def replay(self, stage, nest):
        it = nest.iters[self.iter_id]
        nest.iters[self.iter_id] = dataclasses.replace(it, annotation=self.annotation)

    def python(self, state):
        s, i = stage_repr(state, self.stage_id), iter_repr(state, self.stage_id, self.iter_id)
        if self.annotation in _ANN_METHOD:
            return f"s[{s}].{_ANN_METHOD[self.annotation]}({i})"
        return f"s[{s}].bind({i}, {self.annotation.thread.value!r})"


@register_step
@dataclass(frozen=True)
class PragmaStep(Step):
    """A pragma on a loop, e.g. ``auto_unroll_max_step`` with a value."""
    code: ClassVar[str] = "PR"
    stage_id: int
    iter_id: int
    pragma: str
    value: int

    PRAGMAS: ClassVar[tuple] = ("auto_unroll_max_step", PRAGMA_PARALLEL_SCHEDULE,
                                PRAGMA_PARALLEL_CHUNK)

    def apply(self, state):
        s = checked_stage(state, self.stage_id, "pragma")
        checked_iter(s, self.iter_id, "pragma")
        if self.pragma not in self.PRAGMAS:
            raise ScheduleError(f"unknown pragma {self.pragma!r}; known: {list(self.PRAGMAS)}")
        if self.pragma == PRAGMA_PARALLEL_SCHEDULE and self.value not in set(ParallelSchedule):
            raise ScheduleError(f"pragma {self.pragma!r}: {self.value!r} is not a ParallelSchedule "
                                f"({', '.join(f'{m.name}={m.value}' for m in ParallelSchedule)})")
        if self.pragma == PRAGMA_PARALLEL_CHUNK and self.value < 1:
            raise ScheduleError(f"pragma {self.pragma!r}: the chunk must be >= 1, got {self.value}")
        _relation(state, self.stage_id, self)

    def replay(self, stage, nest):
        it = nest.iters[self.iter_id]
        nest.iters[self.iter_id] = dataclasses.replace(
            it, pragmas=it.pragmas + ((self.pragma, self.value),))

    def python(self, state):
        s, i = stage_repr(state, self.stage_id), iter_repr(state, self.stage_id, self.iter_id)
        return f"s[{s}].pragma({i}, {self.pragma!r}, {self.value})"
