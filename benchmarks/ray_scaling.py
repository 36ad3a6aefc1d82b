"""Tuning throughput on a Ray cluster: trials per minute with the local measurer and with 1, 2, 3
simulated nodes (``ray.cluster_utils.Cluster``: raylets on this machine, ``--cpus-per-node``
logical CPUs each), and the split of a trial's time between search, build and run.

    .venv/bin/python benchmarks/ray_scaling.py [--trials 64] [--nodes 1 2 3]
        [--shape 256 256 256] [--short]

Every configuration tunes the same matmul from an empty log with the same seed, the measurer
started (and warmed up: workers started, reference computed) beforehand, so the figures are
the tuning loop's alone. Per trial: ``search`` = the driver's ask/tell time, ``build`` = the mean
compile time a worker reported (CPU seconds of one build), ``run`` = what is left of the local
measurer's measurement time once its builds (``n_workers`` at a time) are taken out: the timed
runs, the correctness check and the pipe traffic.

The estimate for N real machines (printed at the end): a round is ask, measure, tell in turn, so
a trial costs ``search + (build / W + run) / N`` seconds with W build workers per machine and the
measurement spread evenly over N machines. The search becomes the bottleneck (half the time)
at ``N* = (build / W + run) / search``. On simulated nodes of one machine the nodes share its
cores, so their figures show the overheads of Ray, not the speedup of real machines.
"""
import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import tecomp as tc  # noqa: E402
from tecomp.schedule.records import load_records  # noqa: E402
from tecomp.search.measure import LocalMeasurer, MeasureInput  # noqa: E402
from tecomp.search.task import SearchTask, TuningOptions  # noqa: E402


def matmul(m, n, k):
    A = tc.placeholder((m, k), name="A")
    B = tc.placeholder((k, n), name="B")
    r = tc.reduce_axis(k, name="k")
    C = tc.compute((m, n), lambda i, j: tc.sum(A[i, r] * B[r, j], axis=r), name="C")
    return SearchTask(tc.ComputeDAG([A, B, C]))


def run(name, task, measurer, opt, trials, workdir):
    measurer.measure([MeasureInput(task, ())])  # warm: workers up, reference computed
    log = os.path.join(workdir, f"{name}.jsonl")
    res = tc.tune(task, trials=trials, log=log, options=opt, measurer=measurer)
    recs = load_records(log)
    build = sum(r.result.build_seconds for r in recs) / max(len(recs), 1)
    row = dict(name=name, trials=res.trials, wall=res.wall_seconds, search=res.search_seconds,
               measure=res.measure_seconds, build=build, best=res.best_gflops,
               errors=sum(res.errors.values()))
    row["per_min"] = 60 * res.trials / res.wall_seconds
    print(f"{name:>8}  {res.trials:6d}  {res.wall_seconds:7.1f}  {row['per_min']:8.1f}  "
          f"{res.search_seconds / res.trials:8.3f}  {res.measure_seconds / res.trials:9.3f}  "
          f"{build:7.3f}  {res.best_gflops:8.1f}  {row['errors']:6d}", flush=True)
    return row


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=64)
    ap.add_argument("--nodes", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--cpus-per-node", type=int, default=1)
    ap.add_argument("--shape", type=int, nargs=3, default=[256, 256, 256], metavar=("M", "N", "K"))
    ap.add_argument("--short", action="store_true", help="16 trials each: shows that it works")
    args = ap.parse_args(argv)
    trials = 16 if args.short else args.trials
    import ray
    from ray.cluster_utils import Cluster
    task = matmul(*args.shape)
    opt = TuningOptions(verbose=False, seed=0)
    workdir = tempfile.mkdtemp(prefix="tecomp-ray-scaling-")
    print(f"matmul {'x'.join(map(str, args.shape))}, {trials} trials per configuration, "
          f"{os.cpu_count()} cores on this machine; logs in {workdir}")
    print(f"{'config':>8}  {'trials':>6}  {'wall s':>7}  {'trials/m':>8}  {'search/t':>8}  "
          f"{'measure/t':>9}  {'build/t':>7}  {'GFLOP/s':>8}  {'errors':>6}")
    rows = []
    with LocalMeasurer(opt) as m:
        local = run("local", task, m, opt, trials, workdir)
        rows.append(local)
    node = dict(num_cpus=args.cpus_per_node, object_store_memory=80 << 20,
                include_dashboard=False)
    for n in args.nodes:
        c = Cluster(initialize_head=True, head_node_args=node)
        try:
            for _ in range(n - 1):
                c.add_node(**node, wait=False)
            c.wait_for_nodes()
            ray.init(address=c.address, include_dashboard=False, log_to_driver=False)
            with tc.RayMeasurer(options=opt) as m:
                rows.append(run(f"ray {n}", task, m, opt, trials, workdir))
        finally:
            ray.shutdown()
            c.shutdown()
    # the estimate, from the local run's split (per trial)
    w = opt.n_workers
    s = local["search"] / local["trials"]
    b = local["build"]
    r = max(local["measure"] / local["trials"] - b / w, 0.0)
    print(f"\nsplit of a local trial: search {s:.3f} s, build {b:.3f} s (x1/{w} with {w} "
          f"workers), run and check {r:.3f} s")
    for W in (1, 2, 8, 16, 32):
        nstar = (b / W + r) / s if s > 0 else float("inf")
        per = [60 / (s + (b / W + r) / N) for N in (1, 2, 4, 8, 16)]
        print(f"  machines with {W:2d} build workers: search-bound beyond N* = {nstar:5.1f}; "
              f"trials/min at N = 1, 2, 4, 8, 16: " + ", ".join(f"{p:.0f}" for p in per))
    print(f"  ceiling (infinitely many machines): {60 / s:.0f} trials/min, the search alone")
    return rows


if __name__ == "__main__":
    main()
