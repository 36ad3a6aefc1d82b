"""The measured FMA peak now lives in :mod:`tecomp.bench.peak`; re-exported for old callers."""
from ..bench.peak import host_lanes, measure_peak, peak_kernel  # noqa: F401

__all__ = ["peak_kernel", "measure_peak", "host_lanes"]
