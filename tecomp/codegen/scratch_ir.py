"""The scratch-block cache of the runtime, in LLVM IR (part of the thread pool's module, see
:mod:`.threadpool`): where a kernel's intermediate buffers of a constant size come from.

Why: a kernel used to ``aligned_alloc`` each such buffer on entry and ``free`` it on exit. A
buffer of some hundred KB or more then comes from ``mmap`` or from a heap top that glibc trims on
``free``, so each call touched fresh pages: a Winograd layer with 3.4 MB of intermediates took 850
page faults a call and ran in 2.0 ms instead of 0.7, and whether it did depended on what else the
process had allocated before (a benchmark process with torch in it happened not to).

How: ``tecomp_scratch_free(p, size)`` keeps the block in a table of ``SLOTS`` (pointer, size)
slots while the cached bytes stay under a cap; ``tecomp_scratch_alloc(size)`` hands back a cached
block of exactly that size (a kernel asks for the same sizes on every call), else
``aligned_alloc``'s. One spin lock guards the table: a lookup is a few hundred loads, beside a
kernel's milliseconds. ``tecomp_scratch_set(cap)`` frees every cached block and sets the cap
(0: no caching); ``tecomp_scratch_stats`` reports cached bytes, hits and misses.

A format string: ``SLOTS``, ``CAP`` (the default cap in bytes) and ``PAUSE`` (the spin-wait hint).
"""

IR = r"""
@rt_scratch_lock = internal global i32 0, align 64
@rt_scratch_ptr = internal global [{SLOTS} x ptr] zeroinitializer, align 64
@rt_scratch_size = internal global [{SLOTS} x i64] zeroinitializer, align 64
@rt_scratch_bytes = internal global i64 0, align 64
@rt_scratch_cap = internal global i64 {CAP}, align 8
@rt_scratch_hits = internal global i64 0, align 8
@rt_scratch_misses = internal global i64 0, align 8

declare ptr @aligned_alloc(i64, i64)
declare void @free(ptr)

define internal void @rt_scratch_lock_take() {{
entry:
  br label %try
try:
  %x = cmpxchg ptr @rt_scratch_lock, i32 0, i32 1 acquire monotonic
  %got = extractvalue {{ i32, i1 }} %x, 1
  br i1 %got, label %done, label %spin
spin:
  call void asm sideeffect "{PAUSE}", "~{{memory}}"()
  br label %try
done:
  ret void
}}

define internal void @rt_scratch_lock_give() {{
  store atomic i32 0, ptr @rt_scratch_lock release, align 4
  ret void
}}

define internal void @rt_count(ptr %counter) {{
  %n = load i64, ptr %counter, align 8
  %n1 = add i64 %n, 1
  store i64 %n1, ptr %counter, align 8
  ret void
}}

; a 64-byte aligned block of exactly %size bytes (a multiple of 64): a cached one if there is,
; else aligned_alloc's (null when that fails)
define ptr @tecomp_scratch_alloc(i64 %size) {{
entry:
  call void @rt_scratch_lock_take()
  br label %scan
scan:
  %i = phi i64 [ 0, %entry ], [ %i1, %next ]
  %pp = getelementptr inbounds [{SLOTS} x ptr], ptr @rt_scratch_ptr, i64 0, i64 %i
  %p = load ptr, ptr %pp, align 8
  %sp = getelementptr inbounds [{SLOTS} x i64], ptr @rt_scratch_size, i64 0, i64 %i
  %s = load i64, ptr %sp, align 8
  %full = icmp ne ptr %p, null
  %same = icmp eq i64 %s, %size
  %hit = and i1 %full, %same
  br i1 %hit, label %take, label %next
next:
  %i1 = add i64 %i, 1
  %more = icmp ult i64 %i1, {SLOTS}
  br i1 %more, label %scan, label %miss
take:
  store ptr null, ptr %pp, align 8
  %b = load i64, ptr @rt_scratch_bytes, align 8
  %b1 = sub i64 %b, %size
  store i64 %b1, ptr @rt_scratch_bytes, align 8
  call void @rt_count(ptr @rt_scratch_hits)
  call void @rt_scratch_lock_give()
  ret ptr %p
miss:
  call void @rt_count(ptr @rt_scratch_misses)
  call void @rt_scratch_lock_give()
  %q = call ptr @aligned_alloc(i64 64, i64 %size)
  ret ptr %q
}}

; give back a block of tecomp_scratch_alloc(%size): cached while a slot is free and the cached
; bytes stay under the cap, else freed
define void @tecomp_scratch_free(ptr %p, i64 %size) {{
entry:
  call void @rt_scratch_lock_take()
  %b = load i64, ptr @rt_scratch_bytes, align 8
  %b1 = add i64 %b, %size
  %cap = load i64, ptr @rt_scratch_cap, align 8
  %fits = icmp ule i64 %b1, %cap
  br i1 %fits, label %scan, label %drop
scan:
  %i = phi i64 [ 0, %entry ], [ %i1, %next ]
  %pp = getelementptr inbounds [{SLOTS} x ptr], ptr @rt_scratch_ptr, i64 0, i64 %i
  %q = load ptr, ptr %pp, align 8
  %empty = icmp eq ptr %q, null
  br i1 %empty, label %keep, label %next
next:
  %i1 = add i64 %i, 1
  %more = icmp ult i64 %i1, {SLOTS}
  br i1 %more, label %scan, label %drop
keep:
  store ptr %p, ptr %pp, align 8
  %sp = getelementptr inbounds [{SLOTS} x i64], ptr @rt_scratch_size, i64 0, i64 %i
  store i64 %size, ptr %sp, align 8
  store i64 %b1, ptr @rt_scratch_bytes, align 8
  call void @rt_scratch_lock_give()
  ret void
drop:
  call void @rt_scratch_lock_give()
  call void @free(ptr %p)
  ret void
}}

; free every cached block and set the cap (bytes; 0 caches nothing); returns the bytes freed
define i64 @tecomp_scratch_set(i64 %cap) {{
entry:
  call void @rt_scratch_lock_take()
  store i64 %cap, ptr @rt_scratch_cap, align 8
  br label %scan
scan:
  %i = phi i64 [ 0, %entry ], [ %i1, %next ]
  %t = phi i64 [ 0, %entry ], [ %t1, %next ]
  %pp = getelementptr inbounds [{SLOTS} x ptr], ptr @rt_scratch_ptr, i64 0, i64 %i
  %p = load ptr, ptr %pp, align 8
  %sp = getelementptr inbounds [{SLOTS} x i64], ptr @rt_scratch_size, i64 0, i64 %i
  %s = load i64, ptr %sp, align 8
  %full = icmp ne ptr %p, null
  br i1 %full, label %drop, label %next
drop:
  call void @free(ptr %p)
  store ptr null, ptr %pp, align 8
  br label %next
next:
  %add = select i1 %full, i64 %s, i64 0
  %t1 = add i64 %t, %add
  %i1 = add i64 %i, 1
  %more = icmp ult i64 %i1, {SLOTS}
  br i1 %more, label %scan, label %done
done:
  store i64 0, ptr @rt_scratch_bytes, align 8
  call void @rt_scratch_lock_give()
  ret i64 %t1
}}

; 0: bytes cached now, 1: allocations served from the cache, 2: allocations that were not
define i64 @tecomp_scratch_stats(i32 %what) {{
entry:
  call void @rt_scratch_lock_take()
  %b = load i64, ptr @rt_scratch_bytes, align 8
  %h = load i64, ptr @rt_scratch_hits, align 8
  %m = load i64, ptr @rt_scratch_misses, align 8
  call void @rt_scratch_lock_give()
  %is0 = icmp eq i32 %what, 0
  %is1 = icmp eq i32 %what, 1
  %hm = select i1 %is1, i64 %h, i64 %m
  %r = select i1 %is0, i64 %b, i64 %hm
  ret i64 %r
}}

; in a forked child: a thread that held the lock did not survive the fork
define internal void @rt_scratch_after_fork() {{
  store atomic i32 0, ptr @rt_scratch_lock seq_cst, align 4
  ret void
}}
"""
