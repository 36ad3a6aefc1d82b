"""What the search does differently per target kind, chosen once: a :class:`TargetSearch` bundles a
target's sketch rules and its annotator (the function that turns a sketch plus decisions into a
candidate). :func:`generate_sketches` and :func:`materialize` are the search's entry points; they
look the bundle up by ``task.target.kind``, so no other module of the search tests the kind to
choose rules or annotation.

Adding a target to the search: its rule list (a module like :mod:`.gpu_sketch`), its annotator
(like :mod:`.gpu_annotate`) and an entry in :func:`target_search` (docs/ARCHITECTURE.md).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..target import Target, TargetKind
from .annotate import Candidate, materialize_cpu
from .gpu_annotate import materialize_gpu
from .gpu_sketch import GPU_RULES
from .sketch import CPU_RULES
from .sketch_rule import Sketch, enumerate_sketches

__all__ = ["TargetSearch", "target_search", "generate_sketches", "materialize"]


@dataclass(frozen=True)
class TargetSearch:
    """The search's parts for one target kind.

    Attributes
    ----------
    kind : TargetKind
    rules : tuple of SketchRule
        Tried in order at every stage (:func:`~.sketch_rule.enumerate_sketches`).
    materialize : callable
        ``(task, sketch_id, sketch, decisions, rng) -> Candidate or None``: the annotator.
    """
    kind: TargetKind
    rules: tuple
    materialize: Callable


_BUNDLES = {
    TargetKind.LLVM: TargetSearch(TargetKind.LLVM, tuple(CPU_RULES), materialize_cpu),
    TargetKind.CUDA: TargetSearch(TargetKind.CUDA, tuple(GPU_RULES), materialize_gpu),
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


def materialize(task, sketch_id: int, sketch: Sketch, decisions: dict, rng) -> Candidate | None:
    """The candidate of ``sketch`` under ``decisions`` through the task's target's annotator
    (missing decisions are sampled with ``rng`` and written back); None when the result is not a
    legal schedule."""
    return target_search(task.target).materialize(task, sketch_id, sketch, decisions, rng)
