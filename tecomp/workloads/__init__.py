"""The standard workloads by name (what ``tecomp tune WORKLOAD`` / ``bench`` / ``run`` build), with
their numpy/scipy references, the layer sets of standard networks and hand-written schedules.

``get_workload(name, **params)`` and ``workload_from_spec(name, shape, params)`` return a
:class:`Workload` ``(dag, make_inputs, reference)``; :data:`WORKLOADS` lists the names.
"""
from .builders import WORKLOADS, Workload, get_workload, parse_value, workload_from_spec

__all__ = ["WORKLOADS", "Workload", "get_workload", "parse_value", "workload_from_spec"]
