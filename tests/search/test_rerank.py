"""Re-ranking alone: a log's best records timed again, interleaved over rounds, logged with the
rerank context, and ranked first by builds from the log (not by the search)."""
from __future__ import annotations

import json
import time

import numpy as np
import pytest

import tecomp as tc
from tecomp.cli import main
from tecomp.schedule import Schedule
from tecomp.schedule.log_schedule import (
    RERANK_CONTEXT,
    context_records_cached,
    search_cost,
    select_from_log,
)
from tecomp.schedule.records import MeasureResult, Record, append_records, load_records
from tecomp.search.rerank import rerank, rerank_table
from tecomp.search.task import SearchTask
from tecomp.testing import workloads as W
from tecomp.testing.hand_schedules import matmul_schedule

N = 192  # the naive loop nest runs ~10x slower than the tiled one: the ranking cannot flip


def _record(task, sched, cost, t=None):
    return Record(task.workload_key, str(task.target), sched.records(), {},
                  MeasureResult(costs=(cost,), **({} if t is None else {"timestamp": t})),
                  flop_count=task.flop_count())


def _naive(dag):
    s = Schedule(dag)
    s[dag.outputs[0]].parallel(s[dag.outputs[0]].axes[0])
    return s


def _lucky_log(path):
    """A log whose search's best is the naive loop nest with a lucky (made-up) cost, ahead of
    the tiled schedule and a second tiling."""
    wl = W.matmul(N, N, N)
    task = SearchTask(wl.dag, "llvm")
    recs = [_record(task, _naive(wl.dag), 1e-6),
            _record(task, matmul_schedule(wl.dag, 4, 16), 2e-6),
            _record(task, matmul_schedule(wl.dag, 2, 8, pack=False), 3e-6)]
    append_records(path, recs)
    return wl, task, recs


def test_rerank_logs_apart_and_the_build_picks_the_fastest(tmp_path):
    log = tmp_path / "t.jsonl"
    wl, task, recs = _lucky_log(log)
    _, before = select_from_log(wl.dag, log, task.target)
    assert before.key == recs[0].key  # the lucky naive one, by the search's cost
    rows = rerank([task], log, candidates=3, rounds=2, names=["mm"])
    assert len(rows) == 1 and rows[0].name == "mm" and rows[0].candidates == 3
    assert rows[0].chosen_rank in (1, 2) and rows[0].chosen_s * 3 < rows[0].searched_s
    assert "mm" in rerank_table(rows)
    # the search sees only its own records; the re-timings are version-2 lines with the context
    assert len(load_records(log)) == 3
    timed = [r for r in load_records(log, contexts=True) if r.context]
    assert {r.context for r in timed} == {RERANK_CONTEXT}
    assert len(timed) == 2 and recs[0].key in {r.key for r in timed}  # the searched best ran
    assert {len(r.result.costs) for r in timed} == {4} and len({r.result.timestamp
                                                                for r in timed}) == 1
    lines = [json.loads(s) for s in log.read_text().splitlines()]
    assert [d["v"] for d in lines] == [1, 1, 1, 2, 2]
    sched, rec = select_from_log(wl.dag, log, task.target)
    assert rec.context == RERANK_CONTEXT and rec.key != recs[0].key
    assert search_cost(load_records(log, contexts=True), rec) in (2e-6, 3e-6)
    a, b = wl.make_inputs(np.random.default_rng(0))
    k = tc.build(wl.dag, log=str(log))
    np.testing.assert_allclose(k(a, b), a @ b, rtol=1e-4, atol=1e-4)


def test_a_later_rerank_defends_its_winner_and_the_latest_counts(tmp_path):
    log = tmp_path / "t.jsonl"
    wl, task, recs = _lucky_log(log)
    rerank([task], log, candidates=3, rounds=1)
    assert len(context_records_cached(log, task.workload_key)) == 2
    first = select_from_log(wl.dag, log, task.target)[1]
    # a second re-ranking of only the search's best candidate still times the last winner
    rows = rerank([task], log, candidates=1, rounds=1)
    assert rows[0].candidates == 2
    timed = [r for r in load_records(log, contexts=True) if r.context]
    assert len(context_records_cached(log, task.workload_key)) == len(timed) == 4  # re-read
    newest = max(r.result.timestamp for r in timed)
    assert first.key in {r.key for r in timed if r.result.timestamp == newest}
    assert select_from_log(wl.dag, log, task.target)[1].result.timestamp == newest


def test_a_record_searched_after_the_rerank_goes_first_only_when_the_search_rates_it_ahead(
        tmp_path):
    log = tmp_path / "t.jsonl"
    wl, task, recs = _lucky_log(log)
    rerank([task], log, candidates=3, rounds=1)
    later = time.time() + 10
    slower = _record(task, matmul_schedule(wl.dag, 2, 32), 5e-6, t=later)
    append_records(log, [slower])
    assert select_from_log(wl.dag, log, task.target)[1].context == RERANK_CONTEXT
    ahead = _record(task, matmul_schedule(wl.dag, 1, 16), 0.5e-6, t=later)
    append_records(log, [ahead])
    assert select_from_log(wl.dag, log, task.target)[1].key == ahead.key
    # one searched before the re-ranking never jumps it, however low its cost
    old = _record(task, matmul_schedule(wl.dag, 3, 8), 0.1e-6, t=1.0)
    log2 = tmp_path / "u.jsonl"
    _lucky_log(log2)
    rerank([task], log2, candidates=3, rounds=1)
    append_records(log2, [old])
    assert select_from_log(wl.dag, log2, task.target)[1].context == RERANK_CONTEXT


def test_rerank_skips_tasks_with_one_record_and_checks_its_arguments(tmp_path):
    log = tmp_path / "t.jsonl"
    wl = W.matmul(32, 32, 32)
    task = SearchTask(wl.dag, "llvm")
    append_records(log, [_record(task, matmul_schedule(wl.dag, 4, 8), 1e-6)])
    lines = []
    assert rerank([task], log, candidates=3, rounds=1, progress=lines.append) == []
    assert "fewer than two" in lines[0] and len(load_records(log, contexts=True)) == 1
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="candidates"):
            rerank([task], log, candidates=bad)
        with pytest.raises(ValueError, match="rounds"):
            rerank([task], log, rounds=bad)


def test_cli_reranks_a_log_without_tuning(tmp_path, capsys):
    log = tmp_path / "t.jsonl"
    _lucky_log(log)
    rc = main(["tune", "matmul", "--shape", str(N), str(N), str(N), "--trials", "0", "--log",
               str(log), "--rerank", "3", "--rerank-rounds", "1", "--no-bench",
               "--cost-model", "random", "--progress", "none"])
    out = capsys.readouterr().out
    assert rc == 0 and "re-ranking each task's 3 best records" in out and "chosen" in out
    assert sum(1 for r in load_records(log, contexts=True) if r.context) == 2
    assert main(["tune", "matmul", "--shape", "8", "8", "8", "--trials", "0", "--log",
                 str(log), "--rerank", "-1"]) == 2
    assert "--rerank must be >= 0" in capsys.readouterr().err


def test_rerank_is_public_and_times_on_this_cpu_only(tmp_path):
    assert tc.rerank is rerank and tc.RerankResult.__name__ == "RerankResult"
    task = SearchTask(W.matmul(8, 8, 8).dag, "cuda")
    with pytest.raises(ValueError, match="on this CPU"):
        rerank([task], tmp_path / "none.jsonl")
