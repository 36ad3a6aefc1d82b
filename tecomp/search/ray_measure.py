"""Measurement on a Ray cluster: :class:`RayMeasurer`, a :class:`~.measure.Measurer` for
``tc.tune(task, ..., measurer=tc.RayMeasurer(address="auto"))`` and ``tecomp tune ... --ray ADDRESS``.

How it measures (the search, the log and the cost model stay in the driver, unchanged):

- **One actor per node**, pinned to it (hard node affinity) and holding all of the node's logical
  CPUs: a timing needs a quiet machine, so Ray schedules nothing else there while we tune (a second
  tuning's actor waits, and that node is reported as not taken). The actor owns a
  :class:`~.measure.LocalMeasurer` with one worker process per CPU, so a node measures exactly as
  a local tuning does: builds in parallel in the workers (:func:`.measure_worker.build_candidate`),
  runs serialized (:func:`.measure_worker.run_candidate`: **never two timings at once on a node**),
  every candidate checked against the default schedule's outputs, and a candidate that segfaults,
  hangs or computes a wrong answer is recorded as that error while its worker is replaced; the
  actor itself never runs candidate code, so it survives them.
- **Data once per node**: each task (its DAG and index data, such as a sparse matrix's
  ``indptr``/``indices``) is put in Ray's object store once (``ray.put``) and reaches each node's
  actor once, which keeps it by task key; the chunks after that carry step lists alone.
- **Warnings** raised in a node's actor while it measures (for instance a task whose default
  schedule fails there, so its candidates go unchecked) come back with the results and are raised
  again on the driver, naming the node.
- **Builds happen on the node that times them**: MCJIT code lives in the process that compiled it,
  so a kernel built elsewhere would have to be compiled again before its run. Every CPU of every
  node still builds (each node's workers build its share of the round in parallel).
- **Targets**: each actor reports its node's LLVM host CPU and features; a node started with the
  label ``tecomp-cpu=NAME`` (``ray start --labels='{"tecomp-cpu": "NAME"}'``) is taken to be a
  ``NAME`` instead, and builds a ``NAME`` task's candidates for itself (the label's promise; this
  machine, like any other, refuses to build for a CPU it is not). A task's candidates go only
  to nodes whose CPU (and, unless labelled, the CPU features that change generated code, those
  ``str(target)`` names after ``-mattr``) are the task target's. The first round of each target
  prints which nodes were taken, which not and why.
- **Balance**: a round is handed out in chunks (at most one per node's worker count, about an
  equal share per node), the next chunk to whichever node finishes first.
- **Faults**: a node that dies, is removed, or does not answer within its chunk's time limit is
  dropped (said on stdout); its in-flight candidates go to the other nodes. A candidate that no
  node is left to measure (or that lost ``max_attempts`` nodes) is recorded as
  :attr:`~tecomp.schedule.records.ErrorKind.NODE_LOST`: not a property of the program, so the
  search does not count it measured, the cost model does not learn it and a resumed tuning
  measures it again. A round with no usable node left raises ``RuntimeError``.

Nodes that join the cluster while it tunes are taken in at the next round after
``rescan_seconds`` (30 s) since the last look (:meth:`RayMeasurer.refresh`).
"""
from __future__ import annotations

import dataclasses
import logging
import math
import time
import warnings
import weakref
from collections import deque

try:
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
except ImportError as e:  # ray is an optional extra
    raise ImportError("tecomp.RayMeasurer needs Ray: pip install 'tecomp[ray]' (or ray)") from e

from ..schedule.records import ErrorKind, MeasureResult
from ..target import Target
from .ray_nodes import (
    NODE_LABEL,
    NodeActor,
    RayNode,
    check_reachable,
    kill_actors,
    ray_error_text,
    task_key,
    warning_category,
)
from .task import TuningOptions

__all__ = ["RayMeasurer", "RayNode", "NODE_LABEL"]


def _shutdown(actors: dict, own: bool) -> None:
    kill_actors(list(actors.values()))
    actors.clear()
    if own and ray.is_initialized():
        ray.shutdown()


class RayMeasurer:
    """Measure candidates on the nodes of a Ray cluster (see the module docstring).

    Parameters
    ----------
    address : str
        The cluster: ``"auto"`` (``RAY_ADDRESS``, else a cluster started on this machine with
        ``ray start``), ``"HOST:PORT"`` or ``"ray://HOST:PORT"``. Ignored when this process is
        already connected (``ray.init`` was called): that connection is used and left open.
    options : TuningOptions, optional
        Timeouts, repeats and cache flushing as for :class:`~.measure.LocalMeasurer`;
        ``n_workers`` is replaced by each node's CPU count (or ``workers_per_node``);
        ``verbose`` prints the node report and node losses.
    check : bool
        Compare every candidate's outputs with the default schedule's (``WRONG_ANSWER``).
    workers_per_node : int, optional
        Build processes per node (default: the node's logical CPUs).
    max_attempts : int
        Nodes a candidate may lose before it is recorded as ``NODE_LOST``.
    startup_timeout : float
        Seconds a node's actor may take to start and report its CPU; a node that does not is
        not taken (for instance, its CPUs are held by other Ray work).
    reference_timeout : float
        Seconds the default schedule of a task may take to build and run once on a node (the
        reference outputs); when it fails there, that node measures the task's candidates
        unchecked, with a warning.
    verbose : bool, optional
        Print the node report and node losses (default: ``options.verbose``).
    prepare : callable or str, optional
        Test hook passed to each node's LocalMeasurer (see there).
    """

    def __init__(self, address: str = "auto", options: TuningOptions | None = None, *,
                 check: bool = True, workers_per_node: int | None = None, max_attempts: int = 2,
                 startup_timeout: float = 120.0, reference_timeout: float = 120.0,
                 verbose: bool | None = None, prepare=None):
        self.options = options or TuningOptions()
        self.verbose = self.options.verbose if verbose is None else bool(verbose)
        if workers_per_node is not None and workers_per_node < 1:
            raise ValueError(f"workers_per_node must be >= 1, got {workers_per_node}")
        if max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {max_attempts}")
        self.check, self.prepare = check, prepare
        self.workers_per_node, self.max_attempts = workers_per_node, int(max_attempts)
        self.startup_timeout = float(startup_timeout)
        self.reference_timeout = float(reference_timeout)
        self._own = not ray.is_initialized()
        if self._own:
            check_reachable(address)
            try:
                ray.init(address=address, log_to_driver=False, include_dashboard=False,
                         logging_level=logging.WARNING)
            except (ConnectionError, ValueError) as e:
                raise RuntimeError(f"RayMeasurer: cannot connect to a Ray cluster at {address!r} "
                                   f"({e}); start one with 'ray start --head'") from None
        self._actors: dict = {}  # node id -> actor handle
        self._sent: dict = {}    # node id -> keys of the tasks its actor holds
        self._task_refs: dict = {}  # task key -> object ref of the task (put once)
        self._finalizer = weakref.finalize(self, _shutdown, self._actors, self._own)
        self._closed = False
        self._reported: set = set()  # targets whose node report was printed
        self.rescan_seconds, self._scanned = 30.0, 0.0
        self.nodes: list = []
        self.refresh()
        if not any(n.usable for n in self.nodes):
            why = "; ".join(f"{n}: {n.problem}" for n in self.nodes) or "the cluster has no node"
            self.close()
            raise RuntimeError(f"RayMeasurer: no node of the cluster can measure: {why}")

    # ----------------------------------------------------------------------------- nodes
    def _verbose(self, text: str) -> None:
        if self.verbose:
            print(f"tecomp: ray: {text}", flush=True)

    def _start_actor(self, node: RayNode):
        workers = self.workers_per_node or node.cpus
        opts = dataclasses.replace(self.options, n_workers=workers)
        actor = ray.remote(NodeActor).options(
            num_cpus=node.cpus, max_restarts=0, max_concurrency=1,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node.node_id, soft=False),
        ).remote(opts, self.check, self.prepare, self.startup_timeout, self.reference_timeout)
        self._actors[node.node_id] = actor
        self._sent[node.node_id] = set()  # a new actor holds no task yet
        return actor

    def refresh(self, revive: bool = False) -> list:
        """Take in the nodes that joined the cluster since the last look and, with ``revive``,
        start a new actor on lost nodes that Ray still reports alive (their actor died, their
        raylet did not); returns the nodes this took. :meth:`measure` calls it (without
        ``revive``) when ``rescan_seconds`` have passed since the last look."""
        known = {n.node_id: n for n in self.nodes}
        revived = set()
        probes = {}
        for n in ray.nodes():
            node = known.get(n["NodeID"])
            if not n.get("Alive") or (node is not None and not (revive and node.lost)):
                continue
            if node is None:
                host = n.get("NodeManagerHostname") or n.get("NodeManagerAddress", "?")
                node = RayNode(n["NodeID"], host, int(n.get("Resources", {}).get("CPU", 0)))
                self.nodes.append(node)
                if node.cpus < 1:
                    node.problem = "it offers no CPU to Ray"
                    continue
            if node.lost:
                self._verbose(f"node {node} is alive again after it was lost ({node.lost})")
                node.lost = ""
                revived.add(node.node_id)
            label = (n.get("Labels") or {}).get(NODE_LABEL)
            probes[self._start_actor(node).probe.remote()] = (node, label)
        ready = ray.wait(list(probes), num_returns=len(probes),
                         timeout=self.startup_timeout)[0] if probes else []
        for ref, (node, label) in probes.items():
            if ref not in ready:
                node.problem = (f"its measurement actor did not start within "
                                f"{self.startup_timeout:g} s (are its CPUs held by other Ray "
                                f"work?)")
                kill_actors([self._actors.pop(node.node_id)])
                continue
            try:
                info = ray.get(ref)
            except ray.exceptions.RayError as e:
                node.problem = f"its measurement actor failed: {ray_error_text(e)}"
                kill_actors([self._actors.pop(node.node_id)])
                continue
            node.host, node.pid = info["host"], info["pid"]
            node.cpu, node.features = info["cpu"], info["features"]
            if label:
                node.cpu, node.labelled = str(label), True
        first, self._scanned = not self._scanned, time.monotonic()
        for node, _ in (() if first else probes.values()):  # the first look is the node report
            if node.node_id in revived:
                continue
            state = "".join(f"; for {t}: " + (node.mismatch(t) or "taken") for t in self._reported)
            self._verbose(f"node {node} joined{state or ': ' + (node.problem or 'usable')}")
        return [node for node, _ in probes.values() if node.usable]

    def nodes_for(self, target) -> list:
        """The nodes that measure candidates of ``target`` (a Target or its string)."""
        target = Target.parse(target)
        return [n for n in self.nodes if not n.mismatch(target)]

    def describe(self, target) -> str:
        """Which nodes are taken for ``target`` and which not, and why (one line per node)."""
        target = Target.parse(target)
        lines = []
        for n in self.nodes:
            why = n.mismatch(target)
            lines.append(f"  {n}: " + (f"not taken: {why}" if why else "taken"))
        taken = len(self.nodes_for(target))
        return f"{taken} of {len(self.nodes)} node(s) measure for {target}:\n" + "\n".join(lines)

    def _lose(self, node: RayNode, why: str, moved: int, lost: int, target) -> None:
        node.lost = why
        actor = self._actors.pop(node.node_id, None)
        if actor is not None:
            kill_actors([actor])
        left = len(self.nodes_for(target))
        self._verbose(f"lost node {node}: {why}; of the candidates it was measuring {moved} go "
                      f"to other nodes, {lost} are recorded as node_lost; going on with {left} "
                      f"node(s) for {target}")

    # ----------------------------------------------------------------------------- measure
    def measure(self, inputs: list) -> list:
        """Measure ``inputs`` (a list of :class:`~.measure.MeasureInput`) on the cluster; one
        :class:`~tecomp.schedule.records.MeasureResult` per input, in order."""
        if self._closed:
            raise RuntimeError("this RayMeasurer is closed")
        inputs = list(inputs)
        if not inputs:
            return []
        if time.monotonic() - self._scanned > self.rescan_seconds:
            self.refresh()
        targets = {inp.task.target for inp in inputs}
        for t in targets:
            if t not in self._reported:
                self._reported.add(t)
                self._verbose(self.describe(t))
            if not self.nodes_for(t):
                raise RuntimeError(f"RayMeasurer: no node left that measures for {t}:\n"
                                   + self.describe(t).split("\n", 1)[1])
        results: list = [None] * len(inputs)
        inflight: dict = {}  # object ref -> (node, input indices, deadline)
        try:
            self._run(inputs, results, inflight)
        except BaseException:
            # a node busy with a stale chunk would delay the next round: replace its actor
            for node, _, _ in inflight.values():
                node.busy = 0
            kill_actors([self._actors.pop(node.node_id) for node, _, _ in inflight.values()
                   if node.node_id in self._actors])
            raise
        return results

    def _deadline(self, n: int) -> float:
        o = self.options
        return (time.monotonic() + 2 * self.startup_timeout + 120.0
                + n * (o.build_timeout + o.run_timeout))

    def _run(self, inputs: list, results: list, inflight: dict) -> None:
        queue = deque(range(len(inputs)))
        losses = [0] * len(inputs)
        lost_on: dict = {}  # input index -> why its last node was lost
        while queue or inflight:
            busy = {node.node_id for node, _, _ in inflight.values()}
            idle = [n for n in self.nodes if n.usable and n.node_id not in busy]
            for node in idle:
                take = [i for i in queue if not node.mismatch(inputs[i].task.target)]
                if not take:
                    continue
                # an equal share of what is left per node able to take it, at most a full
                # set of builds for this node's workers
                able = sum(1 for n in self.nodes if n.usable
                           and not n.mismatch(inputs[take[0]].task.target))
                k = max(1, min(self.workers_per_node or node.cpus, math.ceil(len(take) / able)))
                chunk = take[:k]
                for i in chunk:
                    queue.remove(i)
                ref = self._send(node, [inputs[i] for i in chunk])
                inflight[ref] = (node, chunk, self._deadline(len(chunk)))
                node.busy = len(chunk)
            if not inflight:  # what is left has no node to go to
                for i in queue:
                    results[i] = _lost_result(lost_on.get(i, "no node is left for its target"))
                queue.clear()
                break
            wait_s = max(0.0, min(d for _, _, d in inflight.values()) - time.monotonic())
            ready, _ = ray.wait(list(inflight), num_returns=1, timeout=wait_s)
            for ref in ready:
                node, chunk, _ = inflight.pop(ref)
                node.busy = 0
                try:
                    out, caught = ray.get(ref)
                except ray.exceptions.RayError as e:
                    self._requeue(node, ray_error_text(e), chunk, queue, losses, lost_on, results,
                                  inputs[chunk[0]].task.target)
                    continue
                for module, name, text in caught:
                    warnings.warn(f"node {node}: {text}", warning_category(module, name),
                                  stacklevel=3)
                for i, r in zip(chunk, out):
                    results[i] = r
                node.measured += len(chunk)
            now = time.monotonic()
            for ref in [r for r, (_, _, d) in inflight.items() if d <= now]:
                node, chunk, _ = inflight.pop(ref)
                node.busy = 0
                self._requeue(node, "it did not answer within its time limit", chunk, queue,
                              losses, lost_on, results, inputs[chunk[0]].task.target)

    def _send(self, node: RayNode, chunk: list):
        """Start measuring ``chunk`` on ``node``; a task goes along only the first time its
        actor gets it (as an object ref: put in the object store once for all nodes)."""
        actor = self._actors.get(node.node_id) or self._start_actor(node)
        sent = self._sent[node.node_id]
        keys = {id(inp.task): task_key(inp.task) for inp in chunk}  # hashes the data: once
        new = {}
        for inp in chunk:
            key = keys[id(inp.task)]
            if key not in sent and key not in new:
                if key not in self._task_refs:
                    self._task_refs[key] = ray.put(inp.task)
                new[key] = self._task_refs[key]
        items = [(keys[id(inp.task)], inp.steps, inp.cutoff) for inp in chunk]
        ref = actor.measure.remote(new, items)
        sent.update(new)
        return ref

    def task_receipts(self) -> dict:
        """Node id -> {task key: times its actor was sent that task} (1 each: tasks travel once
        per actor; a replaced actor gets them again)."""
        refs = {nid: a.received_tasks.remote() for nid, a in self._actors.items()}
        return {nid: ray.get(r, timeout=60) for nid, r in refs.items()}

    def _requeue(self, node, why, chunk, queue, losses, lost_on, results, target) -> None:
        moved = 0
        for i in reversed(chunk):
            losses[i] += 1
            lost_on[i] = f"node {node} was lost while measuring it: {why}"
            if losses[i] >= self.max_attempts:
                results[i] = _lost_result(lost_on[i])
            else:
                queue.appendleft(i)
                moved += 1
        self._lose(node, why, moved, len(chunk) - moved, target)

    def close(self) -> None:
        """Kill the node actors (their workers exit with them); disconnect from Ray when this
        measurer connected (idempotent)."""
        self._closed = True
        self._task_refs.clear()
        self._finalizer()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _lost_result(why: str) -> MeasureResult:
    return MeasureResult(error=ErrorKind.NODE_LOST, error_msg=why[-500:])
