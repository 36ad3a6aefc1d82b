"""Constant folding of whole stages: the layout rewrite of constant weights (Ansor's layout rewrite,
done after lowering).

When the caller marks some inputs constant (``tc.build(..., constants={"weight": w})``), every
top-level loop nest of the lowered function that reads only constant inputs (or buffers that such
nests computed) — typically a ``cache_read(weight, pack=...)`` stage that re-lays the weight out
into the tiled layout the schedule wants — can run once, ahead of time, instead of on every call.
:func:`split_constants` cuts the function in two:

- the *prologue*, whose parameters are the constant inputs it reads followed by the buffers it
  produces for the main function (its outputs);
- the *main* function, whose parameters are the non-constant inputs, then the *bound* buffers
  (constant inputs the main function still reads, and the prologue's outputs), then the outputs.

A stage computed at a loop of another stage, or one that reads a non-constant input, stays in the
main function: only whole root nests are hoisted, so the split never changes what is computed.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir.loop import Allocate, PrimFunc, Seq, buffer_accesses, seq

__all__ = ["ConstantSplit", "split_constants", "check_constants", "constants_key"]


@dataclass
class ConstantSplit:
    """The result of :func:`split_constants`.

    Attributes
    ----------
    prologue : PrimFunc or None
        Computes the folded buffers from the constant inputs (None when nothing folds).
    main : PrimFunc
        The kernel run on every call.
    inputs : list of Buffer
        The non-constant input parameters of ``main``, in the DAG's order.
    bound : list of Buffer
        Parameters of ``main`` after ``inputs`` whose arrays are fixed at build time: a constant
        input (by its parameter buffer) or a prologue output.
    prologue_inputs : list of Buffer
        The constant inputs the prologue reads (its first parameters).
    """
    prologue: PrimFunc | None
    main: PrimFunc
    inputs: list
    bound: list
    prologue_inputs: list

    @property
    def folded(self) -> list:
        """The prologue's outputs (buffers computed once, ahead of time)."""
        return self.prologue.params[len(self.prologue_inputs):] if self.prologue else []


def check_constants(dag, constants: dict, empty=np.empty) -> dict:
    """``{name: C-contiguous array}`` of ``constants`` (copied, read-only), checked against the
    DAG's inputs: an unknown name raises ``KeyError`` listing the inputs, a wrong shape or dtype
    ``ValueError``/``TypeError``. ``empty(shape, dtype)`` allocates each copy (the build passes
    one that starts arrays on a cache line; lowering does not import codegen)."""
    if not isinstance(constants, dict):
        raise TypeError(f"constants= must be a dict of input name -> array, got "
                        f"{type(constants).__name__}")
    by_name = {t.name: t for t in dag.inputs}
    out = {}
    for name, arr in constants.items():
        t = by_name.get(name)
        if t is None:
            outputs = {o.name for o in dag.outputs}
            what = "an output" if name in outputs else "not an input"
            raise KeyError(f"constants names {name!r}, which is {what} of the DAG (inputs: "
                           f"{', '.join(by_name)})")
        if not isinstance(arr, np.ndarray):
            raise TypeError(f"constant {name!r} must be a numpy array, got {type(arr).__name__}")
        if arr.dtype != t.dtype.np:
            raise TypeError(f"constant {name!r} has dtype {arr.dtype}, expected {t.dtype}")
        if arr.shape != t.shape:
            raise ValueError(f"constant {name!r} has shape {arr.shape}, expected {t.shape}")
        a = empty(arr.shape, arr.dtype)  # a copy: later changes to the caller's array do not leak
        a[...] = arr
        a.flags.writeable = False
        out[name] = a
    return out


def _unwrap(body):
    """The top-level allocations and the root statements under them."""
    allocs = []
    while isinstance(body, Allocate):
        allocs.append(body.buffer)
        body = body.body
    return allocs, list(body.stmts) if isinstance(body, Seq) else [body]


def _reads_writes(stmt) -> tuple:
    """Buffers ``stmt`` loads from and stores to, less those it allocates itself."""
    reads, writes, local = buffer_accesses(stmt)
    return reads - local, writes - local


def split_constants(func: PrimFunc, n_inputs: int, constant_names) -> ConstantSplit:
    """Split ``func`` (parameters: ``n_inputs`` inputs, then outputs) into a prologue of the root
    loop nests that depend only on the inputs named in ``constant_names`` and the main function.

    Parameters
    ----------
    func : PrimFunc
        A lowered kernel (:func:`tecomp.lowering.lower`).
    n_inputs : int
        How many of ``func.params`` are inputs.
    constant_names : iterable of str
        Names of the constant input parameters.

    Returns
    -------
    ConstantSplit
    """
    names = set(constant_names)
    inputs, outputs = func.params[:n_inputs], func.params[n_inputs:]
    const_params = [b for b in inputs if b.name in names]
    allocs, roots = _unwrap(func.body)
    allocated = set(allocs)
    known = set(const_params)  # buffers whose contents are fixed at build time
    hoisted, kept = [], []
    for s in roots:
        reads, writes = _reads_writes(s)
        # a nest folds when everything it reads is known and it writes only its own buffers;
        # nests after a kept one may still fold: root nests only communicate through buffers
        if reads <= known and writes and writes <= allocated and not writes & _written(kept) \
                and all(b.explicit_strides is None for b in writes):  # handed over as numpy arrays
            hoisted.append(s)
            known |= writes
        else:
            kept.append(s)
    var_inputs = [b for b in inputs if b.name not in names]
    if not hoisted:  # the constants are still bound: parameters after the free inputs
        main = PrimFunc(func.name, var_inputs + const_params + list(outputs), func.body,
                        n_outputs=len(outputs))
        return ConstantSplit(None, main, var_inputs, const_params, [])
    main_reads = set()
    for s in kept:
        main_reads |= _reads_writes(s)[0]
    produced = set().union(*(_reads_writes(s)[1] for s in hoisted))
    folded = [b for b in allocs if b in produced and b in main_reads]
    pro_inputs = [b for b in const_params
                  if any(b in _reads_writes(s)[0] for s in hoisted)]
    pro_body = seq(*hoisted)
    for b in reversed(allocs):
        if b in produced and b not in folded:
            pro_body = Allocate(b, pro_body)
    prologue = PrimFunc(f"{func.name}_prologue", pro_inputs + folded, pro_body,
                        n_outputs=len(folded))
    main_body = seq(*kept)
    for b in reversed(allocs):
        if b not in produced:
            main_body = Allocate(b, main_body)
    bound = [b for b in const_params if b in main_reads] + folded
    main = PrimFunc(func.name, var_inputs + bound + list(outputs), main_body,
                    n_outputs=len(outputs))
    return ConstantSplit(prologue, main, var_inputs, bound, pro_inputs)


def _written(nests) -> set:
    out = set()
    for s in nests:
        out |= _reads_writes(s)[1]
    return out


def constants_key(constants) -> str:
    """The build cache's key part for ``constants`` (name -> array, or None): a hash of the
    names, dtypes, shapes and bytes; empty without constants."""
    if not constants:
        return ""
    import hashlib
    h = hashlib.sha256()
    for name in sorted(constants):
        a = constants[name]
        h.update(f"{name}:{a.dtype}:{a.shape};".encode())
        h.update(a.tobytes())
    return h.hexdigest()
