"""One operator of the suite (:mod:`tecomp.testing.operator_suite`): its DAG, inputs, reference and
torch peer, and the input makers the builders share."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

__all__ = ["OpCase", "rand_input", "inputs_of"]


@dataclass
class OpCase:
    """One operator: its DAG (inputs first, one output last), inputs, reference and torch peer."""
    name: str
    dag: object
    make_inputs: Callable
    reference: Callable
    torch_fn: Callable | None = None   # torch_fn(torch, inputs) -> callable
    #: the floating-point work of the cheapest known algorithm, where the DAG as written does
    #: more (a sum over several axes that factors); None: the DAG's own count
    least_flops: float | None = None

    def flops(self) -> float:
        """The work GFLOP/s figures divide: :attr:`least_flops`, else the DAG's flop count."""
        return float(self.least_flops or self.dag.flop_count())

    def search_setup(self, seed: int, **task_options):
        """``(task, sketches, rng, inputs, reference output)`` for sampling candidates of this
        operator: its SearchTask (``task_options`` as for SearchTask), the task's sketches, an rng
        seeded with ``seed``, inputs drawn from it and the reference's first output."""
        from ..search.target_search import generate_sketches
        from ..search.task import SearchTask
        task = SearchTask(self.dag, **task_options)
        sketches = generate_sketches(task)
        rng = np.random.default_rng(seed)
        x = self.make_inputs(rng)
        return task, sketches, rng, x, self.reference(x)[0]


def rand_input(shape, lo=-1.0, hi=1.0):
    """An input maker: ``rng`` -> float32 uniform in [lo, hi) of ``shape``."""
    return lambda rng: rng.uniform(lo, hi, shape).astype("float32")


def inputs_of(*makers):
    """The makers of every input as one ``make_inputs(rng)``."""
    return lambda rng: [m(rng) for m in makers]
