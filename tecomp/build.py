"""``tc.build``: lower a DAG under a schedule, compile it for a target, and wrap it as a Kernel."""
from __future__ import annotations

import functools
import threading
import weakref

import numpy as np

from .call_memo import CallMemo
from .codegen.memory import aligned_empty
from .ir.dag import ComputeDAG
from .ir.loop import PrimFunc, verify
from .ir.validate import IndexValidator
from .lowering import lower
from .lowering.constants import check_constants, constants_key
from .schedule import default_cpu_schedule, replay_on
from .target import Target, TargetKind

__all__ = ["build", "Kernel"]

_CACHE: dict = {}
_CACHE_LOCK = threading.Lock()


class _BoundEntry:
    """A cache entry of build-time constants (packed weights), alive only while a kernel built
    from it is: compiling many models or candidates does not keep every packed weight made."""
    __slots__ = ("value", "__weakref__")

    def __init__(self, value):
        self.value = value


_BOUND_CACHE: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


class Kernel:
    """A compiled kernel.

    ``kernel(*inputs)`` checks the arguments (count, shape, dtype, contiguity, index data) before
    any native code runs and returns new output arrays (one array, or a tuple for several outputs);
    ``kernel(*inputs, out=...)`` fills the given arrays instead. ``kernel.emulate(...)`` computes the
    same through the loop-IR interpreter; ``kernel.source()`` is the LLVM IR text (PTX for cuda).

    A ``cuda`` kernel takes numpy arrays (copied to the device and back) or device arrays (objects
    with ``__cuda_array_interface__`` or ``__dlpack__``: CuPy, torch, ``DeviceArray``), which are
    used in place; with device inputs the outputs are new ``DeviceArray``s unless ``out=`` gives
    device arrays. Calling it without a GPU raises ``CudaUnavailableError``; ``emulate()`` runs
    the same GPU program on the CPU.
    """

    def __init__(self, dag: ComputeDAG, target: Target, func: PrimFunc, compiled, bound=None):
        self.dag, self.target, self.func, self._compiled = dag, target, func, compiled
        self._validator = IndexValidator(dag)
        #: build-time constants: (arrays by input name, arrays bound after the free inputs)
        self._bound = bound if bound is not None else ({}, [])
        # the inputs a call passes (those not bound at build time), worked out once: a call's
        # own overhead counts beside a kernel of tens of microseconds
        self._free = [t for t in dag.inputs if t.name not in self._bound[0]]
        self._cache_entry = None  # keeps its entry of the build cache alive (_BoundEntry)
        self._memo = CallMemo()  # the last checked call's arrays (see tecomp.call_memo)
        self._index_checks = self._validator.active  # fixed with the DAG; read on every call

    @property
    def loop_ir(self) -> PrimFunc:
        return self.func

    @property
    def bound_arrays(self) -> tuple:
        """The constants bound at build time, passed after the call's inputs (read-only)."""
        return tuple(self._bound[1])

    @property
    def constant_names(self) -> tuple:
        """The inputs bound at build time by ``constants=`` (the call takes the others)."""
        return tuple(self._bound[0])

    def call_inputs(self, inputs) -> list:
        """Of ``inputs`` (one per DAG input, in order), those the call takes: all but the
        constants bound at build time."""
        bound = set(self._bound[0])
        return [a for a, t in zip(inputs, self.dag.inputs) if t.name not in bound]

    @property
    def compiled(self):
        """The back end's compiled module: ``source`` and ``assembly()`` for both targets,
        ``source_unoptimized`` for llvm, ``launches`` and ``ptxas_report`` for cuda."""
        return self._compiled

    def raw_call(self, arrays: list, *, device: bool = False):
        """A zero-argument callable that runs the native code on ``arrays``, checking nothing.

        For callers that validated the arguments once and run many times (measurement), where
        ``__call__``'s per-call checks would be timed too. Passing arrays of other shapes or
        dtypes, or index data that was not validated, is undefined behaviour.

        Parameters
        ----------
        arrays : list
            Every argument in order: the inputs, then the outputs (contiguous numpy arrays of the
            DAG's shapes and dtypes; with ``device=True``, device arrays of a cuda kernel).
        device : bool
            Run a cuda kernel on device arrays in place (``compiled.run_device``) instead of
            copying host arrays to the device and back.

        Returns
        -------
        callable
            Runs the kernel once per call and returns None.

        Examples
        --------
        >>> call = kernel.raw_call([a, b, c])   # doctest: +SKIP
        >>> call()                               # c now holds the result
        """
        if len(arrays) != len(self.func.params):
            raise TypeError(f"raw_call takes {len(self.func.params)} arrays (inputs, then "
                            f"outputs), got {len(arrays)}")
        if device:
            if self.target.kind is not TargetKind.CUDA:
                raise ValueError(f"device=True needs a cuda kernel, this one is {self.target}")
            return functools.partial(self._compiled.run_device, arrays)
        return functools.partial(self._compiled.run, arrays)

    def prepared_call(self, inputs, out, keep: bool = True):
        """Check the arguments once, as ``kernel(*inputs, out=out)`` does, and return a
        zero-argument callable that runs the kernel on those same arrays.

        For a caller that runs a kernel many times on buffers it owns (a compiled model's
        intermediate values): the per-call checks cost tens of microseconds, a lot beside a small
        kernel. The arrays must stay alive and keep their shapes; their contents may change
        between calls. Index data (a gather's or sparse kernel's integer inputs) is still
        validated on every call.

        Parameters
        ----------
        inputs : sequence of numpy.ndarray
            The kernel's inputs, as for ``__call__``.
        out : numpy.ndarray or sequence of numpy.ndarray
            Its output array(s).
        keep : bool
            Whether the callable holds the arrays (default); without, only their addresses: the
            caller keeps them alive and unchanged in shape (:class:`tecomp.call_memo.CallMemo`).

        Returns
        -------
        callable
            Runs the kernel once per call and returns None.
        """
        if self.target.kind is TargetKind.CUDA:
            raise NotImplementedError("prepared_call is for llvm kernels; a cuda kernel copies "
                                      "its arguments on every call anyway")
        arrays, _ = self._prepare(list(inputs), out)
        run = self._compiled.bind(arrays, keep=keep)
        if not self._validator.active:
            return run
        check = self._with_constants(arrays)  # the free inputs come first, in the DAG's order
        if not keep:  # weakly: a freed array raises instead of being read at its address
            check = [weakref.ref(a) for a in check]

        def checked_run():
            arrs = check if keep else [r() for r in check]
            if any(a is None for a in arrs):
                raise RuntimeError("prepared_call(keep=False): an array of this call was freed")
            self._validator.check(arrs)  # index data may change between calls
            run()
        return checked_run

    def source(self) -> str:
        """The generated code as text: LLVM IR for ``llvm``, PTX (one ``.entry`` per kernel
        launch) for ``cuda``."""
        return self._compiled.source

    def __call__(self, *inputs, out=None):
        if out is not None:  # the same arrays as the last checked call: only index data again
            outs = out if type(out) is tuple else tuple(out) if isinstance(out, list) else (out,)
            run = self._memo.lookup(inputs + outs)
            if run is not None:
                if self._index_checks:
                    self._validator.check(self._with_constants(inputs))
                run()
                return outs[0] if len(outs) == 1 else outs
        if self.target.kind is TargetKind.CUDA and _on_device(inputs, out):
            return self._call_device(inputs, out)
        arrays, outs = self._prepare(inputs, out)
        self._compiled.run(arrays)
        if out is not None:
            # the runner holds no array: the memo's record checks they are alive first
            self._memo.remember(tuple(arrays[:len(self._free)]) + tuple(outs), len(outs),
                                self._compiled.bind(arrays, keep=False))
        return outs[0] if len(outs) == 1 else tuple(outs)

    def emulate(self, *inputs, out=None):
        """Run through the loop-IR interpreter (slow; the oracle, and GPU emulation)."""
        from .codegen import interp
        arrays, outs = self._prepare(inputs, out)
        # one array for several inputs (read only): the interpreter's buffers never alias
        interp.run(self.func, [a.copy() if k < len(arrays) - len(outs) and a.size and any(
            np.may_share_memory(a, b) for b in arrays[:k]) else a for k, a in enumerate(arrays)])
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _call_device(self, inputs, out):
        """Zero-copy call on device arrays; integer inputs the index checks read are copied to
        the host and validated first, as for host arrays."""
        from .codegen import cuda_runtime as rt
        rt.require()
        dag = self.dag
        if len(inputs) != len(dag.inputs):
            raise TypeError(f"kernel takes {len(dag.inputs)} input(s), {len(inputs)} were given")
        ins = [rt.as_device_array(a, t.name) for a, t in zip(inputs, dag.inputs)]
        if out is None:
            outs = [rt.DeviceArray.empty(t.shape, t.dtype.np) for t in dag.outputs]
        else:
            outs = list(out) if isinstance(out, (tuple, list)) else [out]
            if len(outs) != len(dag.outputs):
                raise TypeError(f"out= must hold {len(dag.outputs)} array(s), got {len(outs)}")
            outs = [rt.as_device_array(a, t.name) for a, t in zip(outs, dag.outputs)]
        for a, t in zip(ins + outs, list(dag.inputs) + list(dag.outputs)):
            if tuple(a.shape) != tuple(t.shape) or a.dtype != t.dtype.np:
                raise ValueError(f"'{t.name}' must be {t.dtype}{list(t.shape)}, got "
                                 f"{a.dtype}{list(a.shape)}")
        if self._validator.active:  # index data on the device is read on the host to check it
            self._validator.check([a.to_numpy() if not t.dtype.is_float else None
                                   for a, t in zip(ins, dag.inputs)])
        self._compiled.run_device(ins + outs)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _prepare(self, inputs, out):
        dag = self.dag
        consts, bound = self._bound
        free = self._free
        if len(inputs) != len(free):
            fixed = f" ({', '.join(consts)}: bound by constants= at build time)" if consts else ""
            raise TypeError(f"kernel takes {len(free)} input(s) ({', '.join(t.name for t in free)})"
                            f" but {len(inputs)} were given{fixed}")
        arrays = [_check_array(a, t, "input") for a, t in zip(inputs, free)]
        if out is None:
            outs = [aligned_empty(t.shape, t.dtype.np) for t in dag.outputs]
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
            self._validator.check(self._with_constants(arrays))
        return arrays + list(bound) + outs, outs

    def _with_constants(self, given) -> list:
        """Every DAG input in order: the call's ``given`` ones and the bound constants."""
        consts, it = self._bound[0], iter(given)
        return [consts[t.name] if t.name in consts else next(it) for t in self.dag.inputs]


def _on_device(inputs, out) -> bool:
    """Whether a cuda kernel's arguments are device arrays (not numpy arrays)."""
    outs = [] if out is None else (list(out) if isinstance(out, (tuple, list)) else [out])
    return any(not isinstance(a, np.ndarray) and (hasattr(a, "__cuda_array_interface__")
                                                  or hasattr(a, "__dlpack__"))
               for a in list(inputs) + outs)


def _check_array(a, t, role: str) -> np.ndarray:
    if not isinstance(a, np.ndarray):
        raise TypeError(f"{role} '{t.name}' must be a numpy array, got {type(a).__name__}")
    elif a.dtype != t.dtype.np:
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
        ``"llvm"`` compiles for this host CPU (its features detected; an ``llvm`` target of another
        CPU or other features raises ``ValueError``); ``"cuda"`` (or ``"cuda -arch=sm_XX"``) for
        an NVIDIA GPU.
    schedule : Schedule, optional
        A schedule of ``dag`` (or of an equal DAG); by default ``tc.schedule.default_cpu_schedule``
        (``llvm``) or :func:`tecomp.schedule.gpu_default.default_gpu_schedule` (``cuda``: PTX,
        built without a GPU, checked by ptxas where ptxas exists).
    log : str or path, optional
        A tuning log (JSON lines): build the best valid record for ``dag.workload_key`` and
        ``str(target)`` (records of another CPU/arch of the same target kind are used, with a
        warning, when none match exactly). Exclusive with ``schedule``. A record that no longer
        replays is skipped, with a warning, for the next best; a missing file: FileNotFoundError.
    on_missing : "error" or "default"
        With ``log``, when the log has no usable record for this workload and target:
        ``"error"`` raises ``LookupError`` (naming the key, the target and what the log holds);
        ``"default"`` warns and builds the default schedule.
    cache : bool
        Keep the compiled code in this process's cache (per workload key, schedule and target)
        and reuse it (the tuner's workers, building thousands of one-off candidates, do not).
    constants : dict, optional
        Input name -> array: inputs whose values are fixed (weights). They are copied now and the
        kernel takes only the other inputs; every root stage of the schedule that depends only on
        constants (a weight packed by ``cache_read(..., pack=...)`` into the tiled layout) runs
        once, here, instead of on every call (layout rewrite; see
        :mod:`tecomp.lowering.constants`). Unknown names raise ``KeyError``, a wrong shape
        ``ValueError``, a wrong dtype ``TypeError``; ``llvm`` only (``NotImplementedError`` for
        ``cuda``).

    Returns
    -------
    Kernel
    """
    try:
        return _build(dag, target, schedule, log, on_missing, cache, constants)
    except RecursionError:  # a compute is limited at construction; inlining adds them up
        from .ir.tensor import MAX_EXPR_DEPTH
        raise ValueError(f"the schedule's expressions are nested too deeply to compile (after "
                         f"compute_inline; each compute is limited to {MAX_EXPR_DEPTH} levels); "
                         f"inline fewer stages") from None


def _build(dag, target, schedule, log, on_missing, cache, constants) -> Kernel:
    if not isinstance(dag, ComputeDAG):
        raise TypeError(f"build expects a ComputeDAG, got {type(dag).__name__}")
    if on_missing not in ("error", "default"):
        raise ValueError(f"on_missing must be 'error' or 'default', got {on_missing!r}")
    if schedule is not None and log is not None:
        raise ValueError("give either schedule= or log=, not both")
    target = Target.parse(target).require_host()  # another CPU's name on the host's code: refused
    if constants:
        constants = _check_constants(dag, target, constants)
    if log is not None:
        from .schedule.log_schedule import schedule_from_log
        schedule = schedule_from_log(dag, log, target, on_missing)
    if schedule is not None:
        schedule = replay_on(schedule, dag)  # itself, or on an equal DAG built again
    sched_key = ("default", *(s.op.tag for s in dag.compute_stages)) if schedule is None else schedule.key
    key = (dag.workload_key, sched_key, str(target), target.features, constants_key(constants))
    entry = None
    with _CACHE_LOCK:
        hit = _CACHE.get(key) if cache else None
        if cache and hit is None:
            entry = _BOUND_CACHE.get(key)
            hit = None if entry is None else entry.value
    if hit is not None:
        func, compiled, bound = hit
        kernel = Kernel(dag, target, func, compiled, bound)
        kernel._cache_entry = entry
        return kernel
    bound = None
    if schedule is None and target.kind is not TargetKind.CUDA:
        schedule = default_cpu_schedule(dag)  # the key names it by the ops' tags, made on a miss
    if target.kind is TargetKind.CUDA:
        func, compiled = _build_cuda(dag, schedule, target)
    elif constants:
        # the code does not depend on the constants' values, only on which inputs they are:
        # layers of one shape with different weights (a network's repeated blocks) share it
        code_key = key[:4] + (tuple(n for n, t in enumerate(dag.inputs) if t.name in constants),)
        with _CACHE_LOCK:
            split = _CACHE.get(code_key) if cache else None
        if split is None:
            split = _split_constants(dag, lower(schedule), constants)
            if cache:
                with _CACHE_LOCK:
                    _CACHE[code_key] = split
        func, compiled, bound = split[0], split[1], _bind_constants(dag, split, constants)
    else:
        from .codegen.llvm_cpu import compile_cpu
        func = lower(schedule)
        verify(func)
        compiled = compile_cpu(func)
    kernel = Kernel(dag, target, func, compiled, bound)
    if cache:
        with _CACHE_LOCK:
            if bound is None:
                _CACHE[key] = (func, compiled, bound)
            else:
                kernel._cache_entry = _BOUND_CACHE[key] = _BoundEntry((func, compiled, bound))
    return kernel


def _check_constants(dag: ComputeDAG, target: Target, constants) -> dict:
    if target.kind is not TargetKind.LLVM:
        raise NotImplementedError(f"constants= (weights packed once at build time) is implemented "
                                  f"for the llvm target only, not {target}; build without it")
    # copies, read-only, on a cache line (a weight bound as it is, not packed, too)
    return check_constants(dag, constants, empty=aligned_empty)


def _split_constants(dag: ComputeDAG, func: PrimFunc, constants: dict) -> tuple:
    """``(main function, its compiled code, split, compiled prologue or None, input position
    of each parameter)`` for the inputs named in ``constants``: the root stages that depend
    only on them go to a prologue, run once per set of constant values by
    :func:`_bind_constants`; the main function reads their results as parameters bound after
    the free inputs."""
    from .codegen.llvm_cpu import compile_cpu
    from .lowering.constants import split_constants
    verify(func)
    split = split_constants(func, len(dag.inputs), constants)
    verify(split.main)
    prologue = None
    if split.prologue is not None:
        verify(split.prologue)
        prologue = compile_cpu(split.prologue)
    pos = {b: n for n, b in enumerate(func.params[:len(dag.inputs)])}
    return split.main, compile_cpu(split.main), split, prologue, pos


def _bind_constants(dag: ComputeDAG, compiled_split: tuple, constants: dict) -> tuple:
    """``(constants, bound arrays)``: the prologue run on these constants' values (matched to
    the parameters by input position: the code may come from another DAG of the same key)."""
    _, _, split, prologue, pos = compiled_split
    by_param = {b: constants[dag.inputs[pos[b]].name] for b in split.prologue_inputs + split.bound
                if b in pos}
    if prologue is not None:
        folded = [aligned_empty(b.shape, b.dtype.np) for b in split.folded]
        prologue.run([by_param[b] for b in split.prologue_inputs] + folded)
        for b, a in zip(split.folded, folded):
            a.flags.writeable = False  # shared by every kernel the cache hands out
            by_param[b] = a
    return constants, [by_param[b] for b in split.bound]


def _build_cuda(dag: ComputeDAG, schedule, target: Target) -> tuple:
    """``(GPU loop IR, CompiledCuda)``: the default GPU schedule when none is given, the GPU passes
    (launches, barriers, validity check), PTX, and ptxas's check where ptxas exists."""
    from .codegen.nvptx import compile_cuda
    from .codegen.ptxas import check_ptx, find_ptxas
    from .lowering.gpu_passes import prepare_gpu_program
    from .schedule.gpu_default import default_gpu_schedule
    func = lower(default_gpu_schedule(dag) if schedule is None else schedule)
    verify(func)
    func, info = prepare_gpu_program(func)
    verify(func)
    compiled = compile_cuda(func, target, info)
    compiled.ptxas_report = check_ptx(compiled.source, target.arch) if find_ptxas() else None
    return func, compiled
