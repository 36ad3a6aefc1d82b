"""The kernels behind the bounds the benchmarks quote: the FMA-peak kernel computes its recurrence,
the read-bandwidth kernel reads every element of its buffer (its sums are the buffer's), and the
roofline picks the higher of the two bounds."""
import numpy as np
import pytest

from tecomp.bench.peak import bandwidth_kernel, measure_bandwidth, peak_kernel, roofline_seconds
from tecomp.codegen.llvm_cpu import compile_cpu


@pytest.mark.parametrize("n_threads,nbytes,reps", [(1, 5000, 1), (2, 1 << 16, 3)])
def test_bandwidth_kernel_reads_the_whole_buffer(n_threads, nbytes, reps):
    func, moved = bandwidth_kernel(n_threads, nbytes, reps, lanes=8, n_acc=4)
    data = np.random.default_rng(0).uniform(-1, 1, func.params[0].shape).astype(np.float32)
    out = np.empty(func.params[1].shape, np.float32)
    compile_cpu(func).run([data, out])
    assert moved == data.nbytes * reps and data.nbytes >= nbytes
    want = reps * data.astype(np.float64).sum(axis=1)
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-3)


def test_peak_kernel_computes_its_recurrence():
    func, flops = peak_kernel(2, lanes=8, n_acc=2, steps=50)
    out = np.empty(func.params[0].shape, np.float32)
    compile_cpu(func).run([out])
    acc = np.float32(0.5)
    for _ in range(50):
        acc = acc * np.float32(0.9999) + np.float32(0.0001)
    np.testing.assert_allclose(out, acc, rtol=1e-5)
    assert flops == 2.0 * 2 * 50 * 2 * 8


def test_measured_bandwidth_is_a_positive_rate():
    assert measure_bandwidth(1 << 16, 1) > 0


def test_roofline_is_the_higher_bound():
    assert roofline_seconds(2e9, 1e6, 100.0, 10.0) == pytest.approx(0.02)   # FMA-bound
    assert roofline_seconds(1e6, 1e9, 100.0, 10.0) == pytest.approx(0.1)    # memory-bound


def test_core_share_and_the_starved_host_warning(monkeypatch):
    """Two threads at one thread's FMA rate: half the cores were free, and the check says so; at
    twice the rate no warning; one core needs no check."""
    from tecomp.bench import peak as P
    from tecomp.bench.report import print_host_check
    assert P.core_share(190.0, 95.0, 2) == pytest.approx(1.0)
    assert P.core_share(95.0, 95.0, 2) == pytest.approx(0.5)
    assert np.isnan(P.core_share(1.0, 0.0, 2))
    monkeypatch.setattr(P, "measure_peak", lambda n=None, lanes=None: 95.0)
    share, warn = P.host_check(93.0, n_threads=2)
    assert share == pytest.approx(93.0 / 190.0) and "not all free" in warn
    assert P.host_check(185.0, n_threads=2) == (pytest.approx(185.0 / 190.0), None)
    assert P.host_check(50.0, n_threads=1) == (1.0, None)
    lines = []
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    assert print_host_check(lines.append, 93.0) == pytest.approx(93.0 / 190.0)
    assert lines[0].startswith("cores free") and lines[1].startswith("WARNING")
