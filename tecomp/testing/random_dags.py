"""Random ComputeDAGs for property tests (hypothesis strategies).

A drawn DAG mixes elementwise chains, broadcasts, reductions over random axes and reductions with
data-dependent (CSR row) bounds. Each draw returns ``(dag, make_inputs)`` where
``make_inputs(rng)`` produces valid random inputs (never all zeros, index data well formed).
"""
from __future__ import annotations

import numpy as np

from .. import ir as tc

__all__ = ["random_dags", "layer_norm_dag", "random_contraction"]

_UNARY = ["tanh", "sigmoid", "abs", "neg", "exp_small", "sqrt_abs", "log1p_abs", "cast_round", "sin",
          "cos"]
_BINARY = ["add", "sub", "mul", "maximum", "minimum", "select"]


def _unary(name, x):
    if name == "neg":
        return -x
    if name == "exp_small":
        return tc.exp(-tc.abs(x))
    if name == "sqrt_abs":  # kept off 0, where sqrt turns a sum's rounding (a normalized row's
        # sum: 6e-8 in one order, 0 in another) into a difference past the tests' tolerance
        return tc.sqrt(tc.abs(x) + 1e-3)
    if name == "log1p_abs":
        return tc.log(tc.abs(x) + 1.0)
    if name == "cast_round":  # through int32 and back: exercises casts and truncation
        return tc.cast(tc.cast(x * 4.0, "int32"), x.dtype) * 0.25
    return getattr(tc, name)(x)


def _binary(name, x, y):
    if name == "add":
        return x + y
    if name == "sub":
        return x - y
    if name == "mul":
        return x * y
    if name == "select":
        return tc.if_then_else(x > y, x, y * 0.5)
    return getattr(tc, name)(x, y)


def random_dags(max_stages: int = 4, dtypes=("float32", "float64")):
    """A hypothesis strategy of ``(dag, make_inputs)``."""
    from hypothesis import strategies as st

    @st.composite
    def strategy(draw):
        t = draw(st.sampled_from(dtypes))
        rank = draw(st.integers(1, 3))
        shape = tuple(draw(st.lists(st.integers(1, 6), min_size=rank, max_size=rank)))
        inputs = [tc.placeholder(shape, t, name="x0")]
        makers = [lambda rng, s=shape: rng.uniform(-1.5, 1.5, s)]
        pool = list(inputs)
        n_stages = draw(st.integers(1, max_stages))
        for n in range(n_stages):
            kind = draw(st.sampled_from(["unary", "binary", "broadcast", "reduce", "csr", "norm"]))
            src = draw(st.sampled_from(pool))
            if kind == "norm" and src.ndim >= 2:  # sum -> mean -> sum of squares -> normalize
                out = _normalize(src, n)
            elif kind == "unary" or kind == "norm":
                op = draw(st.sampled_from(_UNARY))
                out = tc.compute(src.shape, lambda *ax, s=src, op=op: _unary(op, s[ax]), name=f"u{n}")
            elif kind == "binary":
                same = [p for p in pool if p.shape == src.shape]
                other = draw(st.sampled_from(same))
                op = draw(st.sampled_from(_BINARY))
                out = tc.compute(src.shape, lambda *ax, a=src, b=other, op=op: _binary(op, a[ax], b[ax]),
                                 name=f"b{n}")
            elif kind == "broadcast":  # a new input along one axis of src, broadcast over the rest
                d = draw(st.integers(0, src.ndim - 1))
                vec = tc.placeholder((src.shape[d],), t, name=f"v{n}")
                inputs.append(vec)
                makers.append(lambda rng, s=src.shape[d]: rng.uniform(-1.5, 1.5, (s,)))
                op = draw(st.sampled_from(_BINARY))
                out = tc.compute(src.shape, lambda *ax, a=src, v=vec, d=d, op=op:
                                 _binary(op, a[ax], v[ax[d]]), name=f"bc{n}")
            elif kind == "reduce":
                if src.ndim == 1:
                    keep = []
                else:
                    keep = sorted(draw(st.sets(st.integers(0, src.ndim - 1), min_size=1,
                                               max_size=src.ndim - 1)))
                red = [d for d in range(src.ndim) if d not in keep]
                rk = draw(st.sampled_from(["sum", "max", "min"]))
                out = _reduce_stage(src, keep, red, rk, n) if keep else _full_reduce(src, rk, n)
            else:
                out, extra = _csr_stage(draw, src, t, n)
                for tensor, maker in extra:
                    inputs.insert(0, tensor)
                    makers.insert(0, maker)
            pool.append(out)
        outputs = [pool[-1]]
        if len(pool) > 2 and draw(st.booleans()):
            cand = [p for p in pool[len(inputs):-1] if not isinstance(p.op, tc.tensor.PlaceholderOp)]
            if cand:
                outputs.insert(0, draw(st.sampled_from(cand)))
        dag = tc.ComputeDAG(inputs + outputs)

        def make_inputs(rng):
            return [np.ascontiguousarray(m(rng)).astype(x.dtype.np) for m, x in zip(makers, inputs)]
        return dag, make_inputs

    return strategy()


def _normalize(src, n, eps=1e-5):
    """Layer normalization over the last axis as four stages: two chained reductions."""
    *lead, last = src.shape
    k1, k2 = tc.reduce_axis(last, name=f"k{n}a"), tc.reduce_axis(last, name=f"k{n}b")
    total = tc.compute(tuple(lead), lambda *ax: tc.sum(src[ax + (k1,)], axis=k1), name=f"sum{n}")
    mean = tc.compute(tuple(lead), lambda *ax: total[ax] / float(last), name=f"mean{n}")

    def sq(*ax):
        d = src[ax + (k2,)] - mean[ax]
        return tc.sum(d * d, axis=k2)
    var = tc.compute(tuple(lead), sq, name=f"var{n}")
    return tc.compute(src.shape, lambda *ax: (src[ax] - mean[ax[:-1]])
                      / tc.sqrt(var[ax[:-1]] / float(last) + eps), name=f"norm{n}")


def layer_norm_dag(m: int = 512, n: int = 768, dtype: str = "float32"):
    """``(dag, make_inputs, reference)`` of a layer normalization written as sum -> mean -> sum of
    squared deviations -> normalize (issue 16: ``tc.tune`` crashed on it in ``mutate``)."""
    X = tc.placeholder((m, n), dtype, name="X")
    dag = tc.ComputeDAG([X, _normalize(X, 0)])

    def make_inputs(rng):
        return [rng.uniform(-2, 2, (m, n)).astype(dtype)]

    def reference(inputs):
        x = inputs[0].astype(np.float64)
        mu = x.mean(axis=1, keepdims=True)
        return [((x - mu) / np.sqrt(((x - mu) ** 2).mean(axis=1, keepdims=True) + 1e-5))]
    return dag, make_inputs, reference


def _reduce_stage(src, keep, red, rk, n):
    axes = [tc.reduce_axis(src.shape[d], name=f"r{d}") for d in red]

    def body(*sp):
        idx = [None] * src.ndim
        for d, v in zip(keep, sp):
            idx[d] = v
        for d, a in zip(red, axes):
            idx[d] = a
        return getattr(tc, rk)(src[tuple(idx)], axis=axes)
    return tc.compute(tuple(src.shape[d] for d in keep), body, name=f"r{n}")


def _full_reduce(src, rk, n):
    axes = [tc.reduce_axis(s, name=f"r{d}") for d, s in enumerate(src.shape)]
    return tc.compute((1,), lambda z: getattr(tc, rk)(src[tuple(axes)] + tc.cast(z, src.dtype),
                                                      axis=axes), name=f"r{n}")


def _csr_stage(draw, src, t, n):
    """Y[i, ...] = sum over r in [ptr[i], ptr[i+1]) of val[r] * src[col[r], ...]: data-dependent
    bounds and a data-dependent (gather) index."""
    from hypothesis import strategies as st
    rows = draw(st.integers(1, 5))
    nnz = draw(st.integers(0, 12))
    K = src.shape[0]
    ptr = tc.placeholder((rows + 1,), "int32", name=f"ptr{n}")
    col = tc.placeholder((nnz,), "int32", name=f"col{n}")
    val = tc.placeholder((nnz,), t, name=f"val{n}")

    def body(i, *rest):
        r = tc.reduce_axis((ptr[i], ptr[i + 1]), name="r")
        return tc.sum(val[r] * src[(col[r],) + rest], axis=r)
    out = tc.compute((rows,) + src.shape[1:], body, name=f"csr{n}")

    def make_ptr(rng):
        cuts = np.sort(rng.integers(0, nnz + 1, rows - 1))
        return np.concatenate([[0], cuts, [nnz]]).astype(np.int32)
    return out, [(val, lambda rng: rng.uniform(-1.5, 1.5, (nnz,))),
                 (col, lambda rng: rng.integers(0, K, nnz)),
                 (ptr, make_ptr)]


def random_contraction(rng, n_out=(1, 2), n_red=(1, 2), n_in=(2, 3), extents=(3, 5, 17, 32, 48)):
    """A sum of a product of inputs over random subsets and orders of the output and reduction
    axes (an einsum): ``n_out`` output axes, ``n_red`` reduction axes and ``n_in`` inputs, each
    drawn from its inclusive range; every axis is read by some input. Returns the DAG and its
    numpy einsum spec."""
    def draw(r):
        return int(rng.integers(r[0], r[1] + 1))
    n_o, n_r = draw(n_out), draw(n_red)
    letters = list("abcd")[:n_o] + list("wxyz")[:n_r]
    ext = {c: int(rng.choice(extents)) for c in letters}
    ins = [list(rng.permutation(letters)[:int(rng.integers(1, len(letters) + 1))])
           for _ in range(draw(n_in))]
    for c in letters:
        if not any(c in s for s in ins):
            ins[int(rng.integers(len(ins)))].append(c)
    phs = [tc.placeholder(tuple(ext[c] for c in s), "float32", name=f"in{k}")
           for k, s in enumerate(ins)]
    red = {c: tc.reduce_axis(ext[c], name=c) for c in letters[n_o:]}

    def body(*sp):
        env = {**dict(zip(letters[:n_o], sp)), **red}
        e = phs[0][tuple(env[c] for c in ins[0])]
        for p, s in zip(phs[1:], ins[1:]):
            e = e * p[tuple(env[c] for c in s)]
        return tc.sum(e, axis=list(red.values()))
    out = tc.compute(tuple(ext[c] for c in letters[:n_o]), body, name="out")
    spec = ",".join("".join(s) for s in ins) + "->" + "".join(letters[:n_o])
    return tc.ComputeDAG(phs + [out]), spec
