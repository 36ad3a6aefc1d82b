"""``tc.compile_model``: a :class:`~.graph.Model` to a :class:`CompiledModel`, one kernel per fused
group, with the buffers of the intermediate values planned once.

Each group (:mod:`.fusion`) is one ComputeDAG built with its weights as constants (stages that
pack a weight run once, at compile time). Its schedule is the best record of the tuning log for
its workload key, or, when the log has none (or no log is given), the default schedule, with a
warning that names the layer. Groups of one workload key and weights share one kernel.

Every intermediate value has its own slot; the slots live in one arena whose layout
:mod:`.memory_plan` derives from the values' live ranges (values never live together share
bytes), allocated on the first call and reused by every later one, so a call allocates only the
model's outputs.
"""
from __future__ import annotations

import hashlib
import time
import warnings
from dataclasses import dataclass

import numpy as np

from ..build import build
from ..codegen.memory import aligned_empty
from ..kernel_views import ReshapedKernel
from ..schedule import default_cpu_schedule
from ..target import Target, TargetKind
from .fusion import group_variants, partition
from .graph import Model, ModelError, Op
from .memory_plan import allocate, live_ranges

__all__ = ["CompiledModel", "compile_model", "Step", "model_context"]


@dataclass
class Step:
    """One kernel launch: the kernel, its argument slots, its output slot, its group's name and
    the index checks to run first (``(slot, dimension size, node description)`` of a Gather);
    ``schedule`` and ``constants`` are what it was built from (for :meth:`CompiledModel.export`;
    None in a loaded model)."""
    kernel: object
    args: list
    out: int
    name: str
    gather_checks: list
    schedule: object = None
    constants: dict | None = None


class CompiledModel:
    """A compiled network: ``cm(*arrays)`` or ``cm(**{input_name: array})`` returns the model's
    output (a tuple when it has several), as new numpy arrays. The intermediate buffers are
    allocated on the first call and reused by every later one, so one CompiledModel runs one
    call at a time (use one per thread).

    Attributes
    ----------
    input_names, output_names : list of str
    steps : list of Step
        The kernels in run order.
    untuned : list of str
        The layers with a reduction (those ``model.tasks()`` lists) that run with the default
        schedule (no record in the log).
    context : str
        The name under which the log holds this model's in-place timings (:mod:`.in_place`).
    """

    def __init__(self, name: str, target: Target, inputs: list, output_names: list, steps: list,
                 slots: list, input_slots: list, output_slots: list, untuned: list,
                 context: str = ""):
        self.name, self.target = name, target
        self.context = context  # its in-place timings' context in a log (model_context)
        self.input_names = [n for n, _, _ in inputs]
        self.output_names = list(output_names)
        self.input_specs = [(tuple(s), np.dtype(d)) for _, s, d in inputs]  # (shape, dtype)
        self.steps, self.untuned = steps, untuned
        self.slot_specs = slots           # (shape, dtype) per buffer slot
        self.input_slots = input_slots    # slot of each model input
        self.output_slots = output_slots  # slot (int) or constant array per model output
        self._buffers = None
        self._calls = None  # per step: its prepared call, or None when it runs on a caller's array

    def _arguments(self, args, kwargs) -> list:
        names = self.input_names
        if args and kwargs:
            raise TypeError(f"model {self.name!r}: pass the inputs by position or by name, not both")
        if kwargs:
            unknown = sorted(set(kwargs) - set(names))
            if unknown:
                raise TypeError(f"model {self.name!r} has no input(s) {unknown}; its inputs are "
                                f"{names}")
            missing = [n for n in names if n not in kwargs]
            if missing:
                raise TypeError(f"model {self.name!r}: missing input(s) {missing}")
            args = [kwargs[n] for n in names]
        if len(args) != len(names):
            raise TypeError(f"model {self.name!r} takes {len(names)} input(s) ({', '.join(names)}), "
                            f"{len(args)} given")
        out = []
        for a, n, (shape, dtype) in zip(args, names, self.input_specs):
            if not isinstance(a, np.ndarray):
                raise TypeError(f"model {self.name!r}: input {n!r} must be a numpy array, got "
                                f"{type(a).__name__}")
            if a.dtype != dtype:
                raise TypeError(f"model {self.name!r}: input {n!r} has dtype {a.dtype}, expected "
                                f"{dtype} (convert it with .astype(np.{dtype.name}))")
            if a.shape != shape:
                raise ValueError(f"model {self.name!r}: input {n!r} has shape {a.shape}, expected "
                                 f"{shape}")
            out.append(np.array(a, order="C", copy=None))
        return out

    def __call__(self, *args, **kwargs):
        return self._run(args, kwargs, None)

    def profile(self, *args, repeat: int = 5, **kwargs) -> list:
        """Where a call's time goes: ``[(step name, seconds)]`` in run order, each step timed in
        place during whole calls of the model (so it sees the caches as the previous steps leave
        them), the fastest of ``repeat`` calls. Inputs as for a call.

        Examples
        --------
        >>> for name, s in cm.profile(x):  # doctest: +SKIP
        ...     print(f"{s * 1e3:8.3f} ms  {name}")
        """
        if not isinstance(repeat, int) or repeat < 1:
            raise ValueError(f"repeat must be a positive int, got {repeat!r}")
        best = None
        for _ in range(repeat):
            times: list = []
            self._run(args, kwargs, times)
            best = times if best is None else [min(a, b) for a, b in zip(best, times)]
        return [(st.name, t) for st, t in zip(self.steps, best)]

    def replace_kernel(self, index: int, kernel, schedule=None) -> None:
        """Run ``kernel`` (built from ``schedule``, for the same DAG and constants) as step
        ``index`` from the next call on (:mod:`.in_place` times a layer's candidates this way)."""
        st = self.steps[index]
        st.kernel = fit_kernel(kernel, self.slot_specs[st.out][0])  # a variant's own shapes
        if schedule is not None:
            st.schedule = schedule
        self._calls = None  # prepared again on the next call

    def _run(self, args, kwargs, times):
        arrays = self._arguments(args, kwargs)
        out_slots = {s for s in self.output_slots if isinstance(s, int)}
        if self._buffers is None:  # planned once; allocated on the first call
            ranges = live_ranges(len(self.slot_specs), self.steps,
                                 set(self.input_slots) | out_slots)
            self._buffers = allocate(self.slot_specs, ranges)
        bufs = list(self._buffers)
        for slot, a in zip(self.input_slots, arrays):
            bufs[slot] = a
        for slot in out_slots:  # outputs are new arrays: the caller keeps them
            if slot not in self.input_slots:
                bufs[slot] = aligned_empty(*self.slot_specs[slot])
        if self._calls is None:
            # a step on planned buffers only is checked once: its per-call checks cost tens of
            # microseconds, as much as a small layer's kernel
            per_call = set(self.input_slots) | out_slots
            cpu = self.target.kind is TargetKind.LLVM
            self._calls = [None if per_call & {*st.args, st.out} or not cpu else
                           st.kernel.prepared_call([bufs[a] for a in st.args], bufs[st.out])
                           for st in self.steps]
        for st, call in zip(self.steps, self._calls):
            for slot, n, where in st.gather_checks:
                idx = bufs[slot]
                if idx.size and (idx.min() < -n or idx.max() >= n):
                    bad = int(idx.min()) if idx.min() < -n else int(idx.max())
                    raise ValueError(f"model {self.name!r}: {where}: Gather index {bad} is out of "
                                     f"range [{-n}, {n})")
            t0 = time.perf_counter() if times is not None else 0.0
            if call is None:
                st.kernel(*[bufs[a] for a in st.args], out=bufs[st.out])
            else:
                call()
            if times is not None:
                times.append(time.perf_counter() - t0)
        # an input returned as an output, or one value listed as two outputs: each its own array
        res = [bufs[s].copy() if isinstance(s, int) and (s in self.input_slots or any(
                   isinstance(o, int) and o == s for o in self.output_slots[:k]))
               else bufs[s] if isinstance(s, int) else np.array(s)
               for k, s in enumerate(self.output_slots)]
        return res[0] if len(res) == 1 else tuple(res)

    def export(self, path) -> dict:
        """Write this model as object code, weights and a manifest to directory ``path``;
        ``tc.load(path)`` returns it in another process without compiling or importing onnx
        (see :mod:`tecomp.frontend.deploy_model`). Returns the manifest."""
        from .deploy_model import export_model
        return export_model(self, path)

    def __repr__(self):
        return (f"<tc.CompiledModel {self.name!r}: {len(self.steps)} kernels, inputs "
                f"{self.input_names}, outputs {self.output_names}, target {self.target}>")


def compile_model(model: Model, target="llvm", log=None, in_place: bool = True) -> CompiledModel:
    """Compile ``model`` for ``target``: one kernel per fused group.

    Parameters
    ----------
    model : Model
        From :func:`tecomp.from_onnx`.
    target : str or Target
        ``"llvm"`` (this CPU).
    log : str or path, optional
        A tuning log (:func:`tecomp.tune_model`): each group is built from its best record; a
        group without one gets the default schedule, with a warning naming it.
    in_place : bool
        Rank a layer's records by their timings in this model (:mod:`.in_place`) where the log
        holds them (the default); False ranks by the search's timings alone.

    Returns
    -------
    CompiledModel
    """
    if not isinstance(model, Model):
        raise TypeError(f"compile_model expects a tc.Model (from tc.from_onnx), got "
                        f"{type(model).__name__}")
    target = Target.parse(target).require_host()
    if target.kind.value != "llvm":
        raise NotImplementedError(f"compile_model supports the llvm target, not {target}")
    groups = partition(model)
    slot_of: dict = {}
    specs: list = []  # one slot per value; memory_plan decides which of them share bytes

    def new_slot(name):
        v = model.values[name]
        slot_of[name] = len(specs)
        specs.append((v.shape, v.dtype))
        return slot_of[name]

    for name in model.inputs:
        new_slot(name)
    steps, untuned = [], []
    variants = [group_variants(model, g) for g in groups]
    context = model_context([v[0] for v in variants])
    for g, vs in zip(groups, variants):
        gd = _choose_variant(vs, target, log, context if in_place else "")
        kernel, sched, tuned = _build_group(gd, target, log, context if in_place else "")
        if not tuned and g.anchor is not None:  # an index map alone has little to tune
            untuned.append(g.name)
        args = []
        for name in gd.runtime:
            if name not in slot_of:
                raise ModelError(f"value {name!r} is read before it is computed")
            args.append(slot_of[name])
        checks = []
        for n in g.nodes:
            if n.op in (Op.GATHER, Op.GATHER_ELEMENTS) and n.inputs[1] in slot_of:
                size = model.values[n.inputs[0]].shape[n.attrs["axis"]]
                checks.append((slot_of[n.inputs[1]], size, n.describe()))
        out = new_slot(g.output)
        kernel = fit_kernel(kernel, specs[out][0])
        steps.append(Step(kernel, args, out, gd.name, checks, sched, gd.constants))
    out_slots = []
    for name in model.outputs:
        if name in slot_of:
            out_slots.append(slot_of[name])
        else:
            out_slots.append(model.constants[name])
    if untuned and log is not None:
        shown = "; ".join(untuned[:6]) + (f"; and {len(untuned) - 6} more" if len(untuned) > 6
                                          else "")
        n_anchored = sum(1 for g in groups if g.anchor is not None)
        warnings.warn(f"compile_model {model.name!r}: {len(untuned)} of {n_anchored} layers have "
                      f"no record in {str(log)!r} and use the default schedule: {shown}",
                      UserWarning, stacklevel=2)
    inputs = [(n, model.values[n].shape, model.values[n].dtype) for n in model.inputs]
    return CompiledModel(model.name, target, inputs, model.outputs, steps, specs,
                         [slot_of[n] for n in model.inputs], out_slots, untuned, context)


def fit_kernel(kernel, out_shape):
    """``kernel`` as a step runs it, on buffers of the model's shapes: wrapped in a
    :class:`~tecomp.ReshapedKernel` where its DAG's output has another shape of the same size (a
    FLAT variant computes on the flattened image, :mod:`.flat`), else itself."""
    if tuple(kernel.dag.outputs[0].shape) == tuple(out_shape):
        return kernel
    return ReshapedKernel(kernel, [tuple(out_shape)])


def model_context(gds: list) -> str:
    """The context name under which a model's in-place timings are logged (see
    :mod:`.in_place`): ``"model:"`` and a hash of its groups' workload keys in run order, so that
    the same network (whatever its weights) finds them and another network does not."""
    h = hashlib.sha256("|".join(gd.dag.workload_key for gd in gds).encode()).hexdigest()
    return f"model:{h[:16]}"


def _choose_variant(variants: list, target, log, context: str = ""):
    """The variant of a group (:func:`~.fusion.group_variants`) to run: the fastest in this
    model where the log's in-place ranking (:mod:`.in_place`, under ``context``) timed variants
    against each other in its latest run; else the one whose best record is fastest by the
    search's measurements (alone, weights warm); the plain one where no other has a record."""
    if len(variants) == 1 or log is None:
        return variants[0]
    from ..schedule.log_schedule import (
        context_records_cached,
        load_records_cached,
        median_cost,
        ranked_context_records,
        search_cost,
        select_from_log,
    )
    if context:
        timed = {}
        for k, gd in enumerate(variants):
            ranked = ranked_context_records(context_records_cached(log, gd.dag.workload_key),
                                            gd.dag.workload_key, target, context)
            if ranked:
                timed[k] = (ranked[0].result.timestamp, median_cost(ranked[0]))
        if len(timed) >= 2 and len({t for t, _ in timed.values()}) == 1:
            return variants[min(timed, key=lambda k: timed[k][1])]
    best, best_cost = variants[0], float("inf")
    for gd in variants:
        try:
            _, rec = select_from_log(gd.dag, log, target, on_missing="error")
        except LookupError:
            continue
        cost = search_cost(load_records_cached(log), rec)  # a re-timing's cost is not comparable
        if cost < best_cost:
            best, best_cost = gd, cost
    return best


def _build_group(gd, target, log, context=""):
    """``(kernel, schedule, tuned)``: the group's kernel from the log's best record (by its cost
    measured in this model, where the log has that), or the default schedule."""
    sched = None
    if log is not None:
        from ..schedule.log_schedule import schedule_from_log
        try:
            sched = schedule_from_log(gd.dag, log, target, on_missing="error", context=context)
        except LookupError:
            sched = None
    tuned = sched is not None
    if sched is None:
        sched = default_cpu_schedule(gd.dag)
    kernel = build(gd.dag, target, schedule=sched, constants=gd.constants or None)
    return kernel, sched, tuned
