"""``tc.Schedule``: hand scheduling, TVM-like. Every call records one step; the step list is the
schedule (replayable, printable as Python, storable as a record). The per-stage calls
(``s[C].split(...)``) are :mod:`tecomp.schedule.stage_handle`.

The examples assume ``import tecomp as tc`` and a matmul ``C = A @ B`` with ``dag =
tc.ComputeDAG([A, B, C])``.
"""
from __future__ import annotations

from ..ir.dag import ComputeDAG
from ..ir.tensor import Tensor
from .compute_steps import CacheReadStep, CacheWriteStep
from .stage_handle import IterHandle, StageHandle
from .state import State
from .steps import step_from_record

__all__ = ["Schedule", "StageHandle", "IterHandle"]


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
        self.apply_step(CacheWriteStep(sid, scope))
        return self.state.stages[sid].tensor

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
