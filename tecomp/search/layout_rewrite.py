"""The ``pack`` decision: re-lay a weight out into the tile layout of the stage that reads it
(Ansor's layout rewrite, as a decision of the search instead of a fixed DAG rewrite).

For a tiled reduction (matmul, conv) reading an input whose one dimension is indexed by exactly one
split spatial axis (``B[k, j]`` by ``j``; a conv weight by the output channel ``o``), the decision
picks how many inner tile levels of that axis the packed layout follows: 0 keeps the input as it
is; ``L >= 1`` adds a root ``cache_read(pack=(dim, f))`` with ``f`` the product of the axis's
``L`` innermost tile lengths, so that one tile's weights are contiguous. The pack stage depends
only on the weight: ``tc.build(..., constants={...})`` runs it once at build time; without
``constants=`` it is part of the timed kernel.

An input packed inside the timed kernel (``B`` of a matmul, not a constant) may instead be packed
one panel at a time (the ``"<name>@panel"`` entry, 1): the reader's loop over the packed axis's
outermost part moves to the front (after the outer loops of the input's other axes: a batched
operand's batch and head), the copy is computed inside it, and that loop ends the parallel loop
(:func:`~tecomp.search.annotate.materialize_cpu` stops the parallel fusion there).
Each thread then packs only the panels it multiplies, into a buffer that stays in its own cache,
instead of a root copy of the whole input that both threads write and then read across cores:
the best tuned 1024^3 record ran 223-224 GFLOP/s against 219-220 with its B packed at root (hand
schedules: 217-226 against 204-206; 2 threads, Zen 4, interleaved in one process). On Q.K^T per
head it measured level.
"""
from __future__ import annotations

import math

from ..ir.expr import TensorRead, Var
from ..ir.loop import Scope
from ..ir.traverse import structural_key, walk
from ..schedule.compute_steps import CacheReadStep, ComputeAtStep
from ..schedule.state import Annotation, ComputeLocation, IterKind
from ..schedule.steps import ReorderStep
from . import analysis as an

__all__ = ["pack_candidates", "pack_weights", "PANEL_SUFFIX"]

#: the pack table's key suffix of an input's panel decision (0: packed at root, 1: per panel)
PANEL_SUFFIX = "@panel"


def pack_candidates(state) -> list:
    """``[(input stage id, reader stage id, dim, axis name), ...]`` of the packable inputs."""
    out = []
    inputs = {id(t): k for k, t in enumerate(state.dag.inputs)}
    for rid, r in enumerate(state.stages):
        if r.is_placeholder or r.location is ComputeLocation.INLINE or not r.op.reduce_axes \
                or not an.is_tiled(state, rid) or an.has_data_dependent_loops(state, rid):
            continue
        spatial = {id(a): a.name for a in r.op.axes}
        all_reads = [x for x in walk(r.op.body) if isinstance(x, TensorRead)]
        for t in r.op.inputs:
            reads = [x for x in all_reads if x.tensor is t]
            if len(reads) > 1:  # ``(X[i, k] - Y[j, k]) * (X[i, k] - Y[j, k])`` reads Y twice at
                # one place (a squared distance): one copy serves both
                reads = list({structural_key(x, id): x for x in reads}.values())
            if id(t) not in inputs or len(reads) != 1:
                continue
            # the dimension of an axis this input has alone: a batch axis that indexes the
            # other operand too (a batched matmul's b, h) stays where it is
            shared = {id(v) for rd in all_reads if rd.tensor is not t
                      for i in rd.indices for v in walk(i) if isinstance(v, Var)}
            dims = [d for d, i in enumerate(reads[0].indices)
                    if isinstance(i, Var) and id(i) in spatial and id(i) not in shared]
            if len(dims) > 1:
                # several axes of its own (a capsule weight W[.., o, k, j] by o and j): the one
                # the reader's lanes run along, unless it is already the innermost dimension
                inner = _innermost_axis(r)
                dims = [d for d in dims if d != len(reads[0].indices) - 1
                        and spatial[id(reads[0].indices[d])] == inner]
            if len(dims) != 1:
                continue
            sid = next(k for k, s in enumerate(state.stages) if s.tensor is t)
            out.append((sid, rid, dims[0], spatial[id(reads[0].indices[dims[0]])]))
    return out


def _innermost_axis(stage) -> str | None:
    """The root axis of the stage's innermost loop, where a tiled stage's vector lanes run (by
    the loop order alone: a sketch's tile lengths are not chosen yet); None for a reduction."""
    it = stage.iters[-1] if stage.iters else None
    return it.name.split(".")[0] if it is not None and it.kind is IterKind.SPATIAL else None


def _gathers(state, sid: int, rid: int, dim: int, axis: str, levels: list) -> bool:
    """Whether the reader's vector lanes would read input ``sid`` across its dimension ``dim``
    with a stride (gathers): its innermost loop runs along ``axis`` with more than one
    iteration, and ``dim`` is not the input's last dimension (a transposed conv's weight
    ``W[c, o, ky, kx]`` read by lanes over ``o``; measurements in ``docs/search_notes.md``)."""
    return (bool(levels) and levels[-1] > 1 and _innermost_axis(state.stages[rid]) == axis
            and dim != len(state.stages[sid].tensor.shape) - 1)


def _inner_levels(stage, axis: str) -> list:
    """Extents of the split parts ``axis.1``, ``axis.2``, ... of a tiled stage (outer to inner)."""
    ext = {it.name: it.const_extent for it in stage.iters}
    out, k = [], 1
    while f"{axis}.{k}" in ext:
        out.append(ext[f"{axis}.{k}"] or 1)
        k += 1
    return out


def pack_weights(state, steps, table: dict, rng, apply, fixed=frozenset()) -> set:
    """Apply the ``pack`` decisions (input name -> inner tile levels followed, 0: none; and
    ``name@panel``, see the module's docstring). Inputs named in ``fixed`` (build-time
    constants, packed once at root) are never packed per panel. Returns the names of the copies
    computed per panel."""
    done, panels = set(), set()
    while True:  # candidates anew after each pack: the cache stage shifts the stage ids
        todo = [c for c in pack_candidates(state) if state.stages[c[0]].name not in done]
        if not todo:
            return panels
        sid, rid, dim, axis = todo[0]
        name = state.stages[sid].name
        done.add(name)
        levels = _inner_levels(state.stages[rid], axis)
        v = table.get(name)
        if not isinstance(v, int) or not 0 <= v <= len(levels):
            # half the samples keep the layout: packing inside the timed kernel is an extra pass
            # over the input, which pays only for some tilings; but where the reader's lanes
            # run along the axis and it is not the input's last dimension, the unpacked loads
            # are gathers, and nine samples in ten pack
            keep = 0.1 if _gathers(state, sid, rid, dim, axis, levels) else 0.5
            v = 0 if not levels or rng.random() < keep else int(rng.integers(1, len(levels) + 1))
        table[name] = v
        factor = math.prod(levels[len(levels) - v:]) if v else 1
        key = name + PANEL_SUFFIX
        panel = _panel_order(state, sid, rid, axis) if factor > 1 and name not in fixed else None
        if panel is None:
            table.pop(key, None)  # no panel decision where there is no per-panel copy
        else:
            if table.get(key) not in (0, 1):
                table[key] = int(rng.integers(2))
            if not table[key]:
                panel = None
        if factor <= 1:
            continue
        reader = state.stages[rid].tensor
        if panel is not None and panel[0] != tuple(range(len(panel[0]))):
            apply(state, steps, ReorderStep(rid, panel[0]))
        apply(state, steps, CacheReadStep(sid, Scope.GLOBAL, (rid,), (dim, factor)))
        n = len(state.stages[sid + 1].iters)
        if dim != n - 2:
            # the copy's loops as the packed layout has them end on the tile's lanes, read
            # one element per source row; the source's own last dimension innermost reads
            # rows whole (Q.K^T's packs ran 0.30 -> 0.24 ms in the timed kernel)
            order = tuple(range(n - 2)) + (n - 1, n - 2)
            apply(state, steps, ReorderStep(sid + 1, order))
        if panel is not None:
            rid = next(k for k, s in enumerate(state.stages) if s.tensor is reader)
            apply(state, steps, ComputeAtStep(sid + 1, rid, panel[1]))
            panels.add(state.stages[sid + 1].name)


def _panel_order(state, sid: int, rid: int, axis: str) -> tuple | None:
    """``(loop order, panel loop)`` of the reader for a copy of input ``sid`` computed per panel:
    the outer loops of the input's other axes (a batched operand's batch and head), then the
    loop over the outermost part of the packed ``axis``, then the rest as they were; the copy
    is computed at that loop, once for all the loops inside it. None when the reader is not a
    root stage, has a stage computed inside it already, or its loops above the first reduction
    are not plain spatial loops (fused, annotated) or the panel loop has one iteration."""
    r = state.stages[rid]
    if r.location is not ComputeLocation.ROOT or any(
            o.location is ComputeLocation.AT and o.attach[0] == rid for o in state.stages):
        return None  # (one panel per reader: the other operand's would be moved inside it)
    t = state.stages[sid].tensor
    spatial = {id(a): a.name for a in r.op.axes}
    own = {spatial[id(v)] for x in walk(r.op.body) if isinstance(x, TensorRead) and x.tensor is t
           for i in x.indices for v in walk(i) if isinstance(v, Var) and id(v) in spatial}
    lead, panel = [], None
    for k, it in enumerate(r.iters):
        if it.kind is not IterKind.SPATIAL:
            break
        if it.annotation is not Annotation.NONE or "@" in it.name:
            return None
        base, _, level = it.name.rpartition(".")
        if level != "0":
            break
        if base == axis:
            panel = k
        elif base in own:
            lead.append(k)
    if panel is None or (r.iters[panel].const_extent or 0) < 2:
        return None
    first = lead + [panel]
    order = tuple(first + [k for k in range(len(r.iters)) if k not in first])
    return order, len(lead)
