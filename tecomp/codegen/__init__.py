"""tecomp.codegen: emitters from the loop IR to native code."""
from .llvm_cpu import CompiledCPU, compile_cpu, emit_module, host_cpu

__all__ = ["CompiledCPU", "compile_cpu", "emit_module", "host_cpu"]
