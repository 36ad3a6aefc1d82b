"""One search bundle per target kind: rules, annotator, hardware limits and measurement hooks come
from :func:`tecomp.search.target_search.target_search`, and the measurer asks the bundle (not the
target's kind) whether a device must be checked before any worker gets a task."""
import dataclasses

import pytest

from tecomp.search import target_search as ts
from tecomp.search.annotate import materialize_cpu
from tecomp.search.gpu_annotate import materialize_gpu
from tecomp.search.measure import LocalMeasurer, MeasureInput
from tecomp.search.task import HardwareParams, SearchTask, TuningOptions
from tecomp.target import Target, TargetKind
from tecomp.testing import workloads as W


@pytest.mark.nodevice
def test_bundles_name_each_kinds_parts():
    cpu, gpu = ts.target_search("llvm"), ts.target_search("cuda")
    assert cpu.kind is TargetKind.LLVM and gpu.kind is TargetKind.CUDA
    assert cpu.materialize is materialize_cpu and gpu.materialize is materialize_gpu
    assert cpu.device is None and gpu.device is ts.CUDA_MEASUREMENT
    assert ts.target_search(TargetKind.CUDA) is gpu


@pytest.mark.nodevice
def test_hardware_params_come_from_the_bundle():
    cuda = Target.parse("cuda")
    assert HardwareParams.for_target(cuda) == HardwareParams.for_cuda(cuda)
    assert HardwareParams.for_target(cuda).warp_size == 32
    cpu = Target.parse("llvm -mcpu=x -mattr=+avx2")
    assert HardwareParams.for_target(cpu) == HardwareParams.for_cpu(cpu)
    assert HardwareParams.for_cpu(cpu).vector_bytes == 32
    assert SearchTask(W.matmul(8, 8, 8).dag, target=cuda).hardware == HardwareParams.for_cuda(cuda)


def test_measurer_checks_device_targets_through_the_bundle(monkeypatch):
    """A device target whose bundle's ``require`` refuses fails before any worker gets a task;
    asked once per target; a CPU task next to it is never checked."""
    asked = []

    def refuse(targets):
        asked.append(set(targets))
        raise RuntimeError("no such device here")

    gpu = ts.target_search("cuda")
    fake = dataclasses.replace(gpu, device=dataclasses.replace(gpu.device, require=refuse))
    monkeypatch.setitem(ts._BUNDLES, TargetKind.CUDA, fake)
    task = SearchTask(W.matmul(8, 8, 8).dag, target="cuda")
    cpu = SearchTask(W.matmul(8, 8, 8).dag, target="llvm")
    with LocalMeasurer(TuningOptions(n_workers=1)) as m:
        with pytest.raises(RuntimeError, match="no such device"):
            m.measure([MeasureInput(cpu, ()), MeasureInput(task, ())])
        assert asked == [{task.target}]
        assert not any(s.tasks for s in m._slots)
        (res,) = m.measure([MeasureInput(cpu, ())])
        assert res.mean_cost > 0 and len(asked) == 1
