"""Honest comparisons of tecomp with other libraries: one timing protocol (:mod:`.protocol`), the
strongest fair peer of each workload at every thread count and layout (:mod:`.peers`,
:mod:`.onnx_peers`, :mod:`.sparse_peers`), the measured FMA peak (:mod:`.peak`) and the printed
table (:mod:`.report`). The peer libraries (torch, onnxruntime, scipy, threadpoolctl) are optional:
a missing one is skipped and said so; tecomp never depends on them."""
from .protocol import TECOMP, Comparison, Config, Timing, compare, settle

__all__ = ["TECOMP", "Comparison", "Config", "Timing", "compare", "settle"]
