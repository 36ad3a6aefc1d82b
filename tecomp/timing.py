"""Wall-clock timing of a callable: warm-up, repeats of a minimum duration, median."""
from __future__ import annotations

import statistics
import time

__all__ = ["time_callable"]


def time_callable(fn, warmup: int = 1, repeat: int = 5, min_repeat_s: float = 0.1) -> float:
    """Median seconds per call of ``fn()``.

    Each of ``repeat`` measurements runs ``fn`` enough times to last at least ``min_repeat_s``
    (the count is calibrated once after ``warmup`` calls), which keeps short kernels above timer
    resolution.
    """
    for _ in range(warmup):
        fn()
    t0 = time.perf_counter()
    fn()
    one = max(time.perf_counter() - t0, 1e-7)
    number = max(1, int(min_repeat_s / one))
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter() - t0) / number)
    return statistics.median(samples)
