"""Building from a tuning log: the schedule of a log's best record that replays, for
``tc.build(dag, log=...)`` and deployment (split from :mod:`tecomp.schedule.records`, which holds
the record format and the queries)."""
from __future__ import annotations

import math
import os
import warnings

from .records import load_records, ranked_family_records, ranked_records, warn_other_target
from .target_match import TargetMatch, match_target, missing_features

__all__ = ["load_records_cached", "context_records_cached", "schedule_from_log",
           "select_from_log", "ranked_context_records", "RERANK_CONTEXT", "search_cost"]

#: the context of records re-timed alone by :func:`tecomp.search.rerank.rerank` (interleaved
#: rounds, the comparison protocol): a build ranks a workload's latest re-ranking first
RERANK_CONTEXT = "rerank"

_LOG_CACHE: dict = {}


def load_records_cached(path, contexts: bool = False) -> list:
    """``load_records`` memoized on (path, mtime, size): building many kernels from one large log
    parses it once, and an appended log is re-read. ``contexts`` as for ``load_records``."""
    return _cached(path)[1 if contexts else 2]


def context_records_cached(path, workload_key: str) -> list:
    """The records of ``workload_key`` in the log at ``path`` that carry a context (in-place
    timings, re-rankings), from the same cache as :func:`load_records_cached`."""
    return _cached(path)[3].get(workload_key, [])


def _cached(path) -> tuple:
    """``(key, every record, the plain ones, {workload key: its context records})`` of the log at
    ``path``, read again when its mtime or size changed."""
    path = os.path.abspath(os.fspath(path))
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise FileNotFoundError(f"tuning log {path!r} does not exist") from None
    key = (path, st.st_mtime_ns, st.st_size)
    hit = _LOG_CACHE.get(path)
    if hit is None or hit[0] != key:
        every = load_records(path, contexts=True)
        by_key: dict = {}
        for r in every:
            if r.context:  # a build asks for its workload's alone: no scan of the whole log
                by_key.setdefault(r.workload_key, []).append(r)
        hit = (key, every, [r for r in every if not r.context], by_key)
        _LOG_CACHE[path] = hit
    return hit


def schedule_from_log(dag, log, target, on_missing: str = "error", context: str = ""):
    """The schedule of the best record in ``log`` for ``dag`` on ``target``, replayed on ``dag``;
    ``None`` (after a warning) when there is none and ``on_missing="default"``.

    If the best record does not replay (e.g. a step this version rejects), the next best is tried,
    with a warning. A sparse DAG with no usable record of its own workload key takes the best
    record of its family (the same DAG with another nnz, see :mod:`.record_family`) whose schedule
    replays on it and does not depend on nnz (from the member nearest in FLOPs, when the log holds
    several). With ``on_missing="error"``, no usable record raises ``LookupError`` naming the
    workload key, the target and what the log holds. A missing log file raises
    ``FileNotFoundError`` either way (a wrong path should not silently give an untuned kernel).

    Where the log holds a re-ranking of the workload's best records (records with the context
    :data:`RERANK_CONTEXT`, :func:`tecomp.search.rerank.rerank`), its latest ranks first, by
    median: those timings were taken interleaved over rounds, where the search's are one quick
    measurement each. A record the search measured after that re-ranking goes before it if the
    search's own costs put it ahead of every re-ranked schedule.

    With a ``context`` (e.g. a compiled model's, :func:`tecomp.frontend.compiled.model_context`),
    the records measured in that context, if the log holds any for ``dag``, rank first, by their
    in-context cost.
    """
    return _select(dag, log, target, on_missing, context)[0]


def select_from_log(dag, log, target, on_missing: str = "error", context: str = "") -> tuple:
    """``(schedule, record)``: what :func:`schedule_from_log` picks, with the record it replayed
    (``(None, None)`` where it returns ``None``). ``record.workload_key`` differs from
    ``dag.workload_key`` when the record came from the DAG's family (another nnz)."""
    return _select(dag, log, target, on_missing, context)


def _select(dag, log, target, on_missing: str, context: str = "") -> tuple:
    from .schedule import Schedule
    if on_missing not in ("error", "default"):
        raise ValueError(f"on_missing must be 'error' or 'default', got {on_missing!r}")
    records = load_records_cached(log)
    wkey, target = dag.workload_key, str(target)
    ranked, exact = ranked_records(records, wkey, target)
    mine = context_records_cached(log, wkey)
    if exact and ranked:
        ranked = _reranked_first(mine, ranked, wkey, target)
    if context:
        in_ctx = ranked_context_records(mine, wkey, target, context)
        if in_ctx:  # then the plain ranking, should none of them replay
            ranked, exact = in_ctx + ranked, True
    if ranked and not exact:
        warn_other_target(ranked, target, stacklevel=5)
    failures = []
    for n, rec in enumerate(ranked):
        try:
            sched = Schedule.from_records(dag, rec.steps)
        except Exception as e:  # noqa: BLE001 - any replay failure means: try the next record
            failures.append(f"{type(e).__name__}: {e}")
            continue
        if failures:
            warnings.warn(f"tuning log {os.fspath(log)!r}: the {n} best record(s) for workload "
                          f"{wkey[:16]} on {target!r} do not replay with this version of tecomp "
                          f"({failures[0]}); using the next best (mean cost "
                          f"{rec.cost * 1e3:.4g} ms)", UserWarning, stacklevel=4)
        return sched, rec
    sched, rec, family_why = _from_family(dag, records, target, log)
    if sched is not None:
        return sched, rec
    if failures:
        why = (f"none of its {len(ranked)} valid record(s) for this workload replays with this "
               f"version of tecomp (first failure: {failures[0]})")
    else:
        why = _describe_log(records, wkey, target)
    msg = (f"tuning log {os.fspath(log)!r} has no usable record for workload key {wkey} on target "
           f"{target!r}: {why}{family_why}")
    if on_missing == "error":
        raise LookupError(msg + ". Tune it (tc.tune) or pass on_missing='default' to build with "
                                "the default schedule.")
    warnings.warn(msg + "; building with the default schedule", UserWarning, stacklevel=4)
    return None, None


def _from_family(dag, records, target: str, log) -> tuple:
    """``(schedule, record, "")`` from the best usable record of ``dag``'s family, or
    ``(None, None, why)``: ``why`` says (for the error message) why its records were refused."""
    from .record_family import family_key, nnz_dependence
    from .schedule import Schedule
    ranked, exact = ranked_family_records(records, family_key(dag), target,
                                          exclude_key=dag.workload_key)
    if len({r.workload_key for r in ranked}) > 1:
        # the records of the member most like this DAG (FLOPs: nnz x the dense sizes) first; the
        # costs of members with other nnz do not compare
        flops = dag.flop_count()
        ranked.sort(key=lambda r: (_log_distance(r.flop_count, flops), r.cost))
    refused = []
    for rec in ranked:
        try:
            why = nnz_dependence(dag, rec.steps)
            sched = None if why else Schedule.from_records(dag, rec.steps)
        except Exception as e:  # noqa: BLE001 - a record that does not replay here is refused
            why = f"it does not replay ({type(e).__name__}: {e})"
        if why:
            refused.append(why)
            continue
        if not exact:
            warn_other_target(ranked, target, stacklevel=6)
        if refused:
            warnings.warn(f"tuning log {os.fspath(log)!r}: the {len(refused)} best record(s) of "
                          f"the family of workload {dag.workload_key[:16]} (other nnz) cannot "
                          f"serve it ({refused[0]}); using the next best (mean cost "
                          f"{rec.cost * 1e3:.4g} ms)", UserWarning, stacklevel=5)
        return sched, rec, ""
    if not refused:
        return None, None, ""
    return None, None, (f"; its family (the same workload with another nnz) has {len(refused)} "
                        f"record(s), none usable here (the best: {refused[0]})")


def _reranked_first(every, ranked: list, wkey: str, target: str) -> list:
    """``ranked`` (the search's order) behind the workload's latest re-ranking, see
    :func:`schedule_from_log`."""
    timed = ranked_context_records(every, wkey, target, RERANK_CONTEXT)
    if not timed:
        return ranked
    when, keys = timed[0].result.timestamp, {r.key for r in timed}
    bar = min((r.cost for r in ranked if r.key in keys), default=math.inf)
    newer = [r for r in ranked if r.key not in keys and r.result.timestamp > when and r.cost < bar]
    first = {id(r) for r in newer}
    return newer + timed + [r for r in ranked if id(r) not in first]


def search_cost(records, record) -> float:
    """The search's own cost of ``record``'s schedule (its least plain measurement in
    ``records`` for the same workload and target; ``record.cost`` when it is plain): what
    compares with the costs of other workloads' records, where ``record`` may be a re-timing."""
    if not record.context:
        return record.cost
    return min((r.cost for r in records if not r.context and r.workload_key ==
                record.workload_key and r.target == record.target and r.key == record.key),
               default=record.cost)


def ranked_context_records(records, workload_key: str, target, context: str) -> list:
    """The valid records of ``workload_key`` measured in ``context`` for exactly ``target`` by the
    latest ranking (the records sharing the newest timestamp: timings of another day and load do
    not compare), best first by their median cost (in-place timings are noisy: one slow round
    does not decide), one per distinct schedule; ``[]`` when there are none."""
    t = str(target)
    valid = [r for r in records if r.context == context and r.workload_key == workload_key
             and r.result.is_valid and match_target(r.target, t) is TargetMatch.SAME]
    newest = max((r.result.timestamp for r in valid), default=0.0)
    valid = [r for r in valid if r.result.timestamp == newest]
    valid.sort(key=lambda r: _median(r.result.costs))
    seen, out = set(), []
    for r in valid:
        if r.key not in seen:
            seen.add(r.key)
            out.append(r)
    return out


def median_cost(record) -> float:
    """The median of a record's timings: how in-place records rank (one slow round of a noisy
    model run does not decide)."""
    return _median(record.result.costs)


def _median(xs) -> float:
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])


def _log_distance(a: float, b: float) -> float:
    return abs(math.log(a / b)) if a > 0 and b > 0 else math.inf


def _describe_log(records, wkey: str, target: str) -> str:
    if not records:
        return "the log has 0 records"
    by_key: dict = {}
    for r in records:
        by_key[r.workload_key] = by_key.get(r.workload_key, 0) + 1
    if wkey in by_key:
        mine = [r for r in records if r.workload_key == wkey]
        valid = [r for r in mine if r.result.is_valid]
        if not valid:
            return (f"the log has {len(records)} record(s), {len(mine)} for this workload, all "
                    f"failed measurements")
        lacking = sorted({f for r in valid for f in missing_features(r.target, target)})
        if lacking:  # ranked_records never uses these
            return (f"the log has {len(records)} record(s), {len(valid)} valid for this workload, "
                    f"tuned with CPU feature(s) this target lacks ({', '.join(lacking)}; tuned "
                    f"for {', '.join(sorted({r.target for r in valid}))}): their timings used "
                    f"instructions this CPU does not have, so they do not rank schedules here")
        return (f"the log has {len(records)} record(s), {len(valid)} valid for this workload but "
                f"for other targets ({', '.join(sorted({r.target for r in valid}))})")
    shown = sorted(by_key.items(), key=lambda kv: -kv[1])
    listing = ", ".join(f"{k} ({c})" for k, c in shown[:8])
    more = f" and {len(shown) - 8} more" if len(shown) > 8 else ""
    return (f"the log has {len(records)} record(s), for {len(by_key)} other workload key(s): "
            f"{listing}{more}")
