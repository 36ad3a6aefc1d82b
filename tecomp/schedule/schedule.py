"""``tc.Schedule``: hand scheduling, TVM-like. Every call records one step; the step list is the
schedule (replayable, printable as Python, storable as a record). The per-stage calls
(``s[C].split(...)``) are :mod:`tecomp.schedule.stage_handle`.

The examples assume ``import tecomp as tc`` and a matmul ``C = A @ B`` with ``dag =
tc.ComputeDAG([A, B, C])``.
"""
from __future__ import annotations

import dataclasses

from ..ir.dag import ComputeDAG
from ..ir.tensor import Tensor
from .compute_steps import CacheReadStep, CacheWriteStep
from .stage_handle import IterHandle, StageHandle
from .state import ComputeLocation, ScheduleError, State
from .steps import step_from_record

__all__ = ["Schedule", "StageHandle", "IterHandle", "replay_on"]


class Schedule:
    """A schedule of ``dag``: initially the default (every stage at root, natural loop order).

    Parameters
    ----------
    dag : ComputeDAG
    steps : sequence of Step, optional
        Steps to apply first (a replay; :meth:`from_records` reads them from records).

    Examples
    --------
    >>> s = tc.Schedule(dag)
    >>> io, ii = s[C].split(s[C].axes[0], factor=32)
    >>> s[C].parallel(io)
    >>> kernel = tc.build(dag, target="llvm", schedule=s)
    """

    def __init__(self, dag: ComputeDAG, steps=()):
        if not isinstance(dag, ComputeDAG):
            raise TypeError(f"Schedule expects a ComputeDAG, got {type(dag).__name__}")
        self.dag = dag
        self.state = State(dag)
        for st in steps:
            self.apply_step(st)

    def apply_step(self, step) -> None:
        """Apply one :class:`~tecomp.schedule.steps.Step` and append it (a ``ScheduleError``
        leaves the schedule as it was only if the step fails before changing the state)."""
        self.state.apply(step)

    def __getitem__(self, key) -> StageHandle:
        """``s[tensor]`` or ``s["name"]``: the :class:`StageHandle` of that stage."""
        if isinstance(key, StageHandle):
            return key
        self.state.stage_index(key)  # fail early with a clear message
        return StageHandle(self, key)

    @property
    def steps(self) -> list:
        """The steps so far, in order."""
        return list(self.state.steps)

    def cache_write(self, tensor, scope: str) -> Tensor:
        """Compute ``tensor`` into a new buffer of ``scope``, then copy it to ``tensor``.

        Parameters
        ----------
        tensor : Tensor or StageHandle
            A compute stage.
        scope : str
            ``"global"``, ``"shared"`` or ``"local"`` (registers, per thread).

        Returns
        -------
        Tensor
            The cache (a new stage, usually computed at a loop of ``tensor``).

        Examples
        --------
        >>> CC = s.cache_write(C, "local")
        >>> s[CC].compute_at(s[C], s[C].axes[0])
        """
        sid = self.state.stage_index(_ref(tensor))
        st = self.state.stages[sid]
        if st.relations or st.location is not ComputeLocation.ROOT:
            self._cache_write_before(sid, scope)
        else:
            self.apply_step(CacheWriteStep(sid, scope))
        return self.state.stages[sid].tensor

    def _cache_write_before(self, sid: int, scope: str) -> None:
        """TVM's order (``split``, then ``cache_write``, then ``compute_at`` at a split loop): the
        cache step goes before the stage's first step, and the steps since then replay on the
        stage, now a copy out of the cache: stage indices past the new stage move on by one, and
        the stage's loops are found again by name (its reduction loops are gone; a step that
        transforms one cannot carry over)."""
        steps = self.state.steps
        name = self.state.stages[sid].name
        # the stage's index when each step ran: a later cache stage inserted before it (a
        # cache_write of an earlier stage after a step on this one) moves it on
        old, first = State.replay(self.dag, []), len(steps)
        for k, step in enumerate(steps):
            if _index_of(old, name) in _stage_ids(step):
                first = k
                break
            old.apply(step, atomic=False)
        at = _index_of(old, name)
        new = State.replay(self.dag, steps[:first] + [CacheWriteStep(at, scope)])
        try:
            for step in steps[first:]:
                at = old.stage_index(name)
                before = [it.name for it in old.stages[at].iters]
                after = [it.name for it in new.stages[at + 1].iters]
                new.apply(_moved(step, at, before, after), atomic=False)
                old.apply(step, atomic=False)
        except (ScheduleError, ValueError) as e:
            raise ScheduleError(f"cache_write on '{name}' after steps that do not carry over to "
                                f"its copy stage (they transform its reduction loops: call "
                                f"cache_write first): {e}") from None
        self.state = new

    def cache_read(self, tensor, scope: str, readers, pack=None) -> Tensor:
        """Copy ``tensor`` into a new buffer of ``scope`` that ``readers`` read instead.

        Parameters
        ----------
        tensor : Tensor or StageHandle
            Any stage, inputs included.
        scope : str
            ``"global"``, ``"shared"`` or ``"local"``.
        readers : sequence of Tensor
            The stages that read the copy.
        pack : (dim, factor), optional
            Store the copy packed: dimension ``dim`` split by ``factor`` with the inner part
            innermost (see :class:`~tecomp.schedule.compute_steps.CacheReadStep`).

        Returns
        -------
        Tensor
            The cache (a new stage).

        Examples
        --------
        >>> BP = s.cache_read(B, "global", [C], pack=(1, 16))
        """
        sid = self.state.stage_index(_ref(tensor))
        rids = tuple(self.state.stage_index(_ref(r)) for r in readers)
        self.apply_step(CacheReadStep(sid, scope, rids, tuple(pack) if pack else ()))
        return self.state.stages[sid + 1].tensor

    def rfactor(self, tensor, loop, factor_axis: int | None = None) -> Tensor:
        """Factor reduction ``loop`` of ``tensor``'s stage out into a new stage of partial results,
        where it is a spatial axis; ``tensor`` then reduces over the partial results.

        Parameters
        ----------
        tensor : Tensor or StageHandle
            A reduction stage.
        loop : IterHandle or str
            One of its reduction loops (a root reduction axis or a split piece of one).
        factor_axis : int, optional
            Where the new spatial axis goes among the partial stage's axes (default: innermost).

        Returns
        -------
        Tensor
            The stage of partial results.

        Examples
        --------
        >>> (k,) = s[C].reduce_axes
        >>> ko, ki = s[C].split(k, factor=16)
        >>> CF = s.rfactor(C, ki)
        """
        from .rfactor import RfactorStep
        h = self[tensor]
        sid = h.index
        n_axes = len(self.state.stages[sid].op.axes)
        pos = n_axes if factor_axis is None else factor_axis
        self.apply_step(RfactorStep(sid, h.loop_index(loop), pos))
        return self.state.stages[sid].tensor

    def factor_out(self, tensor, loop, factor_axis: int | None = None) -> Tensor:
        """Split a sum over several reduction axes into two sums by distributivity: the factors
        of ``tensor``'s summand that read none of its other reduction axes multiply the partial
        sum over those axes instead of every term (``sum_{i,j} x[b,i] W[i,j] y[b,j]`` becomes
        ``sum_j y[b,j] * P[b,j]`` with ``P[b,j] = sum_i x[b,i] W[i,j]``, a matmul).

        Parameters
        ----------
        tensor : Tensor or StageHandle
            An untransformed sum reduction at root over two or more axes, whose summand is a
            product.
        loop : IterHandle or str
            The reduction axis ``tensor`` keeps; the new stage sums over the others.
        factor_axis : int, optional
            Where ``loop``'s axis goes among the new stage's axes (default:
            :func:`~tecomp.schedule.factor_out.factor_position`, which keeps an axis read
            contiguously innermost).

        Returns
        -------
        Tensor
            The stage of partial sums (``NAME.fo``), over the spatial axes its factors read and
            ``loop``.

        Examples
        --------
        >>> i, j = s[out].reduce_axes
        >>> P = s.factor_out(out, j)
        """
        from .factor_out import FactorOutStep, factor_position, root_reduction_loops
        h = self[tensor]
        sid = h.index
        pos = h.loop_index(loop)
        if factor_axis is None:  # (a loop that is no root reduction axis: the step says so)
            st = self.state.stages[sid]
            axis = root_reduction_loops(st).get(pos)
            factor_axis = 0 if axis is None else factor_position(st.op, axis)
        self.apply_step(FactorOutStep(sid, pos, factor_axis))
        return self.state.stages[sid].tensor

    def lower(self):
        """The loop IR of this schedule (a :class:`~tecomp.ir.loop.PrimFunc`; ``print`` it)."""
        from ..lowering import lower  # the next layer: imported when used
        return lower(self)

    @property
    def key(self) -> str:
        """The step records as one string: de-duplication and cache key."""
        return self.state.key

    def records(self) -> list:
        """The steps as JSON-able lists, what a tuning log stores.

        Examples
        --------
        >>> same = tc.Schedule.from_records(dag, s.records())
        """
        return [s.record() for s in self.state.steps]

    @staticmethod
    def from_records(dag: ComputeDAG, records) -> "Schedule":
        """Replay step ``records`` (from :meth:`records` or a log) on ``dag``; unknown or invalid
        records raise ``ValueError`` / ``ScheduleError``."""
        return Schedule(dag, [step_from_record(r) for r in records])

    def __str__(self):
        from .printing import steps_python
        return steps_python(self.dag, self.state.steps)

    def __repr__(self):
        return f"<Schedule of {len(self.state.steps)} steps>\n{self.state!r}"


def _ref(x):
    if isinstance(x, StageHandle):
        return x.ref
    return x


def _index_of(state, name: str):
    """The index of stage ``name`` in ``state``, None where it has none (yet)."""
    try:
        return state.stage_index(name)
    except ScheduleError:
        return None


def _stage_ids(step) -> tuple:
    """The stage indices a step names (its own, a compute_at target, cache_read readers)."""
    ids = [getattr(step, f) for f in ("stage_id", "target_stage_id") if hasattr(step, f)]
    return tuple(ids) + tuple(getattr(step, "reader_ids", ()))


def _moved(step, sid: int, before: list, after: list):
    """``step`` for the state with a cache stage inserted at ``sid``: stage indices at or after
    ``sid`` moved on by one, and the loops of stage ``sid`` (named ``before`` then, ``after``
    now) found by name."""
    def up(i):
        return i + 1 if i >= sid else i

    def loop(pos):
        if before[pos] not in after:
            raise ValueError(f"its loop {before[pos]!r} is a reduction loop")
        return after.index(before[pos])

    ch = {f: up(getattr(step, f)) for f in ("stage_id", "target_stage_id") if hasattr(step, f)}
    if hasattr(step, "reader_ids"):
        ch["reader_ids"] = tuple(up(i) for i in step.reader_ids)
    if getattr(step, "stage_id", None) == sid:
        for f in ("iter_id", "factor_iter_id"):
            if hasattr(step, f):
                ch[f] = loop(getattr(step, f))
        if hasattr(step, "iter_ids"):
            ch["iter_ids"] = tuple(loop(p) for p in step.iter_ids)
        if hasattr(step, "order"):  # a permutation: the loops the copy stage still has
            ch["order"] = tuple(after.index(before[p]) for p in step.order if before[p] in after)
    if getattr(step, "target_stage_id", None) == sid:
        ch["target_iter_id"] = loop(step.target_iter_id)
    return dataclasses.replace(step, **ch)


def replay_on(schedule, dag: ComputeDAG) -> Schedule:
    """``schedule`` (a :class:`Schedule` or a ``State``) replayed on ``dag``: itself when it was
    made for ``dag``, else its steps on ``dag``, an equal DAG built again (the same workload key:
    the same ops, shapes and dtypes, so the steps' stage and loop numbers mean the same there).

    Raises
    ------
    ValueError
        ``schedule`` was made for a DAG of another workload.
    """
    other = getattr(schedule, "dag", None)
    if other is dag:
        return schedule
    if not isinstance(other, ComputeDAG) or other.workload_key != dag.workload_key:
        raise ValueError("the schedule was made for a different ComputeDAG (another workload: "
                         "its ops, shapes or dtypes differ)")
    steps = schedule.state.steps if isinstance(schedule, Schedule) else schedule.steps
    return Schedule(dag, list(steps))
