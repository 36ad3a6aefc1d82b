"""NVPTX code generation: a GPU loop-IR program -> LLVM IR for ``nvptx64-nvidia-cuda`` -> PTX.

The program comes prepared by :func:`tecomp.lowering.gpu_passes.prepare_gpu_program` (the caller
passes its :class:`~tecomp.lowering.gpu_passes.GPUProgramInfo`): one ``.entry`` per launch, named
``<func>_k<n>``, taking a ``ptr addrspace(1) noalias`` per global buffer it uses. This module is a
thin translator reusing the CPU emitter (:class:`.llvm_cpu.StmtEmitter`) for statements and
expressions; what differs on the GPU:

- a thread-bound loop is ``var = begin + %tid/%ctaid`` (``llvm.nvvm.read.ptx.sreg.*``), guarded by
  ``var < extent`` only when the launch dimension is larger; ``vthread`` loops run serially in each
  thread (unrolled when short);
- shared buffers are ``addrspace(3)`` globals of the module (one per allocation), local buffers
  allocas; ``Barrier`` is ``llvm.nvvm.barrier.cta.sync.aligned.all`` (``bar.sync 0``);
- vectorized loops are unrolled into scalar accesses, which the NVPTX backend's load/store
  vectorizer merges into ``ld/st.v2/v4`` where they are contiguous and provably aligned;
- exp/log/tanh/sigmoid come from :mod:`.nvptx_math` (no libm on the device).

:class:`CompiledCuda` launches the kernels through :mod:`.cuda_runtime`, imported only when a
kernel runs, so building PTX never needs cuda-python.
"""
from __future__ import annotations

import weakref

import llvmlite.binding as llvm
import llvmlite.ir as ir

from ..ir.expr import Const, UnOp
from ..ir.loop import Allocate, Barrier, For, ForKind, PrimFunc, Scope, ThreadAxis, verify
from .llvm_cpu import MAX_EMIT_UNROLL, MAX_STACK_ALLOC, StmtEmitter, kernel_symbol
from .llvm_expr import I32, VOID, ExprEmitter, ident, mem_type, reg_type
from .llvm_jit import LOCK, optimize_module
from .nvptx_math import emit_math

__all__ = ["CompiledCuda", "compile_cuda", "emit_nvptx_module", "ptx_from_ir", "TRIPLE"]

TRIPLE = "nvptx64-nvidia-cuda"
GLOBAL_PTR = ir.PointerType(addrspace=1)
SHARED_PTR = ir.PointerType(addrspace=3)
_SREG = {ThreadAxis.THREAD_X: "tid.x", ThreadAxis.THREAD_Y: "tid.y", ThreadAxis.THREAD_Z: "tid.z",
         ThreadAxis.BLOCK_X: "ctaid.x", ThreadAxis.BLOCK_Y: "ctaid.y", ThreadAxis.BLOCK_Z: "ctaid.z"}
_BARRIER = "llvm.nvvm.barrier.cta.sync.aligned.all"  # LLVM 22's name of barrier0 (bar.sync 0)
_INITIALIZED = False


def _ptx_version(arch: str) -> str:
    num = int(arch.split("_")[1].rstrip("a"))
    return "+ptx80" if num >= 90 else "+ptx70"


def target_machine(arch: str, opt_level: int = 3):
    global _INITIALIZED
    with LOCK:
        if not _INITIALIZED:
            llvm.initialize_all_targets()
            llvm.initialize_all_asmprinters()
            _INITIALIZED = True
        target = llvm.Target.from_triple(TRIPLE)
        return target.create_target_machine(cpu=arch, features=_ptx_version(arch), opt=opt_level)


class KernelEmitter(StmtEmitter):
    """Emits one launch as a kernel function of ``module`` (statements as on the CPU, plus the
    GPU's loop kinds, allocations and barriers)."""

    _STMT = {**StmtEmitter._STMT, Barrier: "emit_barrier"}
    _LOOP = {**StmtEmitter._LOOP, ForKind.THREAD_BOUND: "loop_thread"}
    VECTOR_REDUCTIONS = False
    TRANSPOSE_COPIES = False

    def __init__(self, func: PrimFunc, module: ir.Module, launch):
        # not StmtEmitter.__init__: the function is one kernel of a shared module
        self.symbol = launch.name
        self.launch = launch
        fn = self.fn = ir.Function(module, ir.FunctionType(VOID, [GLOBAL_PTR] * len(launch.params)),
                                   name=launch.name)
        fn.calling_convention = "ptx_kernel"
        fn.attributes.add("nounwind")
        self.entry_builder = ir.IRBuilder(fn.append_basic_block("entry"))
        self.start = fn.append_basic_block("start")
        ExprEmitter.__init__(self, func, module, ir.IRBuilder(self.start))
        for i, (arg, buf) in enumerate(zip(fn.args, launch.params)):
            arg.name = f"p{i}_{ident(buf.name)}"
            arg.add_attribute("noalias")
            self.bufs[buf] = arg
        self.allocas: dict = {}
        self.dims = dict(zip((ThreadAxis.THREAD_X, ThreadAxis.THREAD_Y, ThreadAxis.THREAD_Z),
                             launch.block))
        self.dims.update(zip((ThreadAxis.BLOCK_X, ThreadAxis.BLOCK_Y, ThreadAxis.BLOCK_Z),
                             launch.grid))

    def run(self) -> ir.Function:
        self.stmt(self.launch.stmt)
        self.b.ret_void()
        self.entry_builder.branch(self.start)
        return self.fn

    # ------------------------------------------------------------------ loops

    def loop_thread(self, s: For) -> None:
        if s.thread is ThreadAxis.VTHREAD:  # virtual threads: serial in each thread
            if isinstance(s.extent, Const) and s.extent.value <= MAX_EMIT_UNROLL:
                self.unroll(s)
            else:
                self.counted_loop(s)
            return
        b = self.b
        vt = reg_type(s.var.dtype)
        sreg = self.declare(f"llvm.nvvm.read.ptx.sreg.{_SREG[s.thread]}", I32, [])
        v = b.call(sreg, [])  # an unsigned i32 below the launch dimension
        if vt.width != 32:
            v = b.zext(v, vt) if vt.width > 32 else b.trunc(v, vt)
        ext = int(s.extent.value)
        begin = self.int_to(self.stmt_expr(s.begin), s.begin.dtype, vt)
        value = b.add(begin, v, flags=["nsw"]) if not (isinstance(s.begin, Const)
                                                       and s.begin.value == 0) else v
        self.vars[id(s.var)] = value
        if ext < self.dims[s.thread]:
            with b.if_then(b.icmp_unsigned("<", v, v.type(ext))):
                self.stmt(s.body)
        else:
            self.stmt(s.body)
        del self.vars[id(s.var)]

    def loop_vectorized(self, s: For) -> None:
        self.unroll(s)  # contiguous aligned accesses are merged by the load/store vectorizer

    def loop_parallel(self, s: For) -> None:
        raise ValueError(f"loop '{s.var.name}' is annotated parallel, a CPU thread-pool loop; on "
                         f"the GPU bind it to blockIdx/threadIdx instead")

    # ------------------------------------------------------------------ memory

    def emit_allocate(self, s: Allocate) -> None:
        buf = s.buffer
        if buf.scope is Scope.SHARED:
            g = self.allocas.get(s)
            if g is None:
                ty = ir.ArrayType(mem_type(buf.dtype), buf.alloc_size)
                name = self.module.get_unique_name(f"{self.symbol}_{ident(buf.name)}")
                g = ir.GlobalVariable(self.module, ty, name, addrspace=3)
                g.linkage = "internal"
                g.align = 16
                g.initializer = ir.Constant(ty, ir.Undefined)
                g.type = SHARED_PTR  # llvmlite types a global as a typed pointer; we index it flat
                self.allocas[s] = g
            self.with_buffer(buf, g, s.body)
            return
        if buf.scope is not Scope.LOCAL or not all(isinstance(d, int) for d in buf.shape) \
                or buf.alloc_size * buf.dtype.itemsize > MAX_STACK_ALLOC:
            raise ValueError(f"buffer '{buf.name}' ({buf.scope.value}) cannot be allocated inside "
                             f"a GPU kernel: only local buffers of constant size and shared ones")
        self.with_buffer(buf, self.stack_slot(s, buf.alloc_size), s.body)

    def emit_barrier(self, s: Barrier) -> None:
        self.b.call(self.declare(_BARRIER, VOID, [I32]), [I32(0)])

    # ------------------------------------------------------------------ math

    def unop(self, e: UnOp) -> ir.Value:
        if e.a.dtype.is_float:
            r = emit_math(self, e.op, e.a.dtype, self.expr(e.a))
            if r is not None:
                return r
        return super().unop(e)


def emit_nvptx_module(func: PrimFunc, info, arch: str = "sm_90") -> str:
    """The LLVM IR text (unoptimized) of the prepared GPU program ``func`` with its launches
    ``info`` (a :class:`~tecomp.lowering.gpu_passes.GPUProgramInfo`)."""
    verify(func)
    with LOCK:
        tm = target_machine(arch)
        module = ir.Module(name=kernel_symbol(func.name))
        module.triple, module.data_layout = TRIPLE, str(tm.target_data)
        for launch in info.launches:
            KernelEmitter(func, module, launch).run()
        text = str(module)
    # the launch's block size as "nvvm.maxntid" (llvmlite.ir cannot write string attributes)
    for launch in info.launches:
        head = f'define ptx_kernel void @"{launch.name}"('
        at = text.index(head)
        end = text.index("\n", at)
        line = text[at:end]
        text = text[:at] + line.replace(" nounwind", f' nounwind "nvvm.maxntid"='
                                        f'"{",".join(map(str, launch.block))}"', 1) + text[end:]
    return text


def ptx_from_ir(text: str, arch: str = "sm_90", opt_level: int = 3) -> tuple:
    """``(optimized LLVM IR, PTX)`` of the NVPTX module ``text``."""
    with LOCK:
        mod = llvm.parse_assembly(text)
        mod.verify()
        tm = target_machine(arch, opt_level)
        optimize_module(mod, tm, opt_level)
        return str(mod), tm.emit_assembly(mod)


class CompiledCuda:
    """PTX of a GPU program and its launches; :meth:`run` executes them on the device.

    Attributes
    ----------
    source : str
        The PTX text (one ``.entry`` per launch).
    llvm_ir : str
        The optimized NVPTX LLVM IR.
    launches : list of LaunchInfo
        In order: ``name``, ``grid``, ``block``, ``shared_bytes``, ``params`` (global buffers).
    """

    def __init__(self, func: PrimFunc, info, source: str, llvm_ir: str, arch: str):
        self.func, self.info, self.source, self.llvm_ir, self.arch = func, info, source, llvm_ir, arch
        self.launches = info.launches
        self._module = None

    def _functions(self):
        from . import cuda_runtime as rt
        rt.require()
        if self._module is None:
            module = rt.Module(self.source)
            self._module = (module, [module.function(x.name) for x in self.launches])
        return self._module[1]

    def run(self, arrays: list) -> None:
        """Run on numpy ``arrays`` (in ``func.params`` order): inputs are copied to the device,
        outputs copied back into their arrays. Raises ``CudaUnavailableError`` without a GPU."""
        from . import cuda_runtime as rt
        self._functions()  # fail before copying when there is no GPU
        n_in = len(self.func.params) - self.func.n_outputs
        dev = [rt.DeviceArray.from_numpy(a) if i < n_in else rt.DeviceArray.empty(a.shape, a.dtype)
               for i, a in enumerate(arrays)]
        self.run_device(dev)
        for a, d in zip(arrays[n_in:], dev[n_in:]):
            d.to_numpy(out=a)

    def bind(self, arrays: list, keep: bool = True):
        """A zero-argument callable that runs on numpy ``arrays`` as :meth:`run` does, holding
        them (``keep``) or only weak references (the caller keeps them alive)."""
        if keep:
            return lambda: self.run(list(arrays))
        refs = [weakref.ref(a) for a in arrays]
        return lambda: self.run([r() for r in refs])

    def run_device(self, device_arrays: list) -> None:
        """Run on device arrays (``DeviceArray``s, in ``func.params`` order), zero-copy; global
        intermediates are allocated for the call."""
        from . import cuda_runtime as rt
        fns = self._functions()
        if len(device_arrays) != len(self.func.params):
            raise ValueError(f"{self.func.name} takes {len(self.func.params)} arrays, "
                             f"got {len(device_arrays)}")
        bufs = dict(zip(self.func.params, device_arrays))
        for launch, fn in zip(self.launches, fns):
            for b in launch.params:
                if b not in bufs:  # a global intermediate
                    bufs[b] = rt.DeviceArray.empty(b.shape, b.dtype.np)
            fn.launch(launch.grid, launch.block, [bufs[b] for b in launch.params])

    def __repr__(self):
        return f"CompiledCuda({self.func.name!r}, {len(self.launches)} launch(es), {self.arch})"


def compile_cuda(func: PrimFunc, target, info, opt_level: int = 3) -> CompiledCuda:
    """Translate the GPU program ``func`` to PTX for ``target`` (a cuda Target or ``"sm_XX"``).

    ``func`` and ``info`` are what :func:`tecomp.lowering.gpu_passes.prepare_gpu_program` returns
    (``tc.build`` runs it: the passes are a schedule concern, codegen only translates)."""
    arch = target if isinstance(target, str) else (getattr(target, "arch", "") or "sm_90")
    text = emit_nvptx_module(func, info, arch)
    optimized, ptx = ptx_from_ir(text, arch, opt_level)
    return CompiledCuda(func, info, ptx, optimized, arch)
