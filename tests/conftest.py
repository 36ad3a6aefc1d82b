"""Fixtures the test modules share, and the test tiers.

Tiers are markers (registered in pyproject.toml):

- ``nodevice``: no compiled code (IR, schedules, search logic, the loop-IR interpreter); a module
  says so with ``pytestmark = pytest.mark.nodevice``. ``pytest -m nodevice`` is the fastest tier.
- ``cpu``: compiles with LLVM and runs on this CPU. Every test that names no tier gets it.
- ``cuda``: launches kernels on an NVIDIA GPU; skipped here when no GPU answers.
  ``pytest -m cuda`` on a GPU machine runs the device checks alone.
"""
import pytest

TIERS = ("nodevice", "cpu", "cuda")


def pytest_collection_modifyitems(config, items):
    gpu = None  # asked once, and only when a cuda test was collected
    for item in items:
        if not any(item.get_closest_marker(t) for t in TIERS):
            item.add_marker(pytest.mark.cpu)
        if item.get_closest_marker("cuda"):
            if gpu is None:
                from tecomp.codegen import cuda_runtime
                gpu = cuda_runtime.available()
            if not gpu:
                item.add_marker(pytest.mark.skip(reason="no CUDA GPU here"))


@pytest.fixture(params=[1, 2, 3], ids=lambda n: f"{n}thr")
def threads(request):
    """Runs the test with the CPU thread pool at 1, 2 and 3 threads, restoring the size after."""
    from tecomp.codegen import parallel
    old = parallel.get_num_threads()
    parallel.set_num_threads(request.param)
    yield request.param
    parallel.set_num_threads(old)
