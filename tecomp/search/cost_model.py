"""Cost models rank candidates the search has not measured. Every model sits behind
``update(inputs, results)`` / ``predict(candidates)`` so that random and learned models swap."""
from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

__all__ = ["CostModel", "RandomModel"]


@runtime_checkable
class CostModel(Protocol):
    def update(self, inputs: list, results: list) -> None:
        """Learn from measured candidates and their MeasureResults."""

    def predict(self, candidates: list) -> np.ndarray:
        """A score per candidate; higher is better (predicted throughput)."""


class RandomModel:
    """Uniform random scores: the search's behaviour before anything is learned."""

    def __init__(self, seed: int = 0):
        self.rng = np.random.default_rng(seed)

    def update(self, inputs, results) -> None:
        pass

    def predict(self, candidates) -> np.ndarray:
        return self.rng.random(len(candidates))
