"""What the learned cost model knows before a task's first measurement: the features and measured
costs of other operators' tuned programs on a CPU of the same vector width.

Without it, the first round of a tuning (16 of a 64-trial budget) is drawn at random and the
model learns only from the few programs of its own task. Trained on sixteen other operators of
the DSL suite, the model ranks an unseen operator's programs with a pairwise accuracy of 0.67
(0.5 is random), and with the task's own first 32 / 64 programs added, 0.71 / 0.73 against
0.66 / 0.67 without the prior (leave-one-family-out over the seventeen operators on Zen 1;
docs/search_notes.md). The prior's programs are labelled within a group per operator and tuning
run, so their costs never compare with the task's.

A prior file is an ``.npz`` written by :func:`save_prior` (``scripts/make_model_prior.py`` makes
the shipped ones from ``tuning_logs/``): the feature rows, the rows per program, each
program's cost and group. It holds numbers only and is read with ``allow_pickle=False``.
"""
from __future__ import annotations

import functools
import math
import os
from dataclasses import dataclass

import numpy as np

from .feature_layout import FEATURE_LEN

__all__ = ["ModelPrior", "PRIOR_GROUP", "save_prior", "load_prior", "cpu_prior", "prior_path"]

#: the prefix of a prior program's group in a cost model (labels are normalized per group)
PRIOR_GROUP = "prior:"

_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "priors")
_FILES = {32: "avx2.npz", 64: "avx512.npz"}  # by vector register bytes


@dataclass(frozen=True)
class ModelPrior:
    """Measured programs of other tasks, as a cost model's training samples.

    Attributes
    ----------
    name : str
        Where it came from (the file's stem).
    feats : tuple of ndarray
        Per program, its ``(n_stores, FEATURE_LEN)`` float32 feature rows.
    costs : ndarray
        Per program, its mean cost in seconds (inf: it failed).
    groups : tuple of str
        Per program, the task (and tuning run) it was measured in.
    """
    name: str
    feats: tuple
    costs: np.ndarray
    groups: tuple

    def __len__(self) -> int:
        return len(self.feats)

    def without(self, *prefixes: str) -> "ModelPrior":
        """The prior less the programs whose group starts with one of ``prefixes`` (to judge it
        on an operator it holds, leave that operator out)."""
        keep = [i for i, g in enumerate(self.groups) if not g.startswith(prefixes)]
        return ModelPrior(self.name, tuple(self.feats[i] for i in keep), self.costs[keep],
                          tuple(self.groups[i] for i in keep))


def save_prior(path, feats: list, costs, groups: list) -> None:
    """Write a prior file: ``feats`` (per program, its feature rows), ``costs`` (seconds, inf for
    a failure) and ``groups`` (per program, a name; costs compare only within a group)."""
    if not (len(feats) == len(costs) == len(groups)):
        raise ValueError("feats, costs and groups differ in length")
    rows = np.array([f.shape[0] for f in feats], dtype=np.int32)
    X = (np.concatenate(feats).astype(np.float32) if feats
         else np.zeros((0, FEATURE_LEN), np.float32))
    names = sorted(set(groups))
    gid = np.array([names.index(g) for g in groups], dtype=np.int32)
    with open(path, "wb") as f:
        np.savez_compressed(f, X=X, rows=rows, costs=np.asarray(costs, dtype=np.float64),
                            group=gid, names=np.array(names, dtype=np.str_))


def load_prior(path) -> ModelPrior:
    """Read a prior file written by :func:`save_prior`; ``ValueError`` when it is not one, or was
    written with another feature layout."""
    where = os.fspath(path)
    try:
        with np.load(where, allow_pickle=False) as z:
            X, rows, costs = z["X"], z["rows"], z["costs"]
            gid, names = z["group"], [str(s) for s in z["names"]]
    except (OSError, KeyError, ValueError) as e:
        raise ValueError(f"{where}: not a cost-model prior ({e})") from None
    n = len(rows)
    ok = (X.ndim == 2 and X.shape[1] == FEATURE_LEN and rows.ndim == costs.ndim == gid.ndim == 1
          and len(costs) == len(gid) == n and (rows >= 1).all() and int(rows.sum()) == len(X)
          and ((gid >= 0) & (gid < len(names))).all() and np.isfinite(X).all()
          and not np.isnan(costs).any())
    if not ok:
        raise ValueError(f"{where}: a cost-model prior with inconsistent arrays or another feature "
                         f"layout (this version has {FEATURE_LEN} features)")
    X = X.astype(np.float32, copy=False)
    bounds = np.concatenate([[0], np.cumsum(rows)])
    feats = tuple(X[bounds[i]:bounds[i + 1]] for i in range(n))
    costs = np.where(costs > 0, costs, math.inf)
    name = os.path.splitext(os.path.basename(where))[0]
    return ModelPrior(name, feats, costs, tuple(names[i] for i in gid))


def prior_path(vector_bytes: int) -> str | None:
    """The shipped prior of CPUs with ``vector_bytes``-wide registers, if there is one."""
    f = _FILES.get(int(vector_bytes))
    return os.path.join(_DIR, f) if f is not None else None


@functools.lru_cache(maxsize=4)
def _shipped(path: str) -> ModelPrior | None:
    return load_prior(path) if os.path.exists(path) else None


def cpu_prior(hardware) -> ModelPrior | None:
    """The shipped prior for a CPU with ``hardware`` (:class:`~.task.HardwareParams`): programs
    measured on a CPU of the same vector width, or None where none was shipped."""
    path = prior_path(getattr(hardware, "vector_bytes", 0))
    return _shipped(path) if path is not None else None
