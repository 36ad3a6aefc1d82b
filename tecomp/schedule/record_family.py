"""Record families: the tuning records of a sparse DAG serve every DAG that differs from it only in
the number of nonzeros.

A sparse DAG's workload key includes its nnz (the lengths of ``data`` / ``indices`` and of an SDDMM
output), so a matrix with one more nonzero has another key and would find no record. Its *family
key* is the same structural hash with every nnz-sized dimension abstracted: the rows, columns, the
dense sizes, the dtypes, the block shape and the operator stay in it. The tuner writes the family
key beside the workload key in each record (the ``"family"`` field of a v1 line; old readers ignore
it), and :func:`tecomp.schedule.log_schedule.select_from_log` falls back to the records of the
family when the exact key has none.

A schedule is replayed on the new DAG before it is used, and it is only used when it does not
depend on nnz: a split of a loop whose constant extent is an nnz (an elementwise stage over an
SDDMM output, say) has lengths chosen for the old nnz, so such a record is refused
(:func:`nnz_dependence`). The sparse sketch rules never split those loops: the nonzero loops they
make have data-dependent extents (``[indptr[i], indptr[i+1])``), read at run time.

A dimension is nnz-sized when a loop with data-dependent bounds (bounds that read a tensor) indexes
it, when it is the ``indices`` of a :class:`~tecomp.ir.tensor.CSRCheck`, or when a constant loop
that indexes such a dimension of a producer writes it (the output of an elementwise stage over
nonzeros). A reduction over all nonzeros keeps its nnz bound in the key (no family match).
"""
from __future__ import annotations

import hashlib
import json
import weakref

from ..ir.expr import TensorRead, Var
from ..ir.tensor import CSRCheck
from ..ir.traverse import structural_key, walk
from .state import State
from .steps import SplitStep, step_from_record

__all__ = ["FAMILY_VERSION", "family_key", "nnz_dims", "nnz_dependence", "with_family"]

#: the version of the family key's description (a new version gives new keys: no false matches)
FAMILY_VERSION = 1

_NNZ = "nnz"
_KEYS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _data_dependent(axis) -> bool:
    """Bounds that load from a tensor (CSR rows), not merely depend on other loops."""
    return any(isinstance(x, TensorRead) for b in (axis.begin, axis.end) for x in walk(b))


def _loops(op) -> tuple:
    return tuple(op.axes) + tuple(op.reduce_axes)


class _Nnz:
    """Which dimensions are nnz-sized and which loops run over nonzeros, for ``(tensor, op)``
    pairs (``op`` None for a placeholder): facts spread both ways along every read ``t[.., a, ..]``
    and every output index until nothing changes (a loop over nonzeros makes the dimension it
    indexes nnz-sized; a loop indexing an nnz-sized dimension runs over nonzeros)."""

    def __init__(self, pairs, checks=()):
        self.dims: dict = {}  # id(tensor) -> set of dims
        self.loops: dict = {}  # id(op) -> set of id(loop)
        for c in checks:
            if isinstance(c, CSRCheck) and c.indices is not None:
                self.dims.setdefault(id(c.indices), set()).add(0)
        ops = [(t, op) for t, op in pairs if op is not None]
        links = []  # (op, tensor, dim, loop)
        for t, op in ops:
            own = {id(a) for a in _loops(op)}
            self.loops[id(op)] = {id(a) for a in _loops(op) if _data_dependent(a)}
            exprs = [op.body] + [b for a in _loops(op) for b in (a.begin, a.end)]
            for e in exprs:
                for x in walk(e):
                    if isinstance(x, TensorRead):
                        links += [(op, x.tensor, d, id(ix)) for d, ix in enumerate(x.indices)
                                  if isinstance(ix, Var) and id(ix) in own]
            links += [(op, t, d, id(ix)) for d, ix in enumerate(op.out_index)
                      if isinstance(ix, Var) and id(ix) in own]
        changed = True
        while changed:
            changed = False
            for op, t, d, loop in links:
                dims, loops = self.dims.setdefault(id(t), set()), self.loops[id(op)]
                if (loop in loops) != (d in dims):
                    dims.add(d)
                    loops.add(loop)
                    changed = True

    def tensor_dims(self, t) -> set:
        return self.dims.get(id(t), set())

    def const_loops(self, op) -> set:
        """Names of the loops of ``op`` with a constant extent that run over nonzeros."""
        found = self.loops.get(id(op), set())
        return {a.name for a in _loops(op) if id(a) in found and not _data_dependent(a)}


def _dag_nnz(dag) -> _Nnz:
    return _Nnz([(s.tensor, None if s.is_placeholder else s.op) for s in dag.stages], dag.checks)


def nnz_dims(dag) -> dict:
    """The nnz-sized dimensions of ``dag``'s tensors: ``{tensor: sorted dims}`` (only tensors that
    have some). Empty for a dense DAG."""
    nz = _dag_nnz(dag)
    return {s.tensor: sorted(nz.tensor_dims(s.tensor)) for s in dag.stages
            if nz.tensor_dims(s.tensor)}


def family_key(dag) -> str:
    """The family key of ``dag``: its workload description with every nnz-sized dimension (and
    the nnz of its CSR checks) abstracted, hashed. ``""`` for a DAG with no nnz-sized dimension
    (a dense DAG is its own family: its workload key says all)."""
    hit = _KEYS.get(dag)
    if hit is not None:
        return hit
    nz = _dag_nnz(dag)
    if not any(nz.dims.values()):
        _KEYS[dag] = ""
        return ""
    pos = {id(s.tensor): s.index for s in dag.stages}

    def shape(t):
        nnz = nz.tensor_dims(t)
        return [_NNZ if d in nnz else n for d, n in enumerate(t.shape)]

    desc = ["family", FAMILY_VERSION, [pos[id(t)] for t in dag.tensors]]
    for s in dag.stages:
        if s.is_placeholder:
            desc.append(["ph", shape(s.tensor), s.tensor.dtype.name])
            continue
        op = s.op
        var_pos = {id(a): ("a", n) for n, a in enumerate(op.axes)}
        var_pos.update({id(a): ("r", n) for n, a in enumerate(op.reduce_axes)})
        over_nnz = nz.loops.get(id(op), set())

        def names(x, var_pos=var_pos):
            return var_pos[id(x)] if isinstance(x, Var) else ("t", pos[id(x)])
        axes = [[structural_key(a.begin, names),
                 _NNZ if id(a) in over_nnz and not _data_dependent(a)
                 else structural_key(a.end, names)] for a in op.axes]
        desc.append(["c", shape(s.tensor), s.tensor.dtype.name, axes,
                     [structural_key(e, names) for e in op.out_index] if op.is_ragged else 0,
                     structural_key(op.body, names), [_check(c, pos) for c in op.checks]])
    text = json.dumps(desc, separators=(",", ":"), default=repr)
    key = hashlib.sha256(text.encode()).hexdigest()[:32]
    _KEYS[dag] = key
    return key


def _check(c, pos) -> list:
    if isinstance(c, CSRCheck):
        return ["csr", pos[id(c.indptr)], _NNZ,
                pos[id(c.indices)] if c.indices is not None else -1, c.ncols or -1]
    raise TypeError(f"unknown check {c!r}")


def nnz_dependence(dag, step_records) -> str | None:
    """Why the schedule of ``step_records`` depends on ``dag``'s nnz, or ``None`` when it does not.

    The steps are replayed on ``dag`` (a replay error propagates); before each split, the loop it
    splits is looked at: a loop with a constant extent that runs over nonzeros (an nnz-sized
    dimension, or a fusion with one) was split for the nnz of the DAG the record was tuned on.
    """
    st = State(dag)
    for rec in step_records:
        step = step_from_record(rec)
        if isinstance(step, SplitStep) and 0 <= step.stage_id < len(st.stages):
            stage = st.stages[step.stage_id]
            if not stage.is_placeholder and 0 <= step.iter_id < len(stage.iters):
                it = stage.iters[step.iter_id]
                nz = _Nnz([(x.tensor, None if x.is_placeholder else x.op) for x in st.stages],
                          dag.checks)
                over = nz.const_loops(stage.op)
                if it.const_extent is not None and any(p in over for p in it.name.split("@")):
                    return (f"it splits loop '{it.name}' of '{stage.name}' (extent "
                            f"{it.const_extent}, a number of nonzeros) by {list(step.lengths)}")
        st.apply(step, atomic=False)
    return None


def with_family(records, dag) -> list:
    """``records`` with ``dag``'s family key set on those of ``dag``'s workload key that lack one
    (logs written before family keys existed), so that DAGs of other nnz find them; the others are
    returned as they are. The records given are not changed (copies are made)."""
    import copy
    fam, key = family_key(dag), dag.workload_key
    out = []
    for r in records:
        if fam and r.workload_key == key and not r.family:
            r = copy.copy(r)
            r.family = fam
        out.append(r)
    return out
