"""Thread-count controls of tecomp and its peers, and what BLAS this process runs.

Each ``*_threads(n)`` returns a function that puts one system at ``n`` threads; the timing
protocol calls it before every batch of that system's configuration, so the systems of one
comparison can run at different thread counts in the same process.
"""
from __future__ import annotations

import os

__all__ = ["tecomp_threads", "numpy_threads", "torch_threads", "blas_info", "blas_env_problem",
           "thread_counts"]

#: Environment variables some machines set for old OpenBLAS builds; a current OpenBLAS picks a
#: slower kernel under them, so the peers must run without them.
BLAS_ENV = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


def thread_counts() -> tuple:
    """The thread counts every system is timed at: 1 and all cores (deduplicated)."""
    return tuple(sorted({1, os.cpu_count() or 1}))


def tecomp_threads(n: int):
    from ..codegen.parallel import set_num_threads
    return lambda: set_num_threads(n)


def numpy_threads(n: int):
    """Sets numpy's BLAS to ``n`` threads (needs threadpoolctl; without it, None: numpy then runs
    at its default count and is timed once)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return None
    return lambda: threadpool_limits(limits=n, user_api="blas")


def torch_threads(n: int):
    import torch
    return lambda: torch.set_num_threads(n)


def blas_info() -> str:
    """One line: the BLAS libraries loaded in this process, their versions and kernels."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return "unknown (install threadpoolctl to see it)"
    libs = [i for i in threadpool_info() if i.get("user_api") == "blas"]
    if not libs:
        return "none loaded"
    return "; ".join(f"{i.get('internal_api')} {i.get('version')} "
                     f"(kernel {i.get('architecture') or '?'}, {i.get('num_threads')} threads)"
                     for i in libs)


def blas_env_problem() -> str | None:
    """A warning when this process runs under the OpenBLAS variables of :data:`BLAS_ENV` (set
    before numpy loaded, they hold for the whole process), else None."""
    bad = [f"{k}={os.environ[k]}" for k in BLAS_ENV if k in os.environ]
    if not bad:
        return None
    return (f"{' '.join(bad)} is set: numpy's OpenBLAS runs a slower kernel than it would; "
            f"run with `env -u {' -u '.join(BLAS_ENV)}` for a fair peer")
