"""Program features for the learned cost model: one fixed-length vector per innermost store.

A candidate is lowered (:func:`tecomp.lowering.lower.lower_state`) and every ``Store`` of the loop
IR gets a row of :data:`FEATURE_LEN` floats, in the spirit of Ansor's 164 (see
docs/ARCHITECTURE.md for where features sit in the search). Every value is ``log2(1 + x)`` of a
non-negative quantity (one-hot slots stay 0/1), never NaN or inf. The layout (names in
:data:`FEATURE_NAMES`), group by group, is in :mod:`tecomp.search.feature_layout`; the extraction
from one lowered function in :mod:`tecomp.search.feature_visitor`.

Touched regions come from an affine reading of each index (``x // c`` divides the coefficients,
``x % c`` caps the span) and the enclosing loop extents; an index loaded from an integer buffer
(sparse ``indices``/``indptr``) moves by that array's mean absolute step. Data-dependent loop
extents (sparse rows) are averaged with numpy over a sample of the outer iterations, using the
task's real index data (``task.inputs``) or, without it, the uniform pattern implied by the nnz
(as ``ComputeDAG.flop_count`` assumes). Where Ansor samples the intensity curve at evenly spaced
fractions of the flops (nine of ten samples then fall between the two outermost loops), we sample
in log space so that the inner levels, where registers and caches live, are seen.

The *effective innermost loop* models what LLVM does with loops we leave to it: unrolled loops and
small constant serial loops (extent x body under LLVM's full-unroll threshold) become straight-line
code, and the loop around them is the one the loop vectorizer may vectorize. On random matmul
schedules, unannotated programs that are fast (innermost ``k`` of 16, fully unrolled, then ``j``
vectorized by LLVM) were what the Ansor-style features misranked most.
"""
from __future__ import annotations

import os
import weakref
from collections import OrderedDict

import numpy as np

from ..lowering.lower import lower_state
from .feature_layout import FEATURE_LEN, FEATURE_NAMES
from .feature_visitor import FuncFeatures

__all__ = ["FEATURE_LEN", "FEATURE_NAMES", "FeatureExtractor", "extract", "extract_one"]


class TaskInfo:
    """What extraction needs of a task: index data by buffer name and cache-line size."""

    def __init__(self, task, dag):
        hw = getattr(task, "hardware", None)
        self.line = float(getattr(hw, "cache_line_bytes", 64) or 64)
        self.cores = int(getattr(hw, "num_cores", 0) or os.cpu_count() or 1)
        data: dict = {}
        try:  # the uniform stand-in for pointer arrays, overridden by the task's real data
            for t, a in dag.index_data(getattr(task, "inputs", None) or None).items():
                data[t.name] = np.asarray(a)
        except Exception:  # noqa: BLE001 - features must not fail for lack of index data
            pass
        for k, v in (getattr(task, "inputs", None) or {}).items():
            data[k] = np.asarray(v)
        self.data = data
        self.slope: dict = {}  # name -> (mean |step|, value span) of an integer array
        for k, a in data.items():
            if a.dtype.kind in "iu" and a.size:
                step = float(np.abs(np.diff(a.astype(np.int64))).mean()) if a.size > 1 else 0.0
                self.slope[k] = (step, float(a.max()) - float(a.min()) + 1.0)


class FeatureExtractor:
    """Features of candidates of one task (or several), cached by candidate key.

    Parameters
    ----------
    task : SearchTask, list of SearchTask, or None
        Gives the index data of sparse tasks (``task.inputs``) and the cache-line size; a
        candidate of a DAG no given task has falls back to its DAG and a uniform sparsity
        assumption. Several tasks: one model shared by the tasks of a network.
    cache_size : int
        Feature arrays kept (least recently used ones are dropped).
    """

    def __init__(self, task=None, cache_size: int = 100_000):
        self.task = task
        tasks = task if isinstance(task, (list, tuple)) else [task] if task is not None else []
        self._tasks = {id(t.dag): t for t in tasks}
        self.cache: OrderedDict = OrderedDict()
        self.cache_size = cache_size
        self._infos: dict = {}

    def _info(self, dag) -> TaskInfo:
        info = self._infos.get(id(dag))
        if info is None or info[0] is not dag:
            use_task = self._tasks.get(id(dag))
            use_task = use_task if use_task is not None and use_task.dag is dag else None
            info = self._infos[id(dag)] = (dag, TaskInfo(use_task, dag))
        return info[1]

    def extract_one(self, candidate) -> np.ndarray:
        """The ``(n_stores, FEATURE_LEN)`` float32 features of one candidate (an all-zero row when
        the candidate cannot be lowered)."""
        key = candidate.key
        hit = self.cache.get(key)
        if hit is not None:
            self.cache.move_to_end(key)
            return hit
        state = candidate.state
        try:
            func = lower_state(state)
            out = FuncFeatures(self._info(state.dag), func).run()
        except Exception:  # noqa: BLE001 - an unlowerable candidate gets an all-zero row
            out = np.zeros((1, FEATURE_LEN), dtype=np.float32)
        self.cache[key] = out
        if len(self.cache) > self.cache_size:
            self.cache.popitem(last=False)
        return out

    def extract(self, candidates) -> list:
        """One ``(n_stores, FEATURE_LEN)`` float32 array per candidate."""
        return [self.extract_one(c) for c in candidates]


_EXTRACTORS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _extractor(task) -> FeatureExtractor:
    if task is None:
        return _NO_TASK
    fx = _EXTRACTORS.get(task)
    if fx is None:
        fx = _EXTRACTORS[task] = FeatureExtractor(task)
    return fx


_NO_TASK = FeatureExtractor(None, cache_size=10_000)


def extract(task, candidates) -> list:
    """Features of ``candidates`` (objects with ``.state`` and ``.key``) of ``task``.

    Parameters
    ----------
    task : SearchTask or None
    candidates : list of Candidate

    Returns
    -------
    list of ndarray
        One ``(n_stores, FEATURE_LEN)`` float32 array per candidate, cached per task by key.
    """
    return _extractor(task).extract(candidates)


def extract_one(task, candidate) -> np.ndarray:
    """Features of one candidate (see :func:`extract`)."""
    return _extractor(task).extract_one(candidate)
