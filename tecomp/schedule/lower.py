"""Lowering: a ComputeDAG under a schedule becomes one loop-IR function.

The default schedule (every stage at root, natural loop order, padding stages materialized) is the
schedule every kernel starts from; the scheduling steps transform the same structures.
"""
from __future__ import annotations

from ..ir.dag import ComputeDAG, Stage
from ..ir.expr import Load, Reduce, TensorRead, Var, binary, simplify, substitute, transform
from ..ir.loop import Allocate, Buffer, For, ForKind, PrimFunc, Scope, Store, seq

__all__ = ["lower_default", "stage_buffers", "lower_stage"]


def stage_buffers(dag: ComputeDAG) -> dict:
    """One buffer per tensor (keyed by tensor), with names made unique."""
    used: dict = {}
    out = {}
    for s in dag.stages:
        name = s.name
        if name in used:
            used[name] += 1
            name = f"{name}_{used[name]}"
        used.setdefault(name, 0)
        out[s.tensor] = Buffer(name, s.tensor.shape, s.tensor.dtype, Scope.GLOBAL)
    return out


def to_loads(e, buffers: dict, env: dict):
    """Substitute iteration variables and turn DSL reads into buffer loads."""
    def fn(x):
        if isinstance(x, TensorRead):
            return Load(buffers[x.tensor], tuple(to_loads(i, buffers, env) for i in x.indices))
        if isinstance(x, Var):
            return env.get(x)
        return None
    return simplify(transform(e, fn))


def lower_stage(stage: Stage, buffers: dict, loop_vars: dict | None = None):
    """The natural loop nest of one compute stage: spatial loops, then (for a reduction) the
    initialization and the reduce loops around the update."""
    op = stage.op
    out = buffers[stage.tensor]
    env = {a: Var(a.name) for a in op.axes + op.reduce_axes} if loop_vars is None else loop_vars
    idx = tuple(to_loads(i, buffers, env) for i in op.out_index)
    body = op.body
    if isinstance(body, Reduce):
        value = to_loads(body.source, buffers, env)
        update = Store(out, idx, binary(body.kind.combiner, Load(out, idx), value))
        inner = seq(Store(out, idx, body.identity), _nest(op.reduce_axes, update, buffers, env))
    else:
        inner = Store(out, idx, to_loads(body, buffers, env))
    return _nest(op.axes, inner, buffers, env)


def _nest(axes, body, buffers, env):
    for a in reversed(axes):
        begin = to_loads(a.begin, buffers, env)
        extent = simplify(to_loads(a.end, buffers, env) - begin)
        body = For(env[a], begin, extent, ForKind.SERIAL, body)
    return body


def lower_default(dag: ComputeDAG, name: str | None = None) -> PrimFunc:
    """Every stage at root in topological order, intermediates in global buffers."""
    buffers = stage_buffers(dag)
    nests = [lower_stage(s, buffers) for s in dag.compute_stages]
    body = seq(*nests)
    args = {id(t) for t in dag.tensors}
    for s in reversed(dag.compute_stages):
        if id(s.tensor) not in args:
            body = Allocate(buffers[s.tensor], body)
    params = [buffers[t] for t in dag.tensors]
    return PrimFunc(name or f"tecomp_{dag.workload_key[:12]}", params, body,
                    n_outputs=len(dag.outputs))
