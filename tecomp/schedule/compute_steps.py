"""Steps that move stages (compute_at / inline / root) and that add stages (cache_read/write)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..ir import dtype as dt
from ..ir.expr import Const, IterKind, IterVar, Reduce, TensorRead, select
from ..ir.loop import Scope
from ..ir.tensor import ComputeOp, Tensor
from ..ir.traverse import transform
from .inline import effective_readers
from .state import ComputeLocation, ScheduleError, StageState, State
from .steps import Step, checked_iter, checked_stage, iter_repr, register_step, stage_repr

__all__ = ["ComputeAtStep", "ComputeInlineStep", "ComputeRootStep", "CacheWriteStep",
           "CacheReadStep", "StorageAlignStep", "SCOPES", "aligned_strides", "insert_stage",
           "attach_loop_on", "readers_outside"]

SCOPES = tuple(s.value for s in Scope)  # as step records name them


def _attach_chain(state: State, sid: int) -> list:
    out, seen = [], set()
    while sid is not None and sid not in seen:
        seen.add(sid)
        out.append(sid)
        a = state.stages[sid].attach
        sid = a[0] if a is not None and state.stages[sid].location is ComputeLocation.AT else None
    return out


def attach_loop_on(state: State, sid: int, tid: int):
    """The loop of stage ``tid`` that stage ``sid`` is computed inside, through its attach chain
    (``sid`` at a loop of ``a``, ``a`` at loop ``k`` of ``tid``: ``k``); None when the chain
    does not reach ``tid``."""
    seen = set()
    while sid not in seen:
        seen.add(sid)
        s = state.stages[sid]
        if s.location is not ComputeLocation.AT:
            return None
        if s.attach[0] == tid:
            return s.attach[1]
        sid = s.attach[0]
    return None


def readers_outside(state: State, sid: int, tid: int, k: int, readers=None) -> list:
    """The readers of stage ``sid`` that would not run inside loop ``k`` of stage ``tid``:
    neither ``tid`` itself nor computed (through their attach chains) at loop ``k`` of it or
    deeper. Computed at that loop, ``sid`` holds one iteration's region, which only the readers
    inside the loop may read; a reader emitted at the same loop comes after it (stages are in
    topological order)."""
    readers = effective_readers(state, sid) if readers is None else readers
    out = []
    for r in sorted(readers):
        if r == tid:
            continue
        kr = attach_loop_on(state, r, tid)
        if kr is None or kr < k:
            out.append(r)
    return out


@register_step
@dataclass(frozen=True)
class ComputeAtStep(Step):
    """Compute stage ``stage_id`` inside loop ``target_iter_id`` of stage ``target_stage_id``, over the
    region of it that one iteration of that loop reads (bound inference).

    Every reader of the stage must run inside that loop: the target itself, or stages computed
    (through their attach chains) at that loop of the target or deeper, so that a softmax's
    ``exp`` can be computed per row of the output while the row sum, computed there too, also
    reads it."""
    code: ClassVar[str] = "CA"
    stage_id: int
    target_stage_id: int
    target_iter_id: int

    def apply(self, state):
        s = checked_stage(state, self.stage_id, "compute_at")
        t = checked_stage(state, self.target_stage_id, "compute_at")
        it = checked_iter(t, self.target_iter_id, "compute_at")
        if s.op.is_ragged:
            raise ScheduleError(f"compute_at: '{s.name}' has a data-dependent output domain")
        if any(s.tensor is o for o in state.dag.outputs):
            raise ScheduleError(f"compute_at: '{s.name}' is an output of the kernel; it is computed "
                                f"whole, at root")
        readers = effective_readers(state, self.stage_id)
        if not readers:
            raise ScheduleError(f"compute_at: '{s.name}' is not read by any stage")
        outside = readers_outside(state, self.stage_id, self.target_stage_id,
                                  self.target_iter_id, readers)
        if outside:
            names = sorted(state.stages[r].name for r in outside)
            raise ScheduleError(f"compute_at: '{s.name}' is read by {names} outside loop "
                                f"'{it.name}' of '{t.name}'; a stage can only be computed at a "
                                f"loop that every stage reading it runs inside")
        if self.stage_id in _attach_chain(state, self.target_stage_id):
            raise ScheduleError(f"compute_at: '{t.name}' is computed inside '{s.name}'")
        inner = t.iters[self.target_iter_id + 1:]
        if any(i.const_extent is None for i in inner) and it.kind is not IterKind.REDUCE:
            bad = [i.name for i in inner if i.const_extent is None]
            raise ScheduleError(f"compute_at: loop '{it.name}' of '{t.name}' encloses the "
                                f"data-dependent loop(s) {bad}; attach inside them or outside "
                                f"the stage")
        s.location, s.attach = ComputeLocation.AT, (self.target_stage_id, self.target_iter_id)
        s.invalidate()

    def python(self, state):
        target = stage_repr(state, self.target_stage_id)
        return (f"s[{stage_repr(state, self.stage_id)}].compute_at(s[{target}]"
                f", {iter_repr(state, self.target_stage_id, self.target_iter_id)})")


@register_step
@dataclass(frozen=True)
class ComputeInlineStep(Step):
    """Substitute the stage's expression into its readers; it gets no loops or buffer."""
    code: ClassVar[str] = "CI"
    stage_id: int

    def apply(self, state):
        s = checked_stage(state, self.stage_id, "compute_inline")
        if isinstance(s.op.body, Reduce):
            raise ScheduleError(f"compute_inline: '{s.name}' is a reduction; only elementwise "
                                f"stages can be inlined")
        if s.op.is_ragged:
            raise ScheduleError(f"compute_inline: '{s.name}' has a data-dependent output domain")
        if any(s.tensor is t for t in state.dag.outputs):
            raise ScheduleError(f"compute_inline: '{s.name}' is an output of the kernel")
        for o in state.stages:
            if o.location is ComputeLocation.AT and o.attach[0] == self.stage_id:
                raise ScheduleError(f"compute_inline: '{o.name}' is computed at a loop of "
                                    f"'{s.name}'")
        s.location, s.attach, s.region = ComputeLocation.INLINE, None, None
        s.invalidate()

    def python(self, state):
        return f"s[{stage_repr(state, self.stage_id)}].compute_inline()"


@register_step
@dataclass(frozen=True)
class ComputeRootStep(Step):
    """Compute the stage at the top level, over its whole domain."""
    code: ClassVar[str] = "CR"
    stage_id: int

    def apply(self, state):
        s = state.stages[self.stage_id] if 0 <= self.stage_id < len(state.stages) else None
        if s is None or s.is_placeholder:
            raise ScheduleError(f"compute_root: stage {self.stage_id} is not a compute stage")
        s.location, s.attach, s.region = ComputeLocation.ROOT, None, None
        s.invalidate()

    def python(self, state):
        return f"s[{stage_repr(state, self.stage_id)}].compute_root()"


def insert_stage(state: State, pos: int, stage: StageState) -> None:
    """Insert a new stage at ``pos`` (cache stages, rfactor), renumbering the attach points of the
    stages after it."""
    state.stages.insert(pos, stage)
    for o in state.stages:  # a stage's loops do not depend on the index of its attach target
        if o.attach is not None and o.attach[0] >= pos:
            o.attach = (o.attach[0] + 1, o.attach[1])


def _fresh_axes(shape, like=None) -> tuple:
    """New spatial axes over ``shape``, named like the axes of ``like`` (an op) when it has them."""
    names = [a.name for a in getattr(like, "axes", ())]
    if len(names) != len(shape):
        names = [f"ax{n}" for n in range(len(shape))]
    return tuple(IterVar(nm, Const(0, dt.INDEX), Const(s, dt.INDEX), IterKind.SPATIAL)
                 for nm, s in zip(names, shape))


def _check_scope(scope):
    if scope not in SCOPES:
        raise ScheduleError(f"unknown memory scope {scope!r}; use one of {SCOPES}")


def _scope_name(step) -> None:
    """A cache step made with an :class:`~tecomp.ir.loop.Scope` holds its name (the record's)."""
    if isinstance(step.scope, Scope):
        object.__setattr__(step, "scope", step.scope.value)


@register_step
@dataclass(frozen=True)
class CacheWriteStep(Step):
    """Compute the stage into a new buffer of ``scope`` (a new stage ``NAME.scope`` placed before it);
    the stage itself becomes a copy out of that buffer."""
    code: ClassVar[str] = "CHW"
    stage_id: int
    scope: str  # a Scope's value (a Scope given is stored as its value)

    def __post_init__(self):
        _scope_name(self)

    def apply(self, state):
        s = checked_stage(state, self.stage_id, "cache_write")
        _check_scope(self.scope)
        if s.op.is_ragged:
            raise ScheduleError(f"cache_write: '{s.name}' has a data-dependent output domain")
        if s.relations or s.location is not ComputeLocation.ROOT:
            raise ScheduleError(f"cache_write on '{s.name}' must come before its loops are "
                                f"transformed or it is moved")
        op = s.op
        cache_op = ComputeOp(f"{op.name}.{self.scope}", op.axes, op.body, checks=op.checks,
                             tag=op.tag)
        cache = Tensor(cache_op, s.tensor.shape, s.tensor.dtype, cache_op.name)
        axes = _fresh_axes(s.tensor.shape, op)
        s.op = ComputeOp(op.name, axes, cache[axes] if axes else cache[()], tag=op.tag)
        s.invalidate()
        new = StageState(cache, cache_op)
        new.scope = Scope(self.scope)
        insert_stage(state, self.stage_id, new)

    def python(self, state):
        return f"s.cache_write({stage_repr(state, self.stage_id)}, {self.scope!r})"


@register_step
@dataclass(frozen=True)
class CacheReadStep(Step):
    """Copy the stage's tensor into a new buffer of ``scope`` (a new stage ``NAME.scope`` placed right
    after it) and make the given readers read the copy.

    ``pack = (dim, factor)`` stores the copy in a packed layout: dimension ``dim`` is split by
    ``factor``, its outer part becomes the outermost dimension and its inner part the innermost
    (``B[K, N]`` with ``(1, 16)`` -> ``[ceil(N/16), K, 16]``), so that a tile of ``factor`` columns is
    contiguous. Elements past the end of a non-divisible ``dim`` are zero.
    """
    code: ClassVar[str] = "CHR"
    stage_id: int
    scope: str  # a Scope's value (a Scope given is stored as its value)
    reader_ids: tuple
    pack: tuple = ()

    def __post_init__(self):
        _scope_name(self)

    def apply(self, state):
        if not 0 <= self.stage_id < len(state.stages):
            raise ScheduleError(f"cache_read: stage {self.stage_id} out of range")
        src = state.stages[self.stage_id]
        _check_scope(self.scope)
        if src.location is ComputeLocation.INLINE:
            raise ScheduleError(f"cache_read: '{src.name}' is inlined")
        if not self.reader_ids:
            raise ScheduleError(f"cache_read of '{src.name}': no readers given")
        for r in self.reader_ids:
            rs = checked_stage(state, r, "cache_read")
            if not any(t is src.tensor for t in rs.op.inputs):
                raise ScheduleError(f"cache_read: '{rs.name}' does not read '{src.name}'")
        t = src.tensor
        cache, to_cache = self._cache(t, src)

        def swap(x):
            if isinstance(x, TensorRead) and x.tensor is t:
                return TensorRead(cache, to_cache(tuple(transform(i, swap) for i in x.indices)))
            return None
        for r in self.reader_ids:
            rs = state.stages[r]
            o = rs.op
            body = transform(o.body, swap)
            if isinstance(o.body, Reduce) and not isinstance(body, Reduce):
                body = Reduce(o.body.kind, body, o.body.axes)
            # same root axes, so the same loops: the reader's nest stays (re-deriving a tiled
            # reader replays all its splits)
            rs.op = ComputeOp(o.name, o.axes, body, out_index=o.out_index if o.is_ragged else None,
                              checks=o.checks, tag=o.tag)
        new = StageState(cache, cache.op)
        new.scope = Scope(self.scope)
        insert_stage(state, self.stage_id + 1, new)

    def _cache(self, t, src):
        """The cache tensor and the map from indices of ``t`` to indices of the cache."""
        name = f"{src.name}.{self.scope}"
        if not self.pack:
            axes = _fresh_axes(t.shape, src.op)
            op = ComputeOp(name, axes, t[axes] if axes else t[()])
            return Tensor(op, t.shape, t.dtype, name), lambda idx: idx
        if len(self.pack) != 2:
            raise ScheduleError(f"cache_read of '{src.name}': pack must be (dim, factor)")
        d, f = self.pack
        if not 0 <= d < t.ndim or not isinstance(f, int) or f < 1:
            raise ScheduleError(f"cache_read of '{src.name}': cannot pack dimension {d} by {f} "
                                f"(rank {t.ndim})")
        n = t.shape[d]
        rest = [x for k, x in enumerate(t.shape) if k != d]
        shape = (-(-n // f),) + tuple(rest) + (f,)
        axes = _fresh_axes(shape)
        orig = list(axes[1:-1])
        orig.insert(d, axes[0] * f + axes[-1])
        value = t[tuple(orig)]
        if n % f:
            value = select(axes[0] * f + axes[-1] < n, value, Const(0, t.dtype).value)
        op = ComputeOp(name, axes, value)

        def to_cache(idx):
            rest_idx = tuple(i for k, i in enumerate(idx) if k != d)
            return (idx[d] // f,) + rest_idx + (idx[d] % f,)
        return Tensor(op, shape, t.dtype, name), to_cache

    def python(self, state):
        readers = ", ".join(f"s[{stage_repr(state, r)}]" for r in self.reader_ids)
        pack = f", pack={tuple(self.pack)}" if self.pack else ""
        return f"s.cache_read({stage_repr(state, self.stage_id)}, {self.scope!r}, [{readers}]{pack})"


@register_step
@dataclass(frozen=True)
class StorageAlignStep(Step):
    """Pad the stride of dimension ``axis`` of the stage's buffer so that it is ``k * factor +
    offset`` elements (TVM's storage_align; the classic use is a shared-memory row padded off a
    multiple of the bank count). Only buffers the kernel allocates can be aligned."""
    code: ClassVar[str] = "SA"
    stage_id: int
    axis: int
    factor: int
    offset: int

    def apply(self, state):
        s = checked_stage(state, self.stage_id, "storage_align")
        if any(s.tensor is t for t in state.dag.tensors):
            raise ScheduleError(f"storage_align: '{s.name}' is a kernel argument; its layout is "
                                f"the caller's")
        if not 0 <= self.axis < len(s.op.axes):
            raise ScheduleError(f"storage_align: '{s.name}' has no dimension {self.axis}")
        if self.factor < 1 or not 0 <= self.offset < self.factor:
            raise ScheduleError(f"storage_align: need factor >= 1 and 0 <= offset < factor, got "
                                f"{self.factor}, {self.offset}")
        s.align = {**s.align, self.axis: (self.factor, self.offset)}

    def python(self, state):
        return (f"s[{stage_repr(state, self.stage_id)}].storage_align({self.axis}, {self.factor}, "
                f"{self.offset})")


def aligned_strides(shape: tuple, align: dict) -> tuple | None:
    """Row-major strides with the dimensions of ``align`` padded; None when nothing is aligned."""
    if not align:
        return None
    out, acc = [0] * len(shape), 1
    for d in reversed(range(len(shape))):
        if d in align:
            f, o = align[d]
            acc += (o - acc) % f
        out[d] = acc
        acc *= shape[d]
    return tuple(out)
