"""Hand-written PTX kernels for testing the CUDA runtime independently of tecomp's emitter.

``.target sm_75`` (the oldest arch CUDA 13's ptxas still takes); the driver JIT-compiles it for
newer GPUs. ``write_tid(u64 out, u32 n)``: ``out[i] = i`` for ``i < n`` (int32).
``axpy(u64 x, u64 y, f32 a, u32 n)``: ``y[i] = a * x[i] + y[i]`` (float32).
"""

PTX = r"""
.version 7.0
.target sm_75
.address_size 64

.visible .entry write_tid(.param .u64 out, .param .u32 n)
{
    .reg .pred %p;
    .reg .b32 %r<6>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.u32 %p, %r5, %r1;
    @%p bra DONE;
    cvta.to.global.u64 %rd2, %rd1;
    mul.wide.u32 %rd3, %r5, 4;
    add.s64 %rd2, %rd2, %rd3;
    st.global.u32 [%rd2], %r5;
DONE:
    ret;
}

.visible .entry axpy(.param .u64 x, .param .u64 y, .param .f32 a, .param .u32 n)
{
    .reg .pred %p;
    .reg .b32 %r<6>;
    .reg .f32 %f<4>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [x];
    ld.param.u64 %rd2, [y];
    ld.param.f32 %f1, [a];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.u32 %p, %r5, %r1;
    @%p bra END;
    cvta.to.global.u64 %rd3, %rd1;
    cvta.to.global.u64 %rd4, %rd2;
    mul.wide.u32 %rd5, %r5, 4;
    add.s64 %rd6, %rd3, %rd5;
    add.s64 %rd7, %rd4, %rd5;
    ld.global.f32 %f2, [%rd6];
    ld.global.f32 %f3, [%rd7];
    fma.rn.f32 %f3, %f1, %f2, %f3;
    st.global.f32 [%rd7], %f3;
END:
    ret;
}
"""
