"""``tc.build``: lower a DAG under a schedule, compile it for a target, and wrap it as a Kernel."""
from __future__ import annotations

import threading

import numpy as np

from .ir.dag import ComputeDAG
from .ir.loop import PrimFunc, verify
from .ir.validate import IndexValidator
from .schedule import lower
from .target import Target, TargetKind

__all__ = ["build", "Kernel"]

_CACHE: dict = {}
_CACHE_LOCK = threading.Lock()


class Kernel:
    """A compiled kernel.

    ``kernel(*inputs)`` checks the arguments (count, shape, dtype, contiguity, index data) before
    any native code runs and returns new output arrays (one array, or a tuple for several outputs);
    ``kernel(*inputs, out=...)`` fills the given arrays instead. ``kernel.emulate(...)`` computes the
    same through the loop-IR interpreter; ``kernel.source()`` is the LLVM IR text.
    """

    def __init__(self, dag: ComputeDAG, target: Target, func: PrimFunc, compiled, bound=None):
        self.dag, self.target, self.func, self._compiled = dag, target, func, compiled
        self._validator = IndexValidator(dag)
        #: build-time constants: (arrays by input name, arrays bound after the free inputs)
        self._bound = bound if bound is not None else ({}, [])

    @property
    def loop_ir(self) -> PrimFunc:
        return self.func

    def source(self) -> str:
        """The generated code as text (LLVM IR for ``llvm``)."""
        return self._compiled.source

    def __call__(self, *inputs, out=None):
        arrays, outs = self._prepare(inputs, out)
        self._compiled.run(arrays)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def emulate(self, *inputs, out=None):
        """Run through the loop-IR interpreter (slow; the oracle, and GPU emulation)."""
        from .codegen import interp
        arrays, outs = self._prepare(inputs, out)
        interp.run(self.func, arrays)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _prepare(self, inputs, out):
        dag = self.dag
        consts, bound = self._bound
        free = [t for t in dag.inputs if t.name not in consts]
        names = [t.name for t in free]
        if len(inputs) != len(free):
            fixed = f" ({', '.join(consts)}: bound by constants= at build time)" if consts else ""
            raise TypeError(f"kernel takes {len(free)} input(s) ({', '.join(names)}) but "
                            f"{len(inputs)} were given{fixed}")
        arrays = [_check_array(a, t, "input") for a, t in zip(inputs, free)]
        if out is None:
            outs = [np.empty(t.shape, dtype=t.dtype.np) for t in dag.outputs]
        else:
            outs = list(out) if isinstance(out, (tuple, list)) else [out]
            if len(outs) != len(dag.outputs):
                raise TypeError(f"out= must hold {len(dag.outputs)} array(s), got {len(outs)}")
            outs = [_check_array(a, t, "output") for a, t in zip(outs, dag.outputs)]
            for o, t in zip(outs, dag.outputs):
                if not o.flags.writeable:
                    raise ValueError(f"output '{t.name}' is read-only")
                for a, ti in zip(arrays, free):
                    if np.shares_memory(o, a):
                        raise ValueError(f"output '{t.name}' overlaps input '{ti.name}'")
            for n, o in enumerate(outs):
                for m in range(n):
                    if np.shares_memory(o, outs[m]):
                        raise ValueError(f"outputs '{dag.outputs[m].name}' and "
                                         f"'{dag.outputs[n].name}' overlap")
        if self._validator.active:
            given = iter(arrays)
            self._validator.check([consts[t.name] if t.name in consts else next(given)
                                   for t in dag.inputs])
        return arrays + list(bound) + outs, outs


def _check_array(a, t, role: str) -> np.ndarray:
    if not isinstance(a, np.ndarray):
        raise TypeError(f"{role} '{t.name}' must be a numpy array, got {type(a).__name__}")
    if a.dtype != t.dtype.np:
        raise TypeError(f"{role} '{t.name}' has dtype {a.dtype}, expected {t.dtype}")
    if a.shape != t.shape:
        raise ValueError(f"{role} '{t.name}' has shape {a.shape}, expected {t.shape}")
    if not a.flags.c_contiguous:
        raise ValueError(f"{role} '{t.name}' is not C-contiguous; pass np.ascontiguousarray(...)")
    return a


def build(dag: ComputeDAG, target="llvm", schedule=None, log=None, on_missing="error",
          cache: bool = True, constants: dict | None = None) -> Kernel:
    """Compile ``dag`` for ``target``.

    Parameters
    ----------
    dag : ComputeDAG
    target : str or Target
        ``"llvm"`` compiles for this host CPU (its features detected).
    schedule : Schedule, optional
        An explicit schedule of ``dag``; by default every stage at root in natural loop order.
    log : str or path, optional
        A tuning log (JSON lines): build the best valid record for ``dag.workload_key`` and
        ``str(target)`` (records of another CPU/arch of the same target kind are used, with a
        warning, when none match exactly). Exclusive with ``schedule``. A record that no longer
        replays is skipped, with a warning, for the next best. A missing file raises
        ``FileNotFoundError``.
    on_missing : "error" or "default"
        With ``log``, when the log has no usable record for this workload and target:
        ``"error"`` raises ``LookupError`` (naming the key, the target and what the log holds);
        ``"default"`` warns and builds the default schedule.

    cache : bool
        Keep the compiled code in this process's cache (per workload key, schedule and target) and
        reuse it; the tuner's workers, which build thousands of one-off candidates, turn it off.
    constants : dict, optional
        Input name -> array: inputs whose values are fixed (weights). They are copied now and the
        kernel takes only the other inputs; every root stage of the schedule that depends only on
        constants (a weight packed by ``cache_read(..., pack=...)`` into the tiled layout) runs
        once, here, instead of on every call (layout rewrite; see
        :mod:`tecomp.schedule.constants`). Unknown names raise ``KeyError``, a wrong shape
        ``ValueError``, a wrong dtype ``TypeError``; ``llvm`` only (``NotImplementedError`` for
        ``cuda``).

    Returns
    -------
    Kernel
    """
    if not isinstance(dag, ComputeDAG):
        raise TypeError(f"build expects a ComputeDAG, got {type(dag).__name__}")
    if on_missing not in ("error", "default"):
        raise ValueError(f"on_missing must be 'error' or 'default', got {on_missing!r}")
    if schedule is not None and log is not None:
        raise ValueError("give either schedule= or log=, not both")
    target = Target.parse(target)
    if constants:
        constants = _check_constants(dag, target, constants)
    if log is not None:
        from .schedule.records import schedule_from_log
        schedule = schedule_from_log(dag, log, target, on_missing)
    if schedule is not None and getattr(schedule, "dag", None) is not dag:
        raise ValueError("the schedule was made for a different ComputeDAG")
    sched_key = "default" if schedule is None else schedule.key
    key = (dag.workload_key, sched_key, str(target), target.features, _constants_key(constants))
    with _CACHE_LOCK:
        hit = _CACHE.get(key) if cache else None
    if hit is not None:
        func, compiled, bound = hit
        return Kernel(dag, target, func, compiled, bound)
    bound = None
    func = lower(dag if schedule is None else schedule)
    verify(func)
    if target.kind is TargetKind.LLVM:
        from .codegen.llvm_cpu import compile_cpu
        if constants:
            func, bound = _fold_constants(dag, func, constants)
        compiled = compile_cpu(func)
    else:
        raise ValueError(f"target {target} cannot be compiled yet: the CUDA backend is not part of "
                         f"this version")
    if cache:
        with _CACHE_LOCK:
            _CACHE[key] = (func, compiled, bound)
    return Kernel(dag, target, func, compiled, bound)


def _check_constants(dag: ComputeDAG, target: Target, constants) -> dict:
    if target.kind is not TargetKind.LLVM:
        raise NotImplementedError(f"constants= (weights packed once at build time) is implemented "
                                  f"for the llvm target only, not {target}; build without it")
    from .schedule.constants import check_constants
    return check_constants(dag, constants)


def _constants_key(constants) -> str:
    """The cache key part of ``constants``: a hash of names, dtypes, shapes and bytes."""
    if not constants:
        return ""
    import hashlib
    h = hashlib.sha256()
    for name in sorted(constants):
        a = constants[name]
        h.update(f"{name}:{a.dtype}:{a.shape};".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def _fold_constants(dag: ComputeDAG, func: PrimFunc, constants: dict) -> tuple:
    """``(main function, (constants, bound arrays))``: the root stages that depend only on
    ``constants`` run once, now, through a compiled prologue; the main function reads their
    results as parameters bound after the free inputs."""
    from .codegen.llvm_cpu import compile_cpu
    from .schedule.constants import split_constants
    split = split_constants(func, len(dag.inputs), constants)
    verify(split.main)
    by_param = {b: constants[b.name] for b in split.prologue_inputs + split.bound
                if b.name in constants}
    if split.prologue is not None:
        verify(split.prologue)
        folded = [np.empty(b.shape, dtype=b.dtype.np) for b in split.folded]
        compile_cpu(split.prologue).run([by_param[b] for b in split.prologue_inputs] + folded)
        for b, a in zip(split.folded, folded):
            a.flags.writeable = False  # shared by every kernel the cache hands out
            by_param[b] = a
    return split.main, (constants, [by_param[b] for b in split.bound])
