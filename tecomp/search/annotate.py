"""Random annotation: a sketch plus explicit *decisions* becomes a concrete schedule.

Decisions (:class:`~tecomp.search.decisions.Decisions`, stored in the records beside the steps):

- ``tile``: split step index -> inner lengths; exact divisor factorizations mostly, and
  also non-divisible ones (tails are guarded), which Ansor's exact-divisor sampling cannot reach;
- ``loc``: stage name -> index into that stage's compute-location candidates (root, inline, or a
  loop of its consumer), for stages the sketch left untiled (padding, elementwise with branches);
- ``par``: stage name -> number of outer loops fused into the parallel loop (0: none);
- ``chunk``: stage name -> how a parallel loop over data-dependent work (sparse rows) is divided:
  0 static equal chunks, else dynamic chunks of that many iterations (ParallelSchedule.DYNAMIC);
- ``vec``: stage name -> number of inner loops fused into the vectorized loop (0: none); for an
  untiled stage whose innermost loop is a row longer than ``MAX_VECTOR`` points (a softmax's exp
  computed at its output's row loop), 1 splits the row and vectorizes whole vectors of it;
- ``pack``: input name -> inner tile levels of its reader the weight is re-laid out to (0: none;
  :mod:`tecomp.search.layout_rewrite`);
- ``unroll``: stage name -> ``auto_unroll_max_step`` (0: none).

:func:`materialize_cpu` replays a sketch under decisions, sampling every missing or no longer valid
decision, so a mutation is "change one decision, materialize again".
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field

from ..ir.expr import IterKind
from ..ir.loop import PRAGMA_PARALLEL_CHUNK, PRAGMA_PARALLEL_SCHEDULE, ParallelSchedule, Scope
from ..schedule.compute_steps import ComputeAtStep, ComputeInlineStep
from ..schedule.inline import effective_readers
from ..schedule.replay_cache import REPLAY_CACHE
from ..schedule.state import Annotation, ComputeLocation, ScheduleError, State
from ..schedule.steps import AnnotationStep, FuseStep, PragmaStep, ReorderStep, SplitStep
from . import analysis as an
from .decisions import Decisions, MutationKind
from .layout_rewrite import pack_weights
from .reduction_lanes import lane_run
from .register_tile import cover, sample_register_tiles
from .sketch_rule import Sketch, TileHole

__all__ = ["Candidate", "materialize_cpu", "factorizations", "UNROLL_CHOICES", "CHUNK_CHOICES",
           "MAX_INNERMOST", "MAX_VECTOR", "apply_step", "annotate_unroll", "CPU_TABLES"]

UNROLL_CHOICES = (0, 16, 64, 512)
#: parallel chunking of loops over sparse rows: 0 static, else dynamic chunks of this many
CHUNK_CHOICES = (0, 1, 2, 4, 8, 16, 32, 64)
MAX_INNERMOST = 64
MAX_VECTOR = 64
NON_DIVISIBLE_PROB = 0.15
_NICE = (1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 20, 24, 28, 32, 48, 64)
#: the decision tables of a CPU candidate
CPU_TABLES = tuple(MutationKind)


@dataclass
class Candidate:
    """A concrete program: sketch index, decisions, the steps they give and the state."""
    sketch: int
    decisions: Decisions
    steps: list
    state: State
    _key: tuple | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def key(self) -> str:
        # the search asks for it many times (dedup, model cache, measured set); a state is not
        # edited once it is a candidate, but a key is only reused for the same number of steps
        n = len(self.state.steps)
        if self._key is None or self._key[0] != n:
            self._key = (n, self.state.key)
        return self._key[1]


def _divisors(n: int) -> list:
    return [d for d in range(1, n + 1) if n % d == 0]


@functools.lru_cache(maxsize=4096)
def factorizations(extent: int, parts: int, max_innermost: int = MAX_INNERMOST) -> tuple:
    """Every way to write ``extent`` as a product of ``parts`` factors, as the ``parts - 1`` inner
    ones (outer to inner), innermost at most ``max_innermost``."""
    out = []

    def rec(rest: int, k: int, acc: tuple):
        if k == 0:
            out.append(acc)
            return
        for d in _divisors(rest):
            if k == parts - 1 and d > max_innermost:  # d is the innermost factor
                continue
            rec(rest // d, k - 1, (d,) + acc)
    rec(extent, parts - 1, ())
    return tuple(out)


def sample_tile(rng, extent: int, parts: int) -> list:
    if parts <= 1:
        return []
    if rng.random() < NON_DIVISIBLE_PROB and extent > 8:
        out, budget = [], extent
        for k in range(parts - 1):
            cands = [x for x in _NICE if x <= budget and (k < parts - 2 or x <= MAX_INNERMOST)]
            x = int(rng.choice(cands))
            out.append(x)
            budget = max(1, budget // x)
        return out
    opts = factorizations(extent, parts)
    return list(opts[int(rng.integers(len(opts)))])


def _valid_tile(v, hole: TileHole) -> bool:
    if not isinstance(v, (list, tuple)) or len(v) != hole.parts - 1:
        return False
    prod = 1
    for x in v:
        if not isinstance(x, int) or x < 1:
            return False
        prod *= x
    if not v:
        return True
    # the levels above the innermost may span the innermost tiles rounded up (a register tile of
    # 6 rows over 1024: 171 tiles of 6), so that a replayed register tiling stays as it was
    return v[-1] <= MAX_INNERMOST and prod // v[-1] <= -(-max(hole.extent, 1) // v[-1])


def materialize_cpu(task, sketch_id: int, sketch: Sketch, decisions: Decisions,
                    rng) -> Candidate | None:
    """The candidate of a CPU ``sketch`` under ``decisions`` (missing ones sampled with ``rng``; the
    candidate's decisions are complete); None when the result is not a legal schedule. The search
    calls it through :func:`tecomp.search.target_search.materialize`, which picks the target's
    annotator."""
    K = MutationKind
    d = decisions.tables(CPU_TABLES)
    holes = {idx: h for idx, h in sketch.holes.items() if isinstance(h, TileHole)}
    valid = {idx: d[K.TILE][idx] for idx, h in holes.items()
             if _valid_tile(d[K.TILE].get(idx), h)}
    # register micro-tiles only for what is drawn anew (a mutant or replay keeps its decisions)
    fresh = sample_register_tiles(rng, sketch, task.hardware, valid, sample_tile) \
        if len(valid) < len(holes) else {}
    tiles = {}
    for idx, h in holes.items():
        v = valid.get(idx) or fresh.get(idx) or sample_tile(rng, h.extent, h.parts)
        if h.covers:
            v = cover(v, h.extent)
        d[K.TILE][idx] = tiles[idx] = tuple(v)
    steps = sketch.with_lengths(tiles)
    try:
        state = REPLAY_CACHE.replay(task.dag, steps)  # mutants share most steps: see there
        _compute_locations(state, steps, d[K.LOC], rng, an.constant_stages(state, task.constants)
                           | an.transposing_stages(state))
        # after the locations: a pack is at root, or computed per panel of its reader
        panels = pack_weights(state, steps, d[K.PACK], rng, apply_step, set(task.constants))
        _parallel(state, steps, d[K.PAR], rng, task.hardware.num_cores, d[K.CHUNK], panels)
        _vectorize(state, steps, d[K.VEC], rng)
        annotate_unroll(state, steps, d[K.UNROLL], rng)
    except ScheduleError:
        return None
    return Candidate(sketch_id, Decisions.from_tables(d), steps, state)


def apply_step(state: State, steps: list, step) -> None:
    """Apply ``step`` to a candidate's ``state`` (through the replay cache) and record it in
    ``steps``; the annotators of every target build candidates with it."""
    REPLAY_CACHE.apply(state, step)  # not atomic: a failed candidate is dropped whole
    steps.append(step)


def _choose(table: dict, name: str, n: int, rng, default=None) -> int:
    v = table.get(name)
    if not isinstance(v, int) or not 0 <= v < n:
        v = default if default is not None and rng.random() < 0.5 else int(rng.integers(n))
    table[name] = v
    return v


def _compute_locations(state, steps, table, rng, fixed=frozenset()) -> None:
    """Untiled, non-output stages at root (padding, branchy elementwise, a softmax's row maximum,
    exponentials and row sum, reordered rfactor partials): root, inline, or at a loop of their
    consumer outside its first reduction loop. A stage whose readers are computed inside a loop
    of one root stage (the softmax's row sum and the output both read ``exp``) may be computed at
    that loop too (:func:`~tecomp.search.analysis.shared_loops`), and is by default (half the
    draws): once per row, in a row's buffer, instead of a whole pass over memory per stage.
    The ``fixed`` stages stay at root: where they run once, at build time
    (:func:`~tecomp.search.analysis.constant_stages`), or once per call instead of once per
    reading tile (:func:`~tecomp.search.analysis.transposing_stages`)."""
    for sid in reversed(range(len(state.stages))):
        s = state.stages[sid]
        if s.is_placeholder or sid in fixed or s.location is not ComputeLocation.ROOT \
                or any(type(r) is not ReorderStep for r in s.relations) \
                or an.is_output(state, sid) or s.op.is_ragged or s.scope is not Scope.GLOBAL:
            continue
        if an.needs_multi_level_tiling(state, sid):
            continue
        cands = [("root",)]
        if s.op.reduce_axes == () and not an.is_output(state, sid):
            cands.append(("inline",))
        readers = sorted(effective_readers(state, sid))
        if len(readers) == 1:
            cid = readers[0]
            c = state.stages[cid]
            for k, it in enumerate(c.iters):
                if it.kind is IterKind.REDUCE or it.const_extent is None:
                    break
                if it.const_extent > 1 and it.annotation is Annotation.NONE and not (
                        s.op.reduce_axes and an.recomputed_at(state, sid, cid, k)):
                    cands.append(("at", cid, k))
        default = None
        if len(readers) > 1 or readers and state.stages[readers[0]].location is ComputeLocation.AT:
            shared = [("at", t, k) for t, k in an.shared_loops(state, sid, readers)]
            cands += [c for c in shared if c not in cands]
            default = cands.index(shared[0]) if shared else None
        choice = cands[_choose(table, s.name, len(cands), rng, default)]
        if choice[0] == "inline":
            apply_step(state, steps, ComputeInlineStep(sid))
        elif choice[0] == "at":
            apply_step(state, steps, ComputeAtStep(sid, choice[1], choice[2]))


def _sparse_nest(state, sid) -> bool:
    """Whether the stage or a stage computed inside it has data-dependent loops (sparse rows)."""
    todo, seen = [sid], set()
    while todo:
        k = todo.pop()
        seen.add(k)
        if an.has_data_dependent_loops(state, k):
            return True
        todo += [o for o, st in enumerate(state.stages) if o not in seen
                 and st.location is ComputeLocation.AT and st.attach[0] == k]
    return False


def _parallel(state, steps, table, rng, cores, chunks=None, panels=frozenset()) -> None:
    """Fuse the outer spatial loops of each root stage into one parallel loop: not past the loop
    a stage is computed at (a cache's register tile), not past the loop a weight is packed per
    panel at (the copy named in ``panels``), and over sparse rows with a ``chunk`` decision
    (balanced rows)."""
    chunks = {} if chunks is None else chunks
    for sid, s in enumerate(state.stages):
        if s.is_placeholder or s.location is not ComputeLocation.ROOT:
            continue
        its = s.iters
        sparse = _sparse_nest(state, sid)
        attached = {o.attach[1] for o in state.stages
                    if o.location is ComputeLocation.AT and o.attach[0] == sid}
        stops = {o.attach[1] for o in state.stages if o.name in panels
                 and o.location is ComputeLocation.AT and o.attach[0] == sid}
        rows = an.fused_rows(s)
        n_max, prod, default, cap = 0, 1, None, None
        # a reduction computed at an outer loop is not fused with loops its region does not
        # depend on (it would be recomputed per iteration of those: softmax's row sum per column)
        reds = [(o, st.attach[1]) for o, st in enumerate(state.stages) if not st.is_placeholder
                and st.op.reduce_axes and st.location is ComputeLocation.AT and st.attach[0] == sid]
        for k, it in enumerate(its):
            if it.kind is not IterKind.SPATIAL or it.const_extent is None \
                    or it.annotation is not Annotation.NONE \
                    or any(a < k and an.recomputed_at(state, o, sid, k) for o, a in reds):
                break
            n_max += 1
            prod *= it.const_extent
            if default is None and prod >= 16 * cores:
                default = n_max
            if k in attached and cap is None:
                # a draw keeps the cached output tile one parallel iteration: fused past its
                # loop, the cache's region shrinks to a slice of the drawn register tile (a
                # 32-channel vector built as 1), and the model learns the drawn tile as slow.
                # A recorded decision past it (logs of earlier versions) still replays
                cap = n_max
            if (sparse or rows) and k in attached or k in stops:
                # past the attach loop, a tile of fused rows is a part of a row: its cache's
                # region a box of two rows (a 4-pixel tile of a 7x7 image computed 14 pixels);
                # a packed panel is packed once per iteration of the loops fused with it
                break
        if n_max == 0:
            continue
        v = table.get(s.name)
        limit = n_max if cap is None or isinstance(v, int) and cap < v <= n_max else cap
        default = min(default if default is not None else n_max, limit)
        n = _choose(table, s.name, limit + 1, rng, default)
        if sparse and n == 0:  # sparse rows always run in parallel (the chunk decides how)
            n = table[s.name] = int(rng.integers(1, limit + 1))
        if n == 0:
            continue
        # fusing only loops of extent 1 (a batch of 1) ran serial, a duplicate of n = 0: such a
        # choice fuses up to the first longer loop (a channels-last conv's transpose back to
        # NCHW ran on one core in the best of 32 trials)
        while n < limit and all(it.const_extent == 1 for it in its[:n]):
            n += 1
        table[s.name] = n
        if n > 1:
            apply_step(state, steps, FuseStep(sid, tuple(range(n))))
        if state.stages[sid].iters[0].const_extent > 1:
            apply_step(state, steps, AnnotationStep(sid, 0, Annotation.PARALLEL))
            if sparse:
                _balance(state, steps, sid, chunks, rng)


def _balance(state, steps, sid, table, rng) -> None:
    """Rows of different lengths: static equal chunks, or dynamic chunks of a decided size."""
    name = state.stages[sid].name
    v = table.get(name)
    if v not in CHUNK_CHOICES:
        v = int(rng.choice(CHUNK_CHOICES))
    table[name] = v
    if v:
        apply_step(state, steps, PragmaStep(sid, 0, PRAGMA_PARALLEL_SCHEDULE,
                                         int(ParallelSchedule.DYNAMIC)))
        apply_step(state, steps, PragmaStep(sid, 0, PRAGMA_PARALLEL_CHUNK, v))


def _vectorize(state, steps, table, rng) -> None:
    """Fuse trailing spatial loops (product at most MAX_VECTOR, none an attach point) and
    vectorize them."""
    for sid, s in enumerate(state.stages):
        if s.is_placeholder or s.location is ComputeLocation.INLINE:
            continue
        attached = {o.attach[1] for o in state.stages
                    if o.location is ComputeLocation.AT and o.attach[0] == sid}
        its = s.iters
        n_max, prod = 0, 1
        for k in reversed(range(len(its))):
            it = its[k]
            if it.kind is not IterKind.SPATIAL or it.const_extent is None or k in attached \
                    or it.annotation is not Annotation.NONE or prod * it.const_extent > MAX_VECTOR:
                break
            n_max += 1
            prod *= it.const_extent
            if an.is_tiled(state, sid):
                break  # a tiled stage vectorizes its innermost loop only
        if n_max == 0:
            _vectorize_long_row(state, steps, table, rng, sid, attached)
            continue
        n = _choose(table, s.name, n_max + 1, rng, 1)
        if n == 0 and _sparse_nest(state, sid):
            # a sparse row's dense dimension is contiguous: scalar code there only loses (measured:
            # unvectorized candidates took a third of a 64-trial CSR SpMM budget)
            n = table[s.name] = 1
        if n == 0:
            continue
        first = len(its) - n
        if n > 1:
            apply_step(state, steps, FuseStep(sid, tuple(range(first, len(its)))))
        it = state.stages[sid].iters[first]
        if it.const_extent and it.const_extent > 1:
            apply_step(state, steps, AnnotationStep(sid, first, Annotation.VECTORIZE))


def _vectorize_long_row(state, steps, table, rng, sid: int, attached: set) -> None:
    """An untiled stage whose innermost loop is a spatial row longer than MAX_VECTOR: ``vec`` 1
    splits it, whole vectors inner, and vectorizes the inner part; 0 leaves it to LLVM.

    Why: the sketch's vector split keeps a stage at root, so a softmax's exp computed at its
    output's row loop (one 4 KB row in L1 instead of a 4 MB buffer) was vectorized by LLVM
    alone, which on an Intel AVX-512 core picks 256-bit vectors: 0.39 ms for a 1024 x 1024
    softmax, 0.29 with the row in 512-bit vectors.

    Not a row that crosses the rows of what the stage writes (a transposing pack that reads its
    source's rows whole, :func:`~tecomp.search.analysis.writes_across_rows`): split, its lanes
    store with a stride, and LLVM scatters them, vectorized or not (A.B^T's 512 x 512 ``B``
    packed in 0.24 ms, its whole row left to LLVM in 0.02, a fifth of the kernel)."""
    s = state.stages[sid]
    k = len(s.iters) - 1
    it = s.iters[k] if s.iters else None
    if it is None or it.kind is not IterKind.SPATIAL or an.is_tiled(state, sid) \
            or it.const_extent is None or it.const_extent <= MAX_VECTOR or k in attached \
            or it.annotation is not Annotation.NONE or an.writes_across_rows(state, sid):
        return
    if not _choose(table, s.name, 2, rng, 1):
        return
    # whole vectors: a row of 1000 takes 16 lanes, its last piece guarded (masked lanes)
    apply_step(state, steps, SplitStep(sid, k, (lane_run(it.const_extent),), True))
    apply_step(state, steps, AnnotationStep(sid, k + 1, Annotation.VECTORIZE))


def annotate_unroll(state, steps, table, rng, choices=UNROLL_CHOICES) -> None:
    """``auto_unroll_max_step`` (one of ``choices``) on the outermost loop of every stage with a
    reduction."""
    for sid, s in enumerate(state.stages):
        if s.is_placeholder or s.location is ComputeLocation.INLINE or not s.op.reduce_axes:
            continue
        v = table.get(s.name)
        if v not in choices:
            v = int(rng.choice(choices))
        table[s.name] = v
        if v and s.iters:
            apply_step(state, steps, PragmaStep(sid, 0, "auto_unroll_max_step", v))


