"""The thread pool's LLVM IR (:mod:`.threadpool` explains its design): a format string with the
pool size ``MAXT``, the default chunks per thread of a static loop ``GRAIN``, the futex syscall
number ``SYS_FUTEX``, the spin-wait hint ``PAUSE`` and the two entry names ``ENTRY`` and
``DYNAMIC_ENTRY``, which :func:`.threadpool._source` fills in."""

IR = r"""
@rt_workers = internal global [{MAXT} x [16 x i32]] zeroinitializer, align 64 ; [w] = go, sleeping
@rt_threads = internal global [{MAXT} x i64] zeroinitializer, align 64
@rt_busy = internal global i32 0, align 64
@rt_started = internal global i64 0, align 64
@rt_active = internal global i32 1, align 64
@rt_shutdown = internal global i32 0, align 64
@rt_closed = internal global i32 0, align 64
@rt_spin_ns = internal global i64 1000000, align 64
@rt_grain = internal global i64 {GRAIN}, align 64 ; static loops: chunks per thread (0: one each)
@rt_chunks_done = internal global i64 0, align 64
@rt_job_fn = internal global ptr null, align 64
@rt_job_cl = internal global ptr null, align 8
@rt_job_n = internal global i64 0, align 8
@rt_job_c = internal global i64 0, align 8
@rt_job_chunk = internal global i64 0, align 8 ; 0: static chunks, else the dynamic chunk size
@rt_job_next = internal global i64 0, align 64 ; dynamic: the next unclaimed iteration
@rt_remaining = internal global i32 0, align 64
@rt_caller_sleeping = internal global i32 0, align 64

declare i32 @pthread_create(ptr, ptr, ptr, ptr)
declare i32 @pthread_join(i64, ptr)
declare i64 @syscall(i64, ...)
declare i32 @clock_gettime(i32, ptr)
declare i32 @sched_yield()

define internal i64 @rt_now() {{
  %ts = alloca [2 x i64], align 8
  %rc = call i32 @clock_gettime(i32 1, ptr %ts)
  %s = load i64, ptr %ts, align 8
  %p = getelementptr inbounds [2 x i64], ptr %ts, i64 0, i64 1
  %ns = load i64, ptr %p, align 8
  %a = mul i64 %s, 1000000000
  %t = add i64 %a, %ns
  ret i64 %t
}}

define internal void @rt_futex_wait(ptr %addr, i32 %val) {{
  %v = zext i32 %val to i64
  %r = call i64 (i64, ...) @syscall(i64 {SYS_FUTEX}, ptr %addr, i64 128, i64 %v, ptr null)
  ret void
}}

define internal void @rt_futex_wake(ptr %addr) {{
  %r = call i64 (i64, ...) @syscall(i64 {SYS_FUTEX}, ptr %addr, i64 129, i64 2147483647)
  ret void
}}

; wait until *addr != val: spin for rt_spin_ns, then sleep on the futex with *sleeping set
define internal void @rt_wait_ne(ptr %addr, i32 %val, ptr %sleeping) {{
entry:
  %spin = load atomic i64, ptr @rt_spin_ns monotonic, align 8
  %t0 = call i64 @rt_now()
  %deadline = add i64 %t0, %spin
  br label %poll
poll:
  %i = phi i32 [ 0, %entry ], [ %i1, %pause ], [ %i1, %clock ]
  %v = load atomic i32, ptr %addr acquire, align 4
  %ne = icmp ne i32 %v, %val
  br i1 %ne, label %done, label %relax
relax:
  call void asm sideeffect "{PAUSE}", "~{{memory}}"()
  %i1 = add i32 %i, 1
  %m = and i32 %i1, 255
  %chk = icmp eq i32 %m, 0
  br i1 %chk, label %clock, label %pause
pause:
  br label %poll
clock:
  %y = call i32 @sched_yield()  ; let a runnable thread on this core go first (oversubscription)
  %t = call i64 @rt_now()
  %late = icmp sgt i64 %t, %deadline
  br i1 %late, label %sleep, label %poll
sleep:
  store atomic i32 1, ptr %sleeping seq_cst, align 4
  %v2 = load atomic i32, ptr %addr seq_cst, align 4
  %ne2 = icmp ne i32 %v2, %val
  br i1 %ne2, label %woken, label %block
block:
  call void @rt_futex_wait(ptr %addr, i32 %val)
  br label %sleep
woken:
  store atomic i32 0, ptr %sleeping monotonic, align 4
  br label %done
done:
  ret void
}}

; chunk w of c over [0, n): sizes differ by at most one
define internal void @rt_run_chunk(ptr %fn, ptr %cl, i64 %n, i64 %c, i64 %w) {{
  %q = udiv i64 %n, %c
  %r = urem i64 %n, %c
  %lt = icmp ult i64 %w, %r
  %mn = select i1 %lt, i64 %w, i64 %r
  %b0 = mul i64 %w, %q
  %b = add i64 %b0, %mn
  %ex = zext i1 %lt to i64
  %len = add i64 %q, %ex
  %e = add i64 %b, %len
  call void %fn(i64 %b, i64 %e, ptr %cl)
  ret void
}}

; dynamic chunks: claim [b, b + chunk) from rt_job_next until the range is used up
define internal void @rt_run_dynamic(ptr %fn, ptr %cl, i64 %n, i64 %chunk) {{
entry:
  br label %claim
claim:
  %b = atomicrmw add ptr @rt_job_next, i64 %chunk monotonic
  %more = icmp slt i64 %b, %n
  br i1 %more, label %run, label %done
run:
  %e0 = add i64 %b, %chunk
  %over = icmp sgt i64 %e0, %n
  %e = select i1 %over, i64 %n, i64 %e0
  call void %fn(i64 %b, i64 %e, ptr %cl)
  br label %claim
done:
  ret void
}}

; this thread's share of the posted job: static chunk w of c, or dynamic chunks
define internal void @rt_run_share(ptr %fn, ptr %cl, i64 %n, i64 %c, i64 %w, i64 %chunk) {{
entry:
  %static = icmp eq i64 %chunk, 0
  br i1 %static, label %st, label %dyn
st:
  call void @rt_run_chunk(ptr %fn, ptr %cl, i64 %n, i64 %c, i64 %w)
  ret void
dyn:
  call void @rt_run_dynamic(ptr %fn, ptr %cl, i64 %n, i64 %chunk)
  ret void
}}

define internal ptr @rt_worker(ptr %arg) {{
entry:
  %w = ptrtoint ptr %arg to i64
  %go = getelementptr inbounds [{MAXT} x [16 x i32]], ptr @rt_workers, i64 0, i64 %w, i64 0
  %slp = getelementptr inbounds [{MAXT} x [16 x i32]], ptr @rt_workers, i64 0, i64 %w, i64 1
  br label %loop
loop:
  %seen = phi i32 [ 0, %entry ], [ %g, %acked ]
  call void @rt_wait_ne(ptr %go, i32 %seen, ptr %slp)
  %g = load atomic i32, ptr %go acquire, align 4
  %sd = load atomic i32, ptr @rt_shutdown acquire, align 4
  %stop = icmp ne i32 %sd, 0
  br i1 %stop, label %exit, label %work
work:
  %fn = load ptr, ptr @rt_job_fn, align 8
  %cl = load ptr, ptr @rt_job_cl, align 8
  %n = load i64, ptr @rt_job_n, align 8
  %c = load i64, ptr @rt_job_c, align 8
  %ch = load i64, ptr @rt_job_chunk, align 8
  call void @rt_run_share(ptr %fn, ptr %cl, i64 %n, i64 %c, i64 %w, i64 %ch)
  %cd = atomicrmw add ptr @rt_chunks_done, i64 1 monotonic
  %r = atomicrmw sub ptr @rt_remaining, i32 1 seq_cst
  %last = icmp eq i32 %r, 1
  br i1 %last, label %check, label %acked
check:
  %cs = load atomic i32, ptr @rt_caller_sleeping seq_cst, align 4
  %csb = icmp ne i32 %cs, 0
  br i1 %csb, label %wake, label %acked
wake:
  call void @rt_futex_wake(ptr @rt_remaining)
  br label %acked
acked:
  br label %loop
exit:
  ret ptr null
}}

; start workers 1 .. want (runs under the busy flag); returns how many are running
define internal i64 @rt_ensure_workers(i64 %want) {{
entry:
  %st = load i64, ptr @rt_started, align 8
  %closed = load atomic i32, ptr @rt_closed acquire, align 4
  %isclosed = icmp ne i32 %closed, 0
  %enough = icmp sge i64 %st, %want
  %skip = or i1 %isclosed, %enough
  br i1 %skip, label %out, label %spawn
spawn:
  %w = phi i64 [ %st, %entry ], [ %w1, %ok ]
  %w1 = add i64 %w, 1
  %go = getelementptr inbounds [{MAXT} x [16 x i32]], ptr @rt_workers, i64 0, i64 %w1, i64 0
  %slp = getelementptr inbounds [{MAXT} x [16 x i32]], ptr @rt_workers, i64 0, i64 %w1, i64 1
  store i32 0, ptr %go, align 4
  store i32 0, ptr %slp, align 4
  %tid = getelementptr inbounds [{MAXT} x i64], ptr @rt_threads, i64 0, i64 %w1
  %arg = inttoptr i64 %w1 to ptr
  %rc = call i32 @pthread_create(ptr %tid, ptr null, ptr @rt_worker, ptr %arg)
  %failed = icmp ne i32 %rc, 0
  br i1 %failed, label %out, label %ok
ok:
  store i64 %w1, ptr @rt_started, align 8
  %more = icmp slt i64 %w1, %want
  br i1 %more, label %spawn, label %out
out:
  %n = load i64, ptr @rt_started, align 8
  ret i64 %n
}}

; a static loop: one equal chunk per thread (grain 0), or ``grain`` chunks per thread claimed in
; order, so that a thread whose core runs slower (a busy sibling hyperthread, a preempted vCPU)
; leaves its remaining chunks to the others instead of making every thread wait for it
define void @{ENTRY}(ptr %fn, ptr %cl, i64 %n) {{
entry:
  %g = load atomic i64, ptr @rt_grain monotonic, align 8
  %a32 = load atomic i32, ptr @rt_active monotonic, align 4
  %a = sext i32 %a32 to i64
  %plain = icmp slt i64 %g, 1
  %solo = icmp slt i64 %a, 2
  %nobal = or i1 %plain, %solo
  br i1 %nobal, label %even, label %balanced
even:
  call void @rt_launch(ptr %fn, ptr %cl, i64 %n, i64 0, i64 %n)
  ret void
balanced:
  %parts = mul i64 %a, %g
  %q = sdiv i64 %n, %parts  ; the dynamic entry takes a chunk under 1 as 1
  call void @{DYNAMIC_ENTRY}(ptr %fn, ptr %cl, i64 %n, i64 %q)
  ret void
}}

define void @tecomp_pool_set_grain(i64 %grain) {{
  store atomic i64 %grain, ptr @rt_grain monotonic, align 8
  ret void
}}

define void @{DYNAMIC_ENTRY}(ptr %fn, ptr %cl, i64 %n, i64 %chunk0) {{
  %bad = icmp slt i64 %chunk0, 1
  %chunk = select i1 %bad, i64 1, i64 %chunk0
  %c1 = add i64 %n, %chunk
  %c2 = sub i64 %c1, 1
  %nchunks = sdiv i64 %c2, %chunk
  call void @rt_launch(ptr %fn, ptr %cl, i64 %n, i64 %chunk, i64 %nchunks)
  ret void
}}

; run [0, n) on up to min(threads, nchunks) threads; chunk 0: static chunks, else dynamic
define internal void @rt_launch(ptr %fn, ptr %cl, i64 %n, i64 %chunk, i64 %nchunks) alwaysinline {{
entry:
  %pos = icmp sgt i64 %n, 0
  br i1 %pos, label %check, label %ret
check:
  %a32 = load atomic i32, ptr @rt_active monotonic, align 4
  %a = sext i32 %a32 to i64
  %small = icmp slt i64 %nchunks, %a
  %c0 = select i1 %small, i64 %nchunks, i64 %a
  %one = icmp sle i64 %c0, 1
  br i1 %one, label %serial, label %lock
lock:
  %x = cmpxchg ptr @rt_busy, i32 0, i32 1 acquire monotonic
  %got = extractvalue {{ i32, i1 }} %x, 1
  br i1 %got, label %start, label %serial
start:
  %am1 = sub i64 %a, 1
  %st = call i64 @rt_ensure_workers(i64 %am1)
  %avail = add i64 %st, 1
  %lt = icmp slt i64 %c0, %avail
  %c = select i1 %lt, i64 %c0, i64 %avail
  %one2 = icmp sle i64 %c, 1
  br i1 %one2, label %unlock_serial, label %post
unlock_serial:
  store atomic i32 0, ptr @rt_busy release, align 4
  br label %serial
post:
  store ptr %fn, ptr @rt_job_fn, align 8
  store ptr %cl, ptr @rt_job_cl, align 8
  store i64 %n, ptr @rt_job_n, align 8
  store i64 %c, ptr @rt_job_c, align 8
  store i64 %chunk, ptr @rt_job_chunk, align 8
  ; published to the workers by the seq_cst go bumps below
  store atomic i64 0, ptr @rt_job_next monotonic, align 8
  %cm1 = sub i64 %c, 1
  %cm1w = trunc i64 %cm1 to i32
  store atomic i32 %cm1w, ptr @rt_remaining seq_cst, align 4
  br label %bump
bump:
  %w = phi i64 [ 1, %post ], [ %w1, %bumped ]
  %go = getelementptr inbounds [{MAXT} x [16 x i32]], ptr @rt_workers, i64 0, i64 %w, i64 0
  %slp = getelementptr inbounds [{MAXT} x [16 x i32]], ptr @rt_workers, i64 0, i64 %w, i64 1
  %g = load atomic i32, ptr %go monotonic, align 4
  %g1 = add i32 %g, 1
  store atomic i32 %g1, ptr %go seq_cst, align 4
  %s = load atomic i32, ptr %slp seq_cst, align 4
  %sb = icmp ne i32 %s, 0
  br i1 %sb, label %wake, label %bumped
wake:
  call void @rt_futex_wake(ptr %go)
  br label %bumped
bumped:
  %w1 = add i64 %w, 1
  %more = icmp slt i64 %w1, %c
  br i1 %more, label %bump, label %own
own:
  call void @rt_run_share(ptr %fn, ptr %cl, i64 %n, i64 %c, i64 0, i64 %chunk)
  br label %wait
wait:
  %rem = load atomic i32, ptr @rt_remaining acquire, align 4
  %z = icmp eq i32 %rem, 0
  br i1 %z, label %unlock, label %sleep
sleep:
  call void @rt_wait_ne(ptr @rt_remaining, i32 %rem, ptr @rt_caller_sleeping)
  br label %wait
unlock:
  store atomic i32 0, ptr @rt_busy release, align 4
  br label %ret
serial:
  call void %fn(i64 0, i64 %n, ptr %cl)
  br label %ret
ret:
  ret void
}}

define void @tecomp_pool_set(i32 %active, i64 %spin_ns) {{
  store atomic i32 %active, ptr @rt_active monotonic, align 4
  store atomic i64 %spin_ns, ptr @rt_spin_ns monotonic, align 8
  ret void
}}

define i64 @tecomp_pool_stats(i32 %what) {{
  %is0 = icmp eq i32 %what, 0
  %st = load i64, ptr @rt_started, align 8
  %cd = load atomic i64, ptr @rt_chunks_done monotonic, align 8
  %r = select i1 %is0, i64 %st, i64 %cd
  ret i64 %r
}}

; join every worker; with final != 0 no worker is started again (launches then run serially)
define void @tecomp_pool_shutdown(i32 %final) {{
entry:
  br label %acquire
acquire:
  %x = cmpxchg ptr @rt_busy, i32 0, i32 1 acquire monotonic
  %got = extractvalue {{ i32, i1 }} %x, 1
  br i1 %got, label %signal, label %yield
yield:
  %y = call i32 @sched_yield()
  br label %acquire
signal:
  store atomic i32 %final, ptr @rt_closed release, align 4
  store atomic i32 1, ptr @rt_shutdown seq_cst, align 4
  %st = load i64, ptr @rt_started, align 8
  %any = icmp sgt i64 %st, 0
  br i1 %any, label %bump, label %done
bump:
  %w = phi i64 [ 1, %signal ], [ %w1, %bump ]
  %go = getelementptr inbounds [{MAXT} x [16 x i32]], ptr @rt_workers, i64 0, i64 %w, i64 0
  %g = load atomic i32, ptr %go monotonic, align 4
  %g1 = add i32 %g, 1
  store atomic i32 %g1, ptr %go seq_cst, align 4
  call void @rt_futex_wake(ptr %go)
  %w1 = add i64 %w, 1
  %more = icmp sle i64 %w1, %st
  br i1 %more, label %bump, label %join
join:
  %j = phi i64 [ 1, %bump ], [ %j1, %join ]
  %tid = getelementptr inbounds [{MAXT} x i64], ptr @rt_threads, i64 0, i64 %j
  %t = load i64, ptr %tid, align 8
  %rc = call i32 @pthread_join(i64 %t, ptr null)
  %j1 = add i64 %j, 1
  %jmore = icmp sle i64 %j1, %st
  br i1 %jmore, label %join, label %done
done:
  store i64 0, ptr @rt_started, align 8
  store atomic i32 0, ptr @rt_shutdown seq_cst, align 4
  store atomic i32 0, ptr @rt_busy release, align 4
  ret void
}}

; in a forked child: the workers did not survive the fork
define void @tecomp_pool_after_fork() {{
  call void @rt_scratch_after_fork()
  store i64 0, ptr @rt_started, align 8
  store atomic i32 0, ptr @rt_shutdown seq_cst, align 4
  store atomic i32 0, ptr @rt_busy seq_cst, align 4
  ret void
}}
"""
