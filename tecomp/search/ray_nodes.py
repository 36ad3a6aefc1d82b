"""The nodes of a Ray cluster as :class:`~.ray_measure.RayMeasurer` sees them: :class:`RayNode`
(which CPU a node measures for, and whether it is in use), :class:`NodeActor` (the measurement
service each node runs) and the small Ray helpers the measurer uses."""
from __future__ import annotations

import copy
import importlib
import os
import re
import socket
import warnings
from dataclasses import dataclass

try:
    import ray
except ImportError as e:  # ray is an optional extra
    raise ImportError("tecomp.RayMeasurer needs Ray: pip install 'tecomp[ray]' (or ray)") from e

from ..target import Target, TargetKind
from .measure import LocalMeasurer, MeasureInput
from .task import TuningOptions

__all__ = ["NODE_LABEL", "RayNode", "NodeActor", "kill_actors", "check_reachable",
           "ray_error_text", "task_key", "warning_category"]

#: the node label that declares a node's CPU (an LLVM CPU name) instead of detecting it
NODE_LABEL = "tecomp-cpu"


@dataclass
class RayNode:
    """One node of the cluster as the measurer sees it.

    Attributes
    ----------
    node_id, host : str
    cpus : int
        Ray's logical CPUs of the node (its actor holds them all; its worker processes).
    cpu, features : str
        The LLVM CPU name and feature string the node measures for.
    labelled : bool
        ``cpu`` comes from the ``tecomp-cpu`` label (features are then not compared).
    pid : int
        The node actor's process id (its measurement workers are its child processes).
    problem : str
        Why the node cannot measure at all ("" when it can).
    lost : str
        Why it was dropped during the tuning ("" while it is in use).
    measured : int
        Candidates it returned results for.
    busy : int
        Candidates it is measuring now.
    """
    node_id: str
    host: str
    cpus: int
    cpu: str = ""
    features: str = ""
    labelled: bool = False
    pid: int = 0
    problem: str = ""
    lost: str = ""
    measured: int = 0
    busy: int = 0

    @property
    def usable(self) -> bool:
        return not self.problem and not self.lost

    def mismatch(self, target: Target) -> str:
        """Why this node cannot measure for ``target`` ("" when it can)."""
        if self.problem:
            return self.problem
        if self.lost:
            return f"lost: {self.lost}"
        if target.kind is not TargetKind.LLVM:
            return f"the Ray measurer measures CPU (llvm) targets, not {target}"
        if self.cpu != target.cpu:
            how = "labelled" if self.labelled else "detected"
            return f"its CPU is {self.cpu} ({how}), the target's {target.cpu}"
        # the features that change generated code (what the records' target string names)
        mine = set(Target(TargetKind.LLVM, self.cpu, self.features).codegen_features)
        theirs = set(target.codegen_features)
        if not self.labelled and mine != theirs:
            return (f"its CPU features differ from the target's (it has "
                    f"{','.join(sorted(mine - theirs)) or 'none more'}, lacks "
                    f"{','.join(sorted(theirs - mine)) or 'none'})")
        return ""

    def __str__(self):
        return f"{self.host} ({self.node_id[:8]}, {self.cpu}, {self.cpus} CPU)"


class NodeActor:
    """The measurement service of one node (a Ray actor): a LocalMeasurer whose workers isolate
    every candidate from this process.

    Tasks (their DAG and index data, e.g. a sparse matrix's ``indptr``/``indices``) reach the
    actor once, by task key; the chunks after that carry step lists alone. The warnings the
    measurement raises here are returned with the results, for the driver to raise again.
    """

    def __init__(self, options: TuningOptions, check: bool, prepare, startup_timeout: float,
                 reference_timeout: float = 120.0):
        self.args = (options, check, prepare, startup_timeout, reference_timeout)
        self.measurer = None
        self.tasks: dict = {}     # task key -> SearchTask
        self.received: dict = {}  # task key -> times the driver sent it (1, unless it re-sent)

    def probe(self) -> dict:
        from ..target import host_cpu
        cpu, features = host_cpu()
        return {"pid": os.getpid(), "host": socket.gethostname(), "cpu": cpu,
                "features": features}

    def measure(self, tasks: dict, items: list) -> tuple:
        """``(results, warnings)`` for ``items``, ``(task key, steps, cutoff)`` each; ``tasks``
        holds the tasks (or object refs of them) this actor was not sent before, by key.
        ``warnings`` are ``(category module, category name, message)`` of the warnings raised."""
        for key, task in tasks.items():
            self.tasks[key] = _built_here(ray.get(task) if isinstance(task, ray.ObjectRef)
                                          else task)
            self.received[key] = self.received.get(key, 0) + 1
        missing = sorted({k for k, _, _ in items} - set(self.tasks))
        if missing:  # the driver's record of what it sent is wrong: fail loudly, not silently
            raise KeyError(f"node actor: task(s) {missing} were never sent to this actor")
        inputs = [MeasureInput(self.tasks[k], steps, cutoff) for k, steps, cutoff in items]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if self.measurer is None:  # started on the first chunk: probing a node stays cheap
                options, check, prepare, startup, reference = self.args
                self.measurer = LocalMeasurer(options, check=check, prepare=prepare,
                                              startup_timeout=startup,
                                              reference_timeout=reference)
            results = self.measurer.measure(inputs)
        return results, [(w.category.__module__, w.category.__qualname__, str(w.message))
                         for w in caught]

    def received_tasks(self) -> dict:
        """Task key -> how many times the driver sent that task to this actor."""
        return dict(self.received)


def _built_here(task):
    """``task`` as this node builds it: the driver sends a node only tasks of its CPU, so a CPU
    task that does not name this host is one of a node labelled as that CPU, which builds for
    itself under the label's name (the label's promise; the records keep the task's target)."""
    if not task.target.host_mismatch():
        return task
    here = copy.copy(task)
    here.target = Target.parse("llvm")
    return here


def warning_category(module: str, name: str) -> type:
    """The warning class a node actor named (``RuntimeWarning`` if the driver has none such)."""
    try:
        cls = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError):
        return RuntimeWarning
    return cls if isinstance(cls, type) and issubclass(cls, Warning) else RuntimeWarning


def task_key(task) -> str:
    """What identifies a task's data on a node: its workload, index data and target (as
    :class:`~.measure.LocalMeasurer` keys its tasks)."""
    return f"{task.workload_key}/{task.data_hash}/{task.target}"


def kill_actors(actors) -> None:
    for a in actors:
        try:
            ray.kill(a, no_restart=True)
        except Exception:  # noqa: BLE001 - best effort: it may be gone with its node
            pass


def check_reachable(address, timeout: float = 10.0) -> None:
    """Refuse a HOST:PORT nobody listens on at once: ``ray.init`` would retry for minutes."""
    if not isinstance(address, str) or not address:
        raise ValueError(f"RayMeasurer: address must be 'auto' or 'HOST:PORT', got {address!r}")
    if address == "auto":
        return
    host, sep, port = address.split("://", 1)[-1].rpartition(":")
    if not sep or not host or not port.isdigit():
        raise RuntimeError(f"RayMeasurer: the address {address!r} is not 'auto' or 'HOST:PORT'")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except (OSError, ValueError) as e:
        raise RuntimeError(f"RayMeasurer: nothing answers at {address!r} ({e}); is the cluster's "
                           f"head started ('ray start --head') and its port open?") from None


def ray_error_text(e: BaseException) -> str:
    """A Ray error in a line: its type, its first line and (for a remote traceback) its last."""
    plain = re.sub(r"\x1b\[[0-9;]*m", "", str(e))  # Ray colours its task names
    text = [t.strip() for t in plain.strip().splitlines() if t.strip()]
    first = text[0][:200] if text else ""
    last = f" ... {text[-1][:200]}" if len(text) > 1 else ""
    return f"{type(e).__name__}: {first}{last}"
