"""The helpers the generated code calls, and the namespace it runs in (:data:`RUNTIME`).

"Uniform" values are Python ints/bools or numpy scalars; "varying" ones are 1-d arrays over the
lanes (threads of a kernel, or iterations of a vectorized loop nest). ``m`` is the mask of the
active lanes (None: all of them); ``chk[d]`` says axis ``d`` of an access needs a bounds check;
``lead`` is the per-lane/per-block copy index of a local/shared buffer (None: a global buffer).
"""
from __future__ import annotations

import math
import operator

import numpy as np

from .errors import InterpError
from .race import Race

# ------------------------------------------------------------------------------ bounds checks


def _oob(name, dim, value, shape, mask=None):
    """An out-of-range uniform index: raise, unless no lane is active (then read element 0)."""
    if mask is not None and not mask.any():
        return 0
    raise IndexError(f"index {int(value)} is out of bounds for axis {dim} of buffer '{name}' "
                     f"with shape {tuple(shape)}")


def _check_arr(name, dim, i, n, shape):
    if i.size and (i.min() < 0 or i.max() >= n):
        bad = i[(i < 0) | (i >= n)][0]
        raise IndexError(f"index {int(bad)} is out of bounds for axis {dim} of buffer '{name}' "
                         f"with shape {tuple(shape)}")


def _check_idx(name, shape, idx, chk):
    """Bounds-check the (uniform or varying) indices of an access by active lanes only."""
    for d, i in enumerate(idx):
        if not chk[d]:
            continue
        if np.ndim(i):
            _check_arr(name, d, i, shape[d], shape)
        elif not 0 <= i < shape[d]:
            _oob(name, d, i, shape)


# ------------------------------------------------------------------------------ memory access

def _gl(arr, name, m, lead, idx, chk, race=None):
    """Gather ``arr[idx]`` for the lanes (``lead`` appends the per-lane/per-block copy index).

    Inactive lanes read element 0; ``race`` (a :class:`~.race.Race`) records the read for the
    shared-memory race check."""
    shape = arr.shape
    if arr.size == 0:
        if m is None or m.any():
            raise IndexError(f"read from buffer '{name}' with shape {tuple(shape)} (no elements)")
        return np.zeros(len(m), arr.dtype)
    out = []
    for d, i in enumerate(idx):
        if np.ndim(i):
            if m is not None:
                i = np.where(m, i, 0)
            if chk[d]:
                _check_arr(name, d, i, shape[d], shape)
        elif chk[d] and not 0 <= i < shape[d]:
            i = _oob(name, d, i, shape, m)
        out.append(i)
    if lead is not None:
        out.append(lead)
    out = tuple(out)
    if race is not None:
        race.access(out, m, write=False)
    return arr[out]


def _st(arr, name, m, lead, idx, val, chk, race=None):
    """Scatter ``val`` into ``arr[idx]`` for the active lanes."""
    sel = None
    if m is not None:
        sel = np.flatnonzero(m)
        if sel.size == 0:
            return
        if sel.size != m.size:
            idx = [i[sel] if np.ndim(i) else i for i in idx]
            if lead is not None:
                lead = lead[sel]
            if np.ndim(val):
                val = val[sel]
        else:
            sel = None
    _check_idx(name, arr.shape, idx, chk)
    if lead is None and not any(np.ndim(i) for i in idx):
        # every active lane writes the same element: the last one wins
        arr[tuple(idx)] = val[-1] if np.ndim(val) else val
        return
    if lead is not None:
        idx = (*idx, lead)
    idx = tuple(idx)
    if race is not None:
        race.access(idx, sel, write=True)
    arr[idx] = val


def _stl(view, m, val):
    """Store into a per-lane/per-block row (uniform indices) under mask ``m``."""
    np.copyto(view, val, casting="unsafe", where=True if m is None else m)


# ------------------------------------------------------------------------------ control flow

def _barrier(m, n_blocks, n_threads):
    if m is None:
        return
    mm = m.reshape(n_blocks, n_threads)
    if not (mm.all(axis=1) | ~mm.any(axis=1)).all():
        raise InterpError("barrier in divergent control flow: some threads of a block reach it "
                          "and others do not")


def _maxact(e, m):
    """Largest trip count over the active lanes (0 if none)."""
    if np.ndim(e) == 0:
        return max(int(e), 0) if m is None or m.any() else 0
    if m is not None:
        e = e[m]
    return max(int(e.max()), 0) if e.size else 0


# ------------------------------------------------------------------------------ arithmetic
# Integer // and % floor and give 0 for a zero divisor; float -> int casts truncate and give 0
# for non-finite values.

def _fdiv(a, b):
    return a // b if b else a - a


def _fmod(a, b):
    return a % b if b else a - a


def _by_nonzero(op, a, b):
    """``op(a, b)`` for varying operands, 0 where ``b`` is 0."""
    if not isinstance(b, np.ndarray):
        return op(a, b) if b else np.zeros_like(a)
    z = b == 0
    if not z.any():
        return op(a, b)
    return np.where(z, 0, op(a, np.where(z, 1, b)))


def _vfdiv(a, b):
    return _by_nonzero(operator.floordiv, a, b)


def _vfmod(a, b):
    return _by_nonzero(operator.mod, a, b)


def _f2i(a, t):
    if a - a != 0:  # inf or nan
        return t.type(0)
    return np.trunc(a).astype(t)


def _vf2i(a, t):
    return np.where(np.isfinite(a), np.trunc(a), 0).astype(t)


def _i2i(a, t):
    return np.int64(a).astype(t)


def _vsel(c, a, b, t):
    return np.where(c, a, b).astype(t, copy=False)


# ------------------------------------------------------------------------------ vectorized nests

def _grid(ns):
    """The iteration numbers of a loop nest with trip counts ``ns``, flattened in execution order:
    one int64 array per loop."""
    total = math.prod(ns)
    flat = np.arange(total, dtype=np.int64)
    out, stride = [], total
    for n in ns:
        stride //= n
        out.append(flat // stride % n if stride > 1 else flat % n)
    return out


def _injective(coefs, ns) -> bool:
    """Whether ``sum(c * v)`` over the box ``0 <= v < n`` takes each value at most once (a mixed
    radix: each coefficient exceeds the span of the smaller ones)."""
    span = 0
    for c, n in sorted(zip((abs(c) for c in coefs), ns)):
        if n > 1:
            if c <= span:
                return False
            span += c * (n - 1)
    return True


def _nest_ok(ns, coefs, lo, hi) -> bool:
    """Whether a nest with trip counts ``ns`` has ``lo..hi`` iterations and, with ``coefs``, stores
    a different element in each."""
    return lo <= math.prod(ns) <= hi and (coefs is None or _injective(coefs, ns))


def _reduce_nest(arr, name, ufunc, idx, chk, vals, m, ns, perm, n_map, t, identity):
    """``arr[idx] = arr[idx] op vals`` over a loop nest, folded in execution order per element.

    The nest has trip counts ``ns``; ``perm`` lists its loops, those the stored element depends on
    (``n_map`` of them) first; ``idx`` and ``vals`` are per iteration (flattened nest), ``m`` the
    iterations that store. Iterations that do not store contribute the operation's identity, which
    leaves every value unchanged (``-0.0`` for +, ``+0.0`` for -)."""
    total = math.prod(ns)
    n_m = math.prod(ns[d] for d in perm[:n_map])
    n_r = total // n_m

    def rows(x):  # (iterations) -> (stored element, its updates in order)
        x = np.broadcast_to(x, (total,)).reshape(ns)
        return x.transpose(perm).reshape(n_m, n_r)

    vals = rows(np.asarray(vals, dtype=t))
    idx = [rows(i)[:, 0] if np.ndim(i) else i for i in idx]
    if m is not None:
        m2 = rows(m)
        vals = np.where(m2, vals, np.asarray(identity, dtype=t))
        active = m2.any(axis=1)
        if not active.any():
            return
        idx = [i[active] if np.ndim(i) else i for i in idx]
        vals = vals[active]
    _check_idx(name, arr.shape, idx, chk)
    loc = tuple(idx)
    if not any(np.ndim(i) for i in idx):  # one element
        seq = np.concatenate((np.asarray(arr[loc], dtype=t).reshape(1), vals.reshape(-1)))
        arr[loc] = ufunc.accumulate(seq)[-1]
        return
    acc0 = np.broadcast_to(arr[loc], (vals.shape[0],))
    seq = np.concatenate((acc0[:, None].astype(t), vals), axis=1)
    arr[loc] = ufunc.accumulate(seq, axis=1)[:, -1]


RUNTIME = {
    "np": np, "_oob": _oob, "_gl": _gl, "_st": _st, "_stl": _stl, "_barrier": _barrier,
    "_maxact": _maxact, "_fdiv": _fdiv, "_fmod": _fmod, "_vfdiv": _vfdiv, "_vfmod": _vfmod,
    "_f2i": _f2i, "_vf2i": _vf2i, "_i2i": _i2i, "_vsel": _vsel, "_grid": _grid,
    "_nest_ok": _nest_ok, "_reduce_nest": _reduce_nest, "_Race": Race,
}
