"""Shared test support: numpy/scipy references, a schedule-free DAG evaluator and workload builders."""
from .dag_eval import evaluate_dag
from .workloads import Workload, random_bsr, random_csr

__all__ = ["evaluate_dag", "Workload", "random_csr", "random_bsr"]
