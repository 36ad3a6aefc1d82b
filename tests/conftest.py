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
    if getattr(config.option, "loadgroup", False):  # an xdist worker under --dist loadgroup
        _group_node_ids(items)
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


def _group_node_ids(items):
    """Puts each test's ``xdist_group`` in its node id (``ID@GROUP``), by which ``--dist loadgroup``
    sends a group's tests to one worker. pytest-xdist (3.8) sets ``item._nodeid``, which pytest 9
    no longer reads (the id is ``item._id``): the groups were lost, and each worker started its
    own Ray cluster (and module fixtures ran once per worker)."""
    try:
        from _pytest.nodeid import coerce_node_id
    except ImportError:  # an older pytest: xdist's own renaming works there
        return
    for item in items:
        names = {str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                 for m in item.iter_markers("xdist_group")}
        suffix = "@" + "_".join(sorted(names))
        if names and hasattr(item, "_id") and not item.nodeid.endswith(suffix):
            item._id = coerce_node_id(item.nodeid + suffix)


@pytest.fixture(params=[1, 2, 3], ids=lambda n: f"{n}thr")
def threads(request):
    """Runs the test with the CPU thread pool at 1, 2 and 3 threads, restoring the size after."""
    from tecomp.codegen import parallel
    old = parallel.get_num_threads()
    parallel.set_num_threads(request.param)
    yield request.param
    parallel.set_num_threads(old)
