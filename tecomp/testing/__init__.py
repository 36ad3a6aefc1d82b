"""Shared test support: numpy/scipy references, a schedule-free DAG evaluator and workload builders."""
from ..workloads.builders import Workload, random_bsr, random_csr
from .dag_eval import evaluate_dag

__all__ = ["evaluate_dag", "Workload", "random_csr", "random_bsr"]
