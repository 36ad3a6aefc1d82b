"""The learned cost model: XGBoost on per-store features with Ansor's pack-sum objective.

A program's score is the sum of its stores' scores (Ansor's cost model; docs/ARCHITECTURE.md). The
default loss is pairwise (below); the alternative is Ansor's weighted pack-sum squared error
``w * (sum_s f(s) - y)^2``, where the gradient of every row of a program is ``(sum - y) * w`` and
the hessian ``w``. The label of a measured program is its
normalized throughput ``r = best cost of its task / its cost`` in (0, 1] (failed measurements:
``r = 0``), which Ansor uses as is (``label="linear"``). Ansor's weight is ``w = y``, which gives
failed programs no weight at all; we floor it at ``min_weight`` so failures are learned too.

Measured choices (``python -m tecomp.search.model_eval`` on 512-trial random-search logs of matmul
1024^3 and conv2d 64x56x56 3x3 NCHW/NHWC, first 70% of rounds for training, the rest held out;
pairwise accuracy / top-32 recall, mean of the three):

- Ansor's setup (linear labels, depth 10, eta 0.2, no subsampling): 0.716 / 0.59;
- ``label="log"``, ``y = max(0, 1 + log2(r) / 10)`` (a program 1024x slower than the best scores
  0): the bulk of random programs are 10-1000x slower than the best, and linear labels leave their
  order to noise; with depth 6, eta 0.1, row subsample 0.8 and column subsample 0.5, which keep
  the trees from memorizing a few hundred programs: 0.777-0.782 / 0.63-0.66 (three seeds);
- the same with a pairwise logistic (RankNet) loss on the packed program scores instead of the
  squared error (``objective="rank"``, 64 sampled partners per program): 0.792 / 0.788 / 0.804
  (mean 0.795, against 0.765 / 0.782 / 0.785 for the squared error on the same split), since the
  search only needs the order. This is the default; depth, eta, rounds, column subsampling and
  the number of partners moved the mean by less than 0.01.

Until ``warmup_samples`` valid measurements exist, :meth:`XGBModel.predict` returns uniform random
scores. One round (16) is enough to beat them: trained on the first 16 / 32 / 64 programs of the
random logs above and scored on the rest, pairwise accuracy is 0.68 / 0.71 / 0.72 on matmul and
0.69 / 0.69 / 0.72 on conv NCHW (3 seeds), so the default warm-up is 16 valid samples. The
booster is retrained from scratch only when the data grew by ``retrain_growth`` (share) or by
``retrain_min_new`` samples since the last training, which bounds training time to a few percent
of a tuning run. Importing this module raises ``ImportError`` when xgboost is missing, so
``tc.tune`` falls back to the random model.
"""
from __future__ import annotations

import hashlib
import json
import math
import os

import numpy as np

try:
    import xgboost as xgb
except Exception as e:  # noqa: BLE001 - a broken install (missing libgomp) is "not available" too
    raise ImportError(f"the learned cost model needs xgboost (pip install 'tecomp[tune]'): {e}") \
        from e

from .features import FEATURE_LEN, FeatureExtractor
from .model_prior import PRIOR_GROUP

__all__ = ["XGBModel", "pack_sum_objective", "pack_sum_predict", "pack_sum_rank_objective"]

_FORMAT = 1
_LOG_SPAN = 10.0  # log-scaled labels: a program 2^10 times slower than the best scores 0
# boosting rounds of the rank objective with a prior: leave-one-family-out over the suite's
# operators, 150 rounds ranked as well as 300 (pairwise accuracy 0.674 / 0.698 / 0.725 with 16 /
# 32 / 64 own programs, against 0.683 / 0.707 / 0.720) in 0.6x the training time
_PRIOR_ROUNDS = 150
# boosters trained on a prior's programs alone, by everything that decides them: every tuning in
# a process with the same prior and settings trains this same booster first (seconds each)
_PRIOR_BOOSTERS: dict = {}
_PRIOR_BOOSTERS_MAX = 4


def pack_sum_predict(row_scores: np.ndarray, program_of_row: np.ndarray, n: int) -> np.ndarray:
    """Program scores: the sums of their rows' scores."""
    return np.bincount(program_of_row, weights=row_scores, minlength=n)


def pack_sum_objective(program_of_row: np.ndarray, y: np.ndarray, w: np.ndarray):
    """The custom XGBoost objective ``(preds, dmatrix) -> (grad, hess)`` of the weighted pack-sum
    squared error, for rows belonging to programs ``program_of_row`` with labels ``y`` and weights
    ``w`` (per program)."""
    wr = w[program_of_row]

    def objective(preds, _dtrain):
        s = pack_sum_predict(preds, program_of_row, len(y))
        return (s - y)[program_of_row] * wr, wr.copy()
    return objective


def pack_sum_rank_objective(program_of_row: np.ndarray, y: np.ndarray, groups, partners: int = 64,
                            seed: int = 0):
    """The custom XGBoost objective of a pairwise logistic (RankNet) loss on program scores (sums
    of their rows' scores): for sampled pairs ``(a, b)`` of one group with ``y[a] > y[b]``, the loss
    ``log(1 + exp(-(s_a - s_b)))``. Each program is paired with ``partners`` random programs of its
    group (sampling keeps it linear in the data; all pairs cost O(n^2) per boosting round)."""
    n = len(y)
    rng = np.random.default_rng(seed)
    groups = np.asarray(groups, dtype=object)
    firsts, seconds = [], []
    for g in dict.fromkeys(groups):
        idx = np.flatnonzero(groups == g)
        if len(idx) < 2:
            continue
        a = np.repeat(idx, min(partners, len(idx) - 1))
        firsts.append(a)
        seconds.append(idx[rng.integers(0, len(idx), size=len(a))])
    a = np.concatenate(firsts) if firsts else np.zeros(0, dtype=np.int64)
    b = np.concatenate(seconds) if seconds else np.zeros(0, dtype=np.int64)
    sign = np.sign(y[a] - y[b])
    keep = sign != 0
    a, b, sign = a[keep], b[keep], sign[keep]

    def objective(preds, _dtrain):
        s = pack_sum_predict(preds, program_of_row, n)
        p = 1.0 / (1.0 + np.exp(np.clip(sign * (s[a] - s[b]), -50.0, 50.0)))  # P(misordered)
        gp, hp = -sign * p, p * (1.0 - p)
        grad = np.bincount(a, gp, n) - np.bincount(b, gp, n)
        hess = np.bincount(a, hp, n) + np.bincount(b, hp, n)
        return grad[program_of_row], np.maximum(hess, 1e-6)[program_of_row]
    objective.pairs = (a, b, sign)  # (better-or-worse program, partner, sign of y[a] - y[b])
    return objective


def _pack_sum_rmse(program_of_row, y):
    def metric(preds, _dtrain):
        s = pack_sum_predict(preds, program_of_row, len(y))
        return "pack-sum-rmse", float(np.sqrt(np.mean((s - y) ** 2)))
    return metric


class XGBModel:
    """XGBoost ranker of candidates, behind the cost-model interface (``update`` / ``predict``).

    Parameters
    ----------
    task : SearchTask or list of SearchTask, optional
        The task(s) whose candidates are scored (they give sparse index data to the features);
        one model may serve the tasks of a network. Labels are normalized per workload key.
    seed : int
        Seeds the warm-up random scores and XGBoost.
    warmup_samples : int
        Valid measurements needed before the model is trained; random scores until then.
    retrain_growth, retrain_min_new : float, int
        Retrain when the samples grew by this share, or by this many, since the last training.
    label : {"log", "linear"}
        The training target: log-scaled (default) or plain (Ansor) normalized throughput.
    objective : {"rank", "regression"}
        ``"rank"`` (default): a pairwise logistic loss on the packed program scores (only the
        order of the labels matters); ``"regression"``: Ansor's weighted pack-sum squared error.
    min_weight : float
        Floor of the sample weight (Ansor's is the label itself, 0 for failed programs).
    num_boost_round, early_stopping_rounds : int
        Boosting rounds (default 300 for ``"rank"``, 150 once a prior is added: as accurate on
        its thousands of programs at half the training time; for ``"regression"`` 600 at most,
        stopping when the training pack-sum RMSE stalls ``early_stopping_rounds`` rounds).
    params : dict, optional
        XGBoost parameters overriding the defaults (Ansor's gamma 0.001 and min_child_weight 0;
        depth 6, eta 0.1 and subsampling, measured as above, instead of depth 10 and eta 0.2).
    """

    def __init__(self, task=None, seed: int = 0, warmup_samples: int = 16,
                 retrain_growth: float = 0.1, retrain_min_new: int = 64, label: str = "log",
                 min_weight: float = 0.1, num_boost_round: int | None = None,
                 early_stopping_rounds: int = 60, params: dict | None = None,
                 objective: str = "rank"):
        if label not in ("log", "linear"):
            raise ValueError(f"label must be 'log' or 'linear', got {label!r}")
        if objective not in ("rank", "regression"):
            raise ValueError(f"objective must be 'rank' or 'regression', got {objective!r}")
        self.objective = objective
        self.rounds_given = num_boost_round  # None: the default, which a prior lowers
        if num_boost_round is None:
            num_boost_round = 300 if objective == "rank" else 600
        self.task, self.seed = task, seed
        self.warmup_samples, self.min_weight, self.label = warmup_samples, min_weight, label
        self.retrain_growth, self.retrain_min_new = retrain_growth, retrain_min_new
        self.num_boost_round, self.early_stopping_rounds = num_boost_round, early_stopping_rounds
        self.params = {"max_depth": 6, "gamma": 0.001, "min_child_weight": 0, "eta": 0.1,
                       "subsample": 0.8, "colsample_bytree": 0.5,
                       "base_score": 0.0, "nthread": max(1, (os.cpu_count() or 2) // 2),
                       "seed": seed, "verbosity": 0, "disable_default_eval_metric": 1,
                       "tree_method": "hist"}
        self.params.update(params or {})
        self.rng = np.random.default_rng(seed)
        self.features = FeatureExtractor(task)
        self.booster = None
        self.keys: list = []      # one per measured program
        self.feats: list = []     # (n_stores, FEATURE_LEN) float32 each
        self.costs: list = []     # mean cost in seconds (inf: failed)
        self.groups: list = []    # workload key (labels are normalized per group)
        self._index: dict = {}    # key -> position
        self.n_trained = 0        # samples at the last training
        self.n_prior = 0          # of the samples, programs of a prior (:meth:`add_prior`)
        self.train_seconds = 0.0  # total time spent training
        self.n_trainings = 0

    # ------------------------------------------------------------------ data
    def update(self, inputs: list, results: list) -> None:
        """Add measured candidates (``inputs``) with their :class:`MeasureResult` s. The model
        retrains when it is next asked to :meth:`predict` and enough new data arrived (a tuning's
        last round then trains nothing it will not use)."""
        feats = self.features.extract(inputs)
        for c, f, r in zip(inputs, feats, results):
            cost = r.mean_cost if r.is_valid else math.inf
            self.add_sample(c.key, f, cost, c.state.dag.workload_key)

    def add_sample(self, key: str, features: np.ndarray, cost: float, group: str = "") -> None:
        """Add (or replace) one measured program without training."""
        pos = self._index.get(key)
        if pos is None:
            self._index[key] = len(self.keys)
            self.keys.append(key)
            self.feats.append(features)
            self.costs.append(float(cost))
            self.groups.append(group)
        else:
            self.feats[pos], self.costs[pos], self.groups[pos] = features, float(cost), group

    def add_records(self, task, records, group: str | None = None) -> int:
        """Add the measured programs of tuning ``records`` of ``task`` (records of other workloads
        are skipped) as training samples, labelled within ``group`` (default: ``task``'s
        workload; records of another machine need a group of their own, as their costs do not
        compare with this one's). The model trains on them when it is next asked to predict (or
        call :meth:`train`). A model that has seen other tunings ranks candidates from the first
        round instead of scoring at random (``python -m tecomp.search.model_eval --other-log``
        measures what that is worth). Returns how many programs were added."""
        from .record_candidates import candidates_from_records
        cands, costs, _ = candidates_from_records(task.dag, records)
        group = task.dag.workload_key if group is None else str(group)
        for c, f, cost in zip(cands, FeatureExtractor(task).extract(cands), costs):
            # the group in the key: one program measured on two machines is two samples
            self.add_sample(c.key if group == task.dag.workload_key else f"{group} {c.key}", f,
                            cost, group)
        return len(cands)

    def add_prior(self, prior) -> int:
        """Add the programs of a :class:`~.model_prior.ModelPrior` (other tasks' measured
        programs) as training samples, each labelled within its own group: the model then ranks
        candidates from the first round, and its retraining counts only this task's samples.
        Returns how many programs were added."""
        added = 0
        for i, (f, cost, g) in enumerate(zip(prior.feats, prior.costs, prior.groups)):
            key = f"{PRIOR_GROUP}{prior.name} {g} #{i}"
            if key not in self._index:
                self.add_sample(key, f, float(cost), f"{PRIOR_GROUP}{prior.name} {g}")
                self.n_prior += 1
                added += 1
        self._prior_rounds()
        return added

    def _prior_rounds(self) -> None:
        if self.n_prior and self.rounds_given is None and self.objective == "rank":
            self.num_boost_round = _PRIOR_ROUNDS

    @property
    def n_valid(self) -> int:
        """Measured programs with a finite cost."""
        return sum(1 for c in self.costs if math.isfinite(c))

    def _should_train(self) -> bool:
        if self.n_valid < self.warmup_samples:
            return False
        new = len(self.keys) - self.n_trained
        if self.booster is None:
            return new > 0
        # growth of the task's own samples: a prior's thousands would otherwise hold it back
        grown = max(0, self.n_trained - self.n_prior)
        return new >= self.retrain_min_new or new >= self.retrain_growth * grown and new > 0

    def labels(self) -> np.ndarray:
        """Training targets: ``r = best cost of the program's group / its cost`` (0 for failed
        programs), log-scaled to ``max(0, 1 + log2(r) / 10)`` unless ``label="linear"``."""
        costs = np.asarray(self.costs, dtype=np.float64)
        groups = np.asarray(self.groups, dtype=object)
        y = np.zeros(len(costs))
        for g in set(self.groups):
            m = groups == g
            finite = np.isfinite(costs[m]) & (costs[m] > 0)
            if finite.any():
                best = costs[m][finite].min()
                y[m] = np.where(finite, best / np.where(finite, costs[m], 1.0), 0.0)
        if self.label == "log":
            y = np.where(y > 0, np.maximum(0.0, 1.0 + np.log2(np.maximum(y, 1e-300)) / _LOG_SPAN),
                         0.0)
        return y

    # ------------------------------------------------------------------ training
    def train(self) -> None:
        """Fit a fresh booster on every sample (a first training on a prior alone is shared
        within the process: :meth:`_prior_only_key`)."""
        import time
        t0 = time.perf_counter()
        memo = self._prior_only_key()
        shared = _PRIOR_BOOSTERS.get(memo) if memo is not None else None
        if shared is not None:
            self.booster = shared.copy()
        else:
            self.booster = self._fit()
            if memo is not None:
                while len(_PRIOR_BOOSTERS) >= _PRIOR_BOOSTERS_MAX:
                    _PRIOR_BOOSTERS.pop(next(iter(_PRIOR_BOOSTERS)))
                _PRIOR_BOOSTERS[memo] = self.booster.copy()
        self.n_trained = len(self.keys)
        self.n_trainings += 1
        self.train_seconds += time.perf_counter() - t0

    def _fit(self):
        X, pid = _stack(self.feats)
        y = self.labels()
        dtrain = xgb.DMatrix(X)
        if self.objective == "rank":
            obj = pack_sum_rank_objective(pid, y, self.groups, seed=self.seed + self.n_trainings)
            return xgb.train(self.params, dtrain, num_boost_round=self.num_boost_round, obj=obj)
        w = np.maximum(y, self.min_weight)
        return xgb.train(
            self.params, dtrain, num_boost_round=self.num_boost_round,
            obj=pack_sum_objective(pid, y, w), evals=[(dtrain, "train")],
            custom_metric=_pack_sum_rmse(pid, y),
            early_stopping_rounds=self.early_stopping_rounds, verbose_eval=False)

    def _prior_only_key(self):
        """The key under which a first training on a prior's samples alone is shared within
        the process, or ``None`` when this training sees samples of its own."""
        if self.n_trainings or not self.n_prior or self.n_prior != len(self.keys):
            return None
        h = hashlib.sha256()
        h.update("\n".join(self.keys).encode())
        h.update(np.asarray(self.costs, dtype=np.float64).tobytes())
        for f in self.feats:
            h.update(np.ascontiguousarray(f).tobytes())
        h.update(json.dumps([self.objective, self.label, self.min_weight, self.num_boost_round,
                             self.early_stopping_rounds, self.seed, FEATURE_LEN,
                             sorted(self.params.items())], default=str).encode())
        return h.hexdigest()

    # ------------------------------------------------------------------ prediction
    def predict(self, candidates: list) -> np.ndarray:
        """Predicted normalized throughput per candidate (higher is better); uniform random scores
        while warming up, ``-inf`` for a candidate whose features could not be extracted."""
        if self._should_train():  # samples added without training (add_records)
            self.train()
        if self.booster is None:
            return self.rng.random(len(candidates))
        return self.predict_features(self.features.extract(candidates))

    def predict_features(self, feats: list) -> np.ndarray:
        """Scores of programs given their feature arrays (the trained booster is required)."""
        if not feats:
            return np.zeros(0)
        X, pid = _stack(feats)
        rows = self.booster.inplace_predict(X, predict_type="margin",
                                            iteration_range=self._range())
        out = pack_sum_predict(np.asarray(rows, dtype=np.float64), pid, len(feats))
        bad = np.array([not f.any() for f in feats])
        out[bad] = -np.inf
        return out

    def _range(self):
        best = getattr(self.booster, "best_iteration", None)
        return (0, best + 1) if best is not None else (0, 0)

    # ------------------------------------------------------------------ persistence
    def save(self, path) -> None:
        """Write the booster, the training data and the settings to ``path`` (an ``.npz`` file)."""
        meta = {"format": _FORMAT, "feature_len": FEATURE_LEN, "seed": self.seed,
                "warmup_samples": self.warmup_samples, "min_weight": self.min_weight,
                "label": self.label, "objective": self.objective,
                "retrain_growth": self.retrain_growth, "retrain_min_new": self.retrain_min_new,
                "num_boost_round": self.rounds_given,
                "early_stopping_rounds": self.early_stopping_rounds, "params": self.params,
                "n_trained": self.n_trained, "keys": self.keys, "groups": self.groups,
                "best_iteration": getattr(self.booster, "best_iteration", None)}
        X, pid = _stack(self.feats)
        raw = bytes(self.booster.save_raw("ubj")) if self.booster is not None else b""
        with open(path, "wb") as f:
            np.savez(f, meta=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8),
                     booster=np.frombuffer(raw, dtype=np.uint8), X=X, pid=pid,
                     costs=np.asarray(self.costs, dtype=np.float64))

    def load(self, path) -> "XGBModel":
        """Replace this model's booster, data and settings with those saved at ``path`` by
        :meth:`save` (the task stays); returns self."""
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(z["meta"].tobytes().decode())
            if meta.get("format") != _FORMAT or meta.get("feature_len") != FEATURE_LEN:
                raise ValueError(f"{os.fspath(path)}: a cost model saved with another feature "
                                 f"layout (format {meta.get('format')}, {meta.get('feature_len')} "
                                 f"features; this version: {_FORMAT}, {FEATURE_LEN})")
            X, pid, costs, raw = z["X"], z["pid"], z["costs"], z["booster"].tobytes()
        self.__init__(self.task, seed=meta["seed"], warmup_samples=meta["warmup_samples"],
                      retrain_growth=meta["retrain_growth"],
                      retrain_min_new=meta["retrain_min_new"], label=meta["label"],
                      min_weight=meta["min_weight"], objective=meta.get("objective", "regression"),
                      num_boost_round=meta["num_boost_round"],
                      early_stopping_rounds=meta["early_stopping_rounds"], params=meta["params"])
        bounds = np.searchsorted(pid, np.arange(len(costs) + 1))
        for i, (k, g) in enumerate(zip(meta["keys"], meta["groups"])):
            self.add_sample(k, X[bounds[i]:bounds[i + 1]], float(costs[i]), g)
            self.n_prior += g.startswith(PRIOR_GROUP)
        self._prior_rounds()
        self.n_trained = meta["n_trained"]
        if raw:
            self.booster = xgb.Booster(params=self.params)
            self.booster.load_model(bytearray(raw))
            if meta.get("best_iteration") is not None:
                self.booster.best_iteration = meta["best_iteration"]
        return self

    @classmethod
    def from_file(cls, path, task=None) -> "XGBModel":
        """A new model loaded from ``path`` (see :meth:`load`)."""
        return cls(task).load(path)


def _stack(feats: list):
    """Rows of all programs and the program index of each row."""
    if not feats:
        return np.zeros((0, FEATURE_LEN), dtype=np.float32), np.zeros(0, dtype=np.int64)
    X = np.concatenate(feats, axis=0).astype(np.float32, copy=False)
    pid = np.repeat(np.arange(len(feats)), [f.shape[0] for f in feats])
    return X, pid
