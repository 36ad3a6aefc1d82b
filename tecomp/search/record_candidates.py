"""Measured records back into search candidates: what a resumed tuning and a cost model that
learns from earlier logs start from."""
from __future__ import annotations

import math

import numpy as np

from ..schedule import State, step_from_record
from .annotate import Candidate
from .decisions import Decisions

__all__ = ["candidates_from_records"]


def candidates_from_records(dag, records) -> tuple:
    """``(candidates, costs, skipped)``: the records of ``dag``'s workload replayed into
    :class:`~tecomp.search.annotate.Candidate` s (sketch index -1), their mean costs (inf when
    failed), in log order; ``skipped`` counts records of other workloads or that do not replay."""
    cands, costs, skipped, seen = [], [], 0, set()
    for r in records:
        if r.workload_key != dag.workload_key or r.key in seen or not r.result.measured:
            skipped += 1
            continue
        try:
            steps = [step_from_record(s) for s in r.steps]
            state = State.replay(dag, steps)
        except Exception:  # noqa: BLE001 - a record this version cannot replay
            skipped += 1
            continue
        seen.add(r.key)
        cands.append(Candidate(-1, Decisions.from_json(r.decisions), steps, state))
        costs.append(r.result.mean_cost if r.result.is_valid else math.inf)
    return cands, np.asarray(costs, dtype=np.float64), skipped
