"""Enums instead of strings in the search: scheduler strategy and objective (validated, printed as
their values), buffer scopes (a cache step given a Scope keeps the record's string), GPU hole
roles."""
import pytest

import tecomp as tc
from tecomp.ir.loop import Scope
from tecomp.schedule.compute_steps import CacheReadStep, CacheWriteStep
from tecomp.schedule.steps import step_from_record
from tecomp.search.gpu_sketch import GPUTileHole, HoleRole
from tecomp.search.scheduler import SchedulerObjective, SchedulerStrategy
from tecomp.search.target_search import generate_sketches
from tecomp.search.task import SearchTask
from tecomp.testing import workloads as W

pytestmark = pytest.mark.nodevice


def test_scheduler_choices_are_enums_printed_as_values():
    assert SchedulerStrategy("round-robin") is SchedulerStrategy.ROUND_ROBIN
    assert f"{SchedulerStrategy.GRADIENT}" == "gradient" == str(SchedulerStrategy.GRADIENT)
    assert f"{SchedulerObjective.GEOMEAN:>8}" == " geomean"
    assert SchedulerObjective.LATENCY == "latency"  # callers passing the value still compare
    with pytest.raises(ValueError, match="unknown strategy 'fastest'.*'gradient' or 'round-robin'"):
        tc.tune_tasks([tc.SearchTask(W.matmul(8, 8, 8).dag)], trials=1, strategy="fastest")


def test_cache_steps_take_a_scope_and_record_its_name():
    a, b = CacheWriteStep(2, Scope.LOCAL), CacheWriteStep(2, "local")
    assert a == b and a.scope == "local" and a.record() == ["CHW", 2, "local"]
    r = CacheReadStep(0, Scope.SHARED, (2,))
    assert step_from_record(r.record()) == r and r.record()[2] == "shared"
    wl = W.matmul(16, 16, 16)
    s = tc.Schedule(wl.dag)
    (C,) = wl.dag.outputs
    s.cache_write(C, Scope.LOCAL)
    t = tc.Schedule(wl.dag)
    t.cache_write(C, "local")
    assert s.key == t.key
    local = next(st for st in s.state.stages if st.name.endswith(".local"))
    assert local.scope is Scope.LOCAL
    assert all(st.scope is Scope.GLOBAL for st in s.state.stages if st is not local)


def test_gpu_tile_holes_carry_role_enums():
    task = SearchTask(W.matmul(64, 64, 64).dag, target="cuda")
    roles = {r for sk in generate_sketches(task) for h in sk.holes.values()
             if isinstance(h, GPUTileHole) for r in h.roles}
    assert roles == {HoleRole.VTHREAD, HoleRole.THREAD, HoleRole.SERIAL}
