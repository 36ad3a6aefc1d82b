"""What the search does differently per target kind, chosen once: a :class:`TargetSearch` bundles a
target's sketch rules, its annotator (the function that turns a sketch plus decisions into a
candidate), its hardware parameters and, for a target whose kernels run on a device, the
measurement hooks (:class:`DeviceMeasurement`). :func:`generate_sketches` and :func:`materialize`
are the search's entry points; they, ``HardwareParams.for_target`` and the measurer look the
bundle up by ``task.target.kind``, so no other module of the search tests the kind.

Adding a target to the search: its rule list (a module like :mod:`.gpu_sketch`), its annotator
(like :mod:`.gpu_annotate`), its hardware parameters, its measurement hooks when its kernels do
not run in the measuring process's memory (like :mod:`.measure_cuda`) and an entry in
:func:`target_search` (docs/ARCHITECTURE.md).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..target import Target, TargetKind
from . import measure_cuda
from .annotate import Candidate, materialize_cpu
from .decisions import Decisions
from .gpu_annotate import materialize_gpu
from .gpu_sketch import GPU_RULES
from .model_prior import cpu_prior
from .panel_seeds import panel_seeds
from .sketch import CPU_RULES
from .sketch_rule import Sketch, enumerate_sketches
from .task import HardwareParams

__all__ = ["TargetSearch", "DeviceMeasurement", "target_search", "generate_sketches", "materialize"]


@dataclass(frozen=True)
class DeviceMeasurement:
    """How candidates of a target whose kernels run on a device are measured (the measurement
    worker runs host kernels itself, on arrays in its own memory).

    Attributes
    ----------
    require : callable
        ``(targets) -> None``: raises, in the parent before any worker gets a task, with one line
        saying why these targets cannot be measured on this machine.
    device_data : callable
        ``(inputs, outputs) -> data``: a task's host arrays copied to the device (once per task).
    reference : callable
        ``(kernel, data, failure) -> outputs``: the default schedule's outputs, on the host.
    run : callable
        ``(kernel, data, reference, *, repeat, min_repeat_ms, names, cutoff, compare, failure)
        -> costs``: check and time one candidate.
    """
    require: Callable
    device_data: Callable
    reference: Callable
    run: Callable


@dataclass(frozen=True)
class TargetSearch:
    """The search's parts for one target kind.

    Attributes
    ----------
    kind : TargetKind
    rules : tuple of SketchRule
        Tried in order at every stage (:func:`~.sketch_rule.enumerate_sketches`).
    materialize : callable
        ``(task, sketch_id, sketch, Decisions, rng) -> Candidate or None``: the annotator.
    hardware : callable
        ``(target) -> HardwareParams``: the limits the annotator and the cost model use.
    device : DeviceMeasurement or None
        The measurement hooks of a device target; None: the worker runs the kernel itself.
    prior : callable or None
        ``(HardwareParams) -> ModelPrior or None``: what the learned cost model starts from on
        such a machine (:mod:`.model_prior`); None: no prior for this kind.
    seeds : callable or None
        ``(task, sketches, sketch names, model, n, seed) -> [Decisions]``: programs the search
        measures first (:func:`.panel_seeds.panel_seeds`); None: none for this kind.
    """
    kind: TargetKind
    rules: tuple
    materialize: Callable
    hardware: Callable
    device: DeviceMeasurement | None = None
    prior: Callable | None = None
    seeds: Callable | None = None


CUDA_MEASUREMENT = DeviceMeasurement(measure_cuda.require_gpu, measure_cuda.DeviceData,
                                     measure_cuda.reference_cuda, measure_cuda.run_candidate_cuda)

_BUNDLES = {
    TargetKind.LLVM: TargetSearch(TargetKind.LLVM, tuple(CPU_RULES), materialize_cpu,
                                  HardwareParams.for_cpu, prior=cpu_prior,
                                  seeds=panel_seeds),
    TargetKind.CUDA: TargetSearch(TargetKind.CUDA, tuple(GPU_RULES), materialize_gpu,
                                  HardwareParams.for_cuda, CUDA_MEASUREMENT),
}


def target_search(target) -> TargetSearch:
    """The bundle of ``target`` (a :class:`~tecomp.target.Target` or a string like ``"cuda"``)."""
    kind = Target.parse(target).kind if not isinstance(target, TargetKind) else target
    return _BUNDLES[kind]


def generate_sketches(task, rules=None, max_sketches: int = 64) -> list:
    """All sketches of ``task.dag`` under ``rules`` (default: the task's target's rules)."""
    if rules is None:
        rules = target_search(task.target).rules
    return enumerate_sketches(task, rules, max_sketches)


def materialize(task, sketch_id: int, sketch: Sketch, decisions, rng) -> Candidate | None:
    """The candidate of ``sketch`` under ``decisions`` (:class:`~.decisions.Decisions`, or their
    JSON form as a record stores them) through the task's target's annotator (missing decisions
    are sampled with ``rng``; the candidate's are complete); None when the result is not a legal
    schedule."""
    return target_search(task.target).materialize(task, sketch_id, sketch,
                                                  Decisions.coerce(decisions), rng)
