"""A numpy interpreter for the loop IR: the oracle of the tests and the GPU emulator.

:func:`run` executes a :class:`~tecomp.ir.loop.PrimFunc` on numpy arrays (in ``func.params`` order;
outputs are written in place). The loop IR is compiled once per function into Python source (nested
``for`` loops over numpy scalars and arrays), which is ``exec``-ed and cached.

Semantics are those of :func:`tecomp.ir.evaluate.eval_np`: every value is computed in its own type
(float32 arithmetic in float32, float16 in float16, integers wrap), integer ``//`` and ``%`` floor
and give 0 for a zero divisor, float -> int casts truncate (non-finite values give 0), ``Select`` is
lazy (a read in the branch not taken never faults). ``&&``/``||`` evaluate both operands.

CPU programs (no thread-bound loop) run with one lane: index math in Python ints, values as numpy
scalars, except that a loop nest runs as numpy operations over all its iterations at once where
that provably gives the same result (:mod:`.nest`; not one with fewer than ``VECTOR_MIN_TRIP`` or
more than ``VECTOR_MAX_TRIP`` iterations). GPU programs run all threads of all blocks in lockstep
lanes (:mod:`.kernel`), and shared buffers are checked for races (:mod:`.race`, unless
``check_races=False``).

Every read and write is checked against its buffer's shape (statically when interval analysis
proves it in range, otherwise at run time); an out-of-range access raises :class:`IndexError`
naming the buffer, never wraps around. Allocated float buffers start filled with NaN.

Modules: :mod:`.exprs` (generator state, expressions), :mod:`.stmts` (statements, loops, the
function), :mod:`.nest` (vectorized nests), :mod:`.kernel` (GPU lanes), :mod:`.race` (race check),
:mod:`.runtime` (what the generated code calls).
"""
from __future__ import annotations

import itertools
import linecache
import sys
import weakref
from typing import Callable

import numpy as np

from ...ir.loop import PrimFunc
from .errors import InterpError
from .stmts import Gen

__all__ = ["run", "compile_func", "source", "InterpError", "VECTOR_MIN_TRIP", "VECTOR_MAX_TRIP"]

VECTOR_MIN_TRIP = 16    # an eligible loop nest with fewer iterations runs serially (numpy overhead)
VECTOR_MAX_TRIP = 1 << 20  # ... and one with more runs its outer loop serially (memory)

_CACHE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_SERIAL = itertools.count()


def _compile(func: PrimFunc, check_races: bool = True):
    per_func = _CACHE.setdefault(func, {})
    options = (check_races, VECTOR_MIN_TRIP, VECTOR_MAX_TRIP)
    hit = per_func.get(options)
    if hit is not None and hit[0] is func.body and hit[1] == tuple(func.params):
        return hit[2], hit[3]
    gen = Gen(func, check_races, (VECTOR_MIN_TRIP, VECTOR_MAX_TRIP))
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 20000))  # deep expression trees
    try:
        name, src = gen.function()
    finally:
        sys.setrecursionlimit(limit)
    filename = f"<tecomp.interp {func.name} #{next(_SERIAL)}>"
    code = compile(src, filename, "exec")
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)  # tracebacks
    weakref.finalize(func, linecache.cache.pop, filename, None)
    exec(code, gen.ns)
    fn = gen.ns[name]
    per_func[options] = (func.body, tuple(func.params), fn, src)
    return fn, src


def source(func: PrimFunc, check_races: bool = True) -> str:
    """The Python source the interpreter runs for ``func`` (for debugging)."""
    return _compile(func, check_races)[1]


def compile_func(func: PrimFunc, check_races: bool = True) -> Callable[[list], None]:
    """:func:`run` with the compilation done once: returns ``f(arrays)``."""
    fn, _ = _compile(func, check_races)
    params = list(func.params)

    def call(arrays):
        _check_args(func.name, params, arrays)
        with np.errstate(all="ignore"):
            fn(*arrays)
    return call


def _check_args(name, params, arrays) -> None:
    if len(arrays) != len(params):
        raise ValueError(f"{name} takes {len(params)} arrays, got {len(arrays)}")
    for b, a in zip(params, arrays):
        if not isinstance(a, np.ndarray):
            raise TypeError(f"argument '{b.name}' must be a numpy array, got {type(a).__name__}")
        if a.shape != tuple(b.shape) or a.dtype != b.dtype.np:
            raise ValueError(f"argument '{b.name}' must be {b.dtype}{list(b.shape)}, "
                             f"got {a.dtype}{list(a.shape)}")
    for x in range(len(arrays)):
        for y in range(x):
            if arrays[x].size and arrays[y].size and np.may_share_memory(arrays[x], arrays[y]):
                raise ValueError(f"arguments '{params[y].name}' and '{params[x].name}' share "
                                 f"memory (buffers never alias in the loop IR)")


def run(func: PrimFunc, arrays: list, *, check_races: bool = True) -> None:
    """Execute the loop IR with numpy; ``arrays`` in ``func.params`` order (outputs written in
    place). Out-of-range accesses raise IndexError naming the buffer; with ``check_races``, a GPU
    kernel whose threads exchange data through shared memory without a barrier in between raises
    InterpError."""
    compile_func(func, check_races)(arrays)
