"""RayMeasurer on a ray.cluster_utils.Cluster: several raylets on this machine, one CPU each.

The clusters start in fixtures and are shut down in their teardown, which also checks that none of
their processes (raylets, node actors) is left.
"""
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

ray = pytest.importorskip("ray")
from ray.cluster_utils import Cluster  # noqa: E402

import tecomp as tc  # noqa: E402
from tecomp.schedule.records import ErrorKind, Record, append_records, load_records  # noqa: E402
from tecomp.search.measure import MeasureInput  # noqa: E402
from tecomp.search.ray_measure import NODE_LABEL, RayMeasurer  # noqa: E402
from tecomp.search.task import SearchTask, TuningOptions  # noqa: E402
from tecomp.search.tune import TaskTuner  # noqa: E402

# one cluster per test process: `pytest -n 2 --dist loadgroup` keeps these tests on one worker
pytestmark = pytest.mark.xdist_group("ray")

NODE = dict(num_cpus=1, object_store_memory=80 << 20, include_dashboard=False)
# build_timeout: these tests check where candidates go, not how fast they build; on a loaded
# machine (the other pytest worker and a one-CPU node's builds on two cores) a 48^3 candidate
# once built past the default 30 s and failed the tuning test with a BUILD_TIMEOUT
FAST = dict(repeat=2, min_repeat_ms=5, population=32, generations=1, measures_per_round=6,
            run_timeout=3.0, slow_cutoff=1e9, verbose=False, build_timeout=120.0)
SPANS = "TECOMP_TEST_RAY_SPANS"  # test only: where the hook below appends its timing spans


# ------------------------------------------------------------------------ hooks (in the workers)
def hook(call, outputs, steps):
    """``prepare`` hook, run in a node's measurement worker: every call of the kernel appends
    ``pid-of-the-node-actor start end`` to the spans file; the split factor picks a fault."""
    # the tests' hand schedules split once (split_steps); tuned ones have many splits
    factors = [r[3][0] for r in steps if r[0] == "SP"]
    factors = factors if len(factors) == 1 else []
    if 7 in factors:  # segfault
        return lambda: ctypes.string_at(0)
    if 5 in factors:  # hang
        return lambda: time.sleep(1e9)
    if 9 in factors:  # the node actor dies (once: the retry on another node runs normally)
        try:
            os.close(os.open(os.environ[SPANS] + ".killed", os.O_CREAT | os.O_EXCL))
            return lambda: os.kill(os.getppid(), signal.SIGKILL)
        except FileExistsError:
            pass
    # a long run (factors 11-15): the node is still busy when the test removes it
    slow = any(11 <= f <= 15 for f in factors)
    fd = os.open(os.environ[SPANS], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    parent = os.getppid()

    def timed():
        t0 = time.time()
        if slow:
            time.sleep(0.2)
        call()
        if 3 in factors:  # a wrong answer
            outputs[0].flat[-1] += 1.0
        os.write(fd, f"{parent} {t0!r} {time.time()!r}\n".encode())
    return timed


# ------------------------------------------------------------------------ fixtures
def _pids(cluster):
    nodes = [cluster.head_node, *cluster.worker_nodes]
    return [p.process.pid for n in nodes for ps in n.all_processes.values() for p in ps]


def _gone(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def _start(**extra):
    """A cluster of this machine: the head and one more node, plus ``extra`` nodes' labels."""
    c = Cluster(initialize_head=True, head_node_args=NODE)
    for labels in [{}, *extra.get("labels", [])]:
        c.add_node(**NODE, labels=labels, wait=False)
    c.wait_for_nodes()
    c.pids = _pids(c)
    return c


def _stop(c, pids=()):
    c.shutdown()
    deadline = time.time() + 20
    left = [p for p in c.pids + list(pids) if not _gone(p)]
    while left and time.time() < deadline:
        time.sleep(0.2)
        left = [p for p in left if not _gone(p)]
    assert not left, f"processes of the Ray cluster left running: {left}"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Head and one more node of this CPU, and a node labelled as another CPU (skylake)."""
    spans = str(tmp_path_factory.mktemp("ray") / "spans")
    os.environ[SPANS] = spans
    c = _start(labels=[{NODE_LABEL: "skylake"}])
    # the node actors unpickle the hook (this module) and its workers write the spans file
    env = {SPANS: spans, "PYTHONPATH": os.pathsep.join([os.path.dirname(__file__)] + sys.path)}
    ray.init(address=c.address, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": env})
    c.actor_pids = []  # node actor processes seen by the tests
    yield c
    ray.shutdown()
    os.environ.pop(SPANS, None)
    _stop(c, c.actor_pids)


@pytest.fixture(scope="module")
def measurer(cluster):
    """One measurer for the module: its actors hold every node's CPUs while it lives."""
    m = RayMeasurer(options=TuningOptions(**FAST), prepare=hook, startup_timeout=60, verbose=True)
    yield m
    cluster.actor_pids += [n.pid for n in m.nodes if n.pid]
    m.close()


@pytest.fixture
def fresh(measurer, cluster):
    """The module's measurer with every node of the cluster alive in use again."""
    measurer.refresh(revive=True)
    cluster.actor_pids += [n.pid for n in measurer.nodes if n.pid]
    return measurer


def _spans():
    with open(os.environ[SPANS]) as f:
        rows = [line.split() for line in f if line.strip()]
    by_node = {}
    for pid, t0, t1 in rows:
        by_node.setdefault(int(pid), []).append((float(t0), float(t1)))
    return by_node


def matmul_task(n=48):
    A = tc.placeholder((n, n), name="A")
    B = tc.placeholder((n, n), name="B")
    k = tc.reduce_axis(n, name="k")
    C = tc.compute((n, n), lambda i, j: tc.sum(A[i, k] * B[k, j], axis=k), name="C")
    return SearchTask(tc.ComputeDAG([A, B, C]))


def split_steps(task, factor):
    s = tc.Schedule(task.dag)
    C = task.dag.outputs[0]
    i, _ = s[C].axes
    io_, _ = s[C].split(i, factor=factor)
    s[C].parallel(io_)
    return tuple(s.records())


# ------------------------------------------------------------------------ tests
def test_tuning_across_nodes(fresh, tmp_path):
    """A small tuning on the two nodes of this CPU: a whole log that tc.build uses, no two
    timings at once on a node, nothing on the node labelled as another CPU."""
    m, task = fresh, matmul_task()
    log = str(tmp_path / "ray.jsonl")
    open(os.environ[SPANS], "w").close()  # the spans of this test only
    mine = m.nodes_for(task.target)
    other = [n for n in m.nodes if n not in mine]
    assert len(mine) == 2 and len(other) == 1 and other[0].labelled
    report = m.describe(task.target)
    assert "2 of 3 node(s) measure for" in report
    assert "not taken: its CPU is skylake (labelled), the target's znver3" \
        .replace("znver3", task.target.cpu) in report
    before = {n.node_id: n.measured for n in m.nodes}
    res = tc.tune(task, trials=12, log=log, options=TuningOptions(**FAST), measurer=m)
    done = {n.node_id: n.measured - before[n.node_id] for n in m.nodes}
    assert done[other[0].node_id] == 0, "a node of another CPU was given candidates"
    assert all(done[n.node_id] > 0 for n in mine) and sum(done.values()) == 12
    assert res.trials == 12 and not res.errors
    recs = load_records(log)
    assert len(recs) == 12 and all(r.result.is_valid for r in recs)
    kernel = tc.build(task.dag, log=log)
    rng = np.random.default_rng(0)
    a, b = (rng.uniform(-1, 1, (48, 48)).astype(np.float32) for _ in range(2))
    np.testing.assert_allclose(kernel(a, b), a @ b, rtol=1e-4, atol=1e-4)
    spans = _spans()
    assert set(spans) == {n.pid for n in mine}  # both nodes timed, from their actors' workers
    for node, ss in spans.items():
        ss.sort()
        for (_, end), (start, _) in zip(ss, ss[1:]):
            assert start >= end, f"two timings overlapped on the node of actor {node}"


def test_the_node_labelled_as_another_cpu_measures_its_tasks(fresh):
    """A task of the labelled CPU goes to that node alone, which builds it for itself (the
    label's promise) although the driver and this host are another CPU."""
    m, host_task = fresh, matmul_task()
    task = SearchTask(host_task.dag, target="llvm -mcpu=skylake")
    taken = m.nodes_for(task.target)
    assert len(taken) == 1 and taken[0].labelled
    before = taken[0].measured
    res = m.measure([MeasureInput(task, split_steps(task, f)) for f in (8, 4)])
    assert all(r.is_valid for r in res), [r.error_msg for r in res]
    assert taken[0].measured - before == 2


def test_faulty_candidates_keep_their_node(fresh):
    """A segfault, a hang and a wrong answer are those errors; the node actors survive them."""
    m, task = fresh, matmul_task()
    factors = [8, 7, 5, 3, 4, 16]
    before = {n.node_id: n.pid for n in m.nodes}
    res = m.measure([MeasureInput(task, split_steps(task, f)) for f in factors])
    kinds = [r.error for r in res]
    assert kinds == [ErrorKind.NONE, ErrorKind.CRASH, ErrorKind.RUN_TIMEOUT,
                     ErrorKind.WRONG_ANSWER, ErrorKind.NONE, ErrorKind.NONE], \
        [r.error_msg for r in res]
    assert all(n.usable for n in m.nodes)
    again = m.measure([MeasureInput(task, split_steps(task, 8))])
    assert again[0].is_valid
    assert {n.node_id: n.pid for n in m.nodes} == before


def test_a_lost_actor_is_node_lost_and_measured_again_on_resume(fresh, tmp_path, capsys):
    """max_attempts=1: the candidate whose node actor died mid-run is NODE_LOST; the round and
    the log are whole, the tuning goes on with the node left, and a resumed tuning does not count
    the lost candidate as measured."""
    m, task = fresh, matmul_task()
    log = str(tmp_path / "lost.jsonl")
    m.max_attempts = 1
    try:
        res = m.measure([MeasureInput(task, split_steps(task, f)) for f in (8, 9, 4, 16, 2)])
    finally:
        m.max_attempts = 2
    lost = [n for n in m.nodes if n.lost]
    assert len(lost) == 1 and "ActorDiedError" in lost[0].lost
    out = capsys.readouterr().out
    assert "1 are recorded as node_lost; going on with 1 node(s) for" in out
    kinds = [r.error for r in res]
    assert kinds[1] is ErrorKind.NODE_LOST and not res[1].measured
    assert kinds.count(ErrorKind.NODE_LOST) == 1 and kinds.count(ErrorKind.NONE) == 4
    # the next rounds run on the node left, through tc.tune and its log
    tuned = tc.tune(task, trials=6, log=log, options=TuningOptions(**FAST), measurer=m)
    assert tuned.trials == 6
    # a NODE_LOST record in the log is not a measurement: a resumed tuning measures it again
    lost_steps = [list(s) for s in split_steps(task, 9)]
    append_records(log, [Record(task.workload_key, str(task.target), lost_steps, {}, res[1])])
    recs = load_records(log)
    assert len(recs) == 7 and recs[-1].result.error is ErrorKind.NODE_LOST
    key = recs[-1].key
    assert key not in tc.schedule.records.measured_keys(log, task.workload_key, task.target)
    tuner = TaskTuner(task, TuningOptions(**FAST), log=log)
    assert key not in tuner.search.measured and tuner.resumed == 6


def test_node_removed_mid_round(fresh, cluster, tmp_path, capsys):
    """A node removed (its raylet killed) while it measures a candidate of a tuning round: the
    round completes on the other nodes, the log holds every candidate, all measured."""
    m, task = fresh, matmul_task()
    extra = cluster.add_node(**NODE)
    cluster.wait_for_nodes()
    cluster.pids += _pids(cluster)
    [victim] = m.refresh()
    assert victim.node_id == extra.node_id and "joined" in capsys.readouterr().out
    log = str(tmp_path / "removed.jsonl")
    opt = TuningOptions(**{**FAST, "measures_per_round": 8})
    got = {}
    th = threading.Thread(target=lambda: got.setdefault(
        "res", tc.tune(task, trials=8, log=log, options=opt, measurer=m)))
    th.start()
    deadline = time.time() + 120
    while not victim.busy and th.is_alive() and time.time() < deadline:
        time.sleep(0.01)
    assert victim.busy, "the round ended before the new node got a candidate"
    cluster.remove_node(extra, allow_graceful=False)
    th.join(180)
    assert not th.is_alive()
    res = got["res"]
    assert victim.lost and not victim.usable and victim.measured == 0
    out = capsys.readouterr().out
    assert "lost node" in out and "1 go to other nodes, 0 are recorded as node_lost" in out
    recs = load_records(log)
    assert res.trials == 8 and len(recs) == 8 and not res.errors  # measured elsewhere
    assert all(r.result.is_valid for r in recs)


def test_index_data_travels_once_per_node(fresh, monkeypatch):
    """A sparse task's index data (indptr/indices) is put in the object store once and reaches
    each node's actor once, however many chunks and rounds follow; the nodes measure with it."""
    from tecomp.search.ray_nodes import task_key
    from tecomp.workloads import builders as W
    m = fresh
    wl = W.csr_spmm(64, 64, 16, density=0.1)
    task = SearchTask(wl.dag, inputs=wl.index_data)
    key = task_key(task)
    puts = []
    real_put = ray.put
    monkeypatch.setattr(ray, "put", lambda obj, **kw: puts.append(obj) or real_put(obj, **kw))
    steps = tuple(tc.Schedule(task.dag).records())
    mine = m.nodes_for(task.target)
    before = {n.node_id: n.measured for n in mine}
    for _ in range(3):  # rounds, each handed out in one-candidate chunks (one CPU per node)
        res = m.measure([MeasureInput(task, steps) for _ in range(4)])
        assert all(r.is_valid for r in res), [r.error_msg for r in res]
    assert len(puts) == 1 and puts[0] is task
    receipts = m.task_receipts()
    for n in mine:
        assert n.measured - before[n.node_id] >= 2  # several chunks on each node
        assert receipts[n.node_id][key] == 1, receipts[n.node_id]
        assert set(receipts[n.node_id].values()) == {1}  # every task of earlier tests once too


def test_actor_warnings_reach_the_driver(cluster):
    """A warning raised in a node actor (here: the task's default schedule cannot finish its
    reference run within reference_timeout, so its candidates go unchecked) is raised again on
    the driver, naming the node. A node of its own, so that the module's measurer keeps its."""
    extra = cluster.add_node(**NODE)
    cluster.wait_for_nodes()
    cluster.pids += _pids(cluster)
    m = None
    try:
        # the other nodes' CPUs are held by the module's measurer (when it exists): their
        # actors do not start within startup_timeout and those nodes are not taken; the wait
        # for them is the cost of this test (the new node's actor starts in 1-4 s)
        m = RayMeasurer(options=TuningOptions(**FAST), startup_timeout=12, reference_timeout=1e-3,
                        verbose=False)
        task = matmul_task(32)
        mine = m.nodes_for(task.target)
        assert extra.node_id in {n.node_id for n in mine}
        with pytest.warns(RuntimeWarning) as caught:
            res = [m.measure([MeasureInput(task, split_steps(task, 8))]) for _ in range(2)]
        texts = [str(w.message) for w in caught if "default schedule" in str(w.message)]
        assert texts, [str(w.message) for w in caught]
        assert all(t.startswith("node ") and "without a correctness check" in t for t in texts)
        assert all(any(f"({n.node_id[:8]}, " in t for n in mine) for t in texts), texts
        assert all(r[0].error in (ErrorKind.NONE, ErrorKind.RUN_TIMEOUT) for r in res)
        cluster.actor_pids += [n.pid for n in m.nodes if n.pid]
    finally:
        if m is not None:
            m.close()
        cluster.remove_node(extra, allow_graceful=False)


@pytest.mark.slow
def test_cli_killed_driver_resumes_on_a_cluster(tmp_path):
    """``tecomp tune ... --ray ADDRESS`` from another process, on a cluster of its own: killed
    (SIGKILL) mid-tuning, its node actors go with it (the CPUs they held are free again for the
    next run), and the rerun resumes from the log with nothing measured twice."""
    c = _start()
    try:
        log = str(tmp_path / "cli.jsonl")
        cmd = [sys.executable, "-m", "tecomp.cli", "tune", "matmul", "--shape", "48", "48", "48",
               "--measures-per-round", "4", "--population", "32", "--generations", "1",
               "--log", log, "--progress", "lines", "--no-bench", "--ray", c.address]
        first = subprocess.Popen(cmd + ["--trials", "400"], stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True)
        deadline = time.time() + 240
        while time.time() < deadline and first.poll() is None:
            if os.path.exists(log) and len(load_records(log)) >= 8:
                break
            time.sleep(0.5)
        first.kill()
        out = first.communicate()[0]
        assert "2 of 2 node(s) measure for" in out, out
        held = len(load_records(log))
        assert 8 <= held < 400
        p = subprocess.run(cmd + ["--trials", "8"], capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stdout + p.stderr
        assert f"the log holds {held} records of this task" in p.stdout
        assert "2 of 2 node(s) measure for" in p.stdout  # the killed run's actors are gone
        recs = load_records(log)
        assert len(recs) == held + 8 and len({r.key for r in recs}) == len(recs)
    finally:
        _stop(c)


class _LosesSecond:
    """A measurer whose second candidate of every batch lost its node (the rest measured by a
    LocalMeasurer): what a RayMeasurer returns when a node dies and no other can take it."""

    def __init__(self, opt):
        from tecomp.search.measure import LocalMeasurer
        self.local = LocalMeasurer(opt)

    def measure(self, inputs):
        out = self.local.measure(inputs)
        out[1] = tc.schedule.records.MeasureResult(error=ErrorKind.NODE_LOST, error_msg="gone")
        return out

    def close(self):
        self.local.close()


def test_node_lost_is_no_trial_and_teaches_the_model_nothing(tmp_path):
    """TaskTuner: a NODE_LOST result is logged, counted as an error, but not as a trial; the
    search may ask for it again and the cost model gets no sample of it."""
    task, log = matmul_task(16), str(tmp_path / "t.jsonl")
    opt = TuningOptions(**{**FAST, "measures_per_round": 4})
    tuner = TaskTuner(task, opt, log=log)
    m = _LosesSecond(opt)
    try:
        done = tuner.round(m, 4)
    finally:
        m.close()
    recs = load_records(log)
    assert done == 3 and tuner.result.trials == 3 and tuner.result.errors == {"NODE_LOST": 1}
    assert len(recs) == 4 and recs[1].result.error is ErrorKind.NODE_LOST
    assert recs[1].key not in tuner.search.measured
    assert {r.key for r in recs[::2]} <= tuner.search.measured
    if hasattr(tuner.model, "keys"):  # the learned model: samples of the measured ones only
        # (besides the programs of the shipped prior, which are other tasks')
        assert recs[1].key not in tuner.model.keys
        assert len(tuner.model.keys) == tuner.model.n_prior + 3


def test_tecomp_and_local_tuning_never_import_ray():
    """ray is optional: importing tecomp, the search and the local measurer leaves it out."""
    code = ("import sys, tecomp as tc\n"
            "tc.SearchTask, tc.tune, tc.tune_tasks\n"
            "import tecomp.search.measure, tecomp.cli.commands\n"
            "assert 'ray' not in sys.modules, 'ray was imported'\n"
            "tc.RayMeasurer\n"
            "assert 'ray' in sys.modules\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
