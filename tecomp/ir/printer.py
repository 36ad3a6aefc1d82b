"""Text forms: expressions and loop IR printed like C."""
from __future__ import annotations

from .expr import BinOp, Cast, Const, Expr, Load, Reduce, Select, TensorRead, UnOp, UnOpKind, Var
from .loop import Allocate, Barrier, For, ForKind, IfThenElse, PrimFunc, Seq, Stmt, Store

_NAMES: dict = {}  # display names of loop variables while a function prints (id -> name)


def expr_str(e: Expr) -> str:
    if isinstance(e, Const):
        if e.dtype.is_bool:
            return "true" if e.value else "false"
        if e.dtype.is_float:
            s = repr(e.value)
            return s if e.dtype.bits == 64 else f"{s}{'h' if e.dtype.bits == 16 else 'f'}"
        return str(e.value) if e.dtype.bits == 64 else f"({e.dtype}){e.value}"
    if isinstance(e, Var):
        return _NAMES.get(id(e), e.name)
    if isinstance(e, BinOp):
        if e.op.value in ("min", "max"):
            return f"{e.op.value}({expr_str(e.a)}, {expr_str(e.b)})"
        return f"({expr_str(e.a)} {e.op.value} {expr_str(e.b)})"
    if isinstance(e, UnOp):
        if e.op in (UnOpKind.NEG, UnOpKind.NOT):
            return f"{e.op.value}{expr_str(e.a)}"
        return f"{e.op.value}({expr_str(e.a)})"
    if isinstance(e, Cast):
        return f"({e.dtype}){expr_str(e.a)}"
    if isinstance(e, Select):
        return f"({expr_str(e.cond)} ? {expr_str(e.t)} : {expr_str(e.f)})"
    if isinstance(e, TensorRead):
        return f"{e.tensor.name}[{', '.join(expr_str(i) for i in e.indices)}]"
    if isinstance(e, Load):
        return f"{e.buffer.name}[{', '.join(expr_str(i) for i in e.indices)}]"
    if isinstance(e, Reduce):
        axes = ", ".join(f"{a.name} in [{expr_str(a.begin)}, {expr_str(a.end)})" for a in e.axes)
        return f"{e.kind.value}({expr_str(e.source)}; {axes})"
    return f"<{type(e).__name__}>"


def stmt_str(s: Stmt, indent: int = 0) -> str:
    lines: list = []
    _stmt(s, indent, lines)
    return "\n".join(lines)


def _stmt(s: Stmt, ind: int, out: list) -> None:
    pad = "  " * ind
    if isinstance(s, For):
        if s.kind is ForKind.THREAD_BOUND:
            head = f"{pad}bind {expr_str(s.var)} = {s.thread.value} in [0, {expr_str(s.extent)})"
        else:
            lo = expr_str(s.begin)
            hi = f"{lo} + {expr_str(s.extent)}" if not (isinstance(s.begin, Const) and s.begin.value == 0) \
                else expr_str(s.extent)
            kind = "" if s.kind is ForKind.SERIAL else f"{s.kind.value} "
            v = expr_str(s.var)
            head = f"{pad}{kind}for ({v} = {lo}; {v} < {hi}; ++{v})"
        prag = "".join(f"  // pragma {k}={v}" for k, v in s.pragmas)
        out.append(f"{head} {{{prag}")
        _stmt(s.body, ind + 1, out)
        out.append(f"{pad}}}")
    elif isinstance(s, Store):
        idx = ", ".join(expr_str(i) for i in s.indices)
        out.append(f"{pad}{s.buffer.name}[{idx}] = {expr_str(s.value)};")
    elif isinstance(s, Allocate):
        b = s.buffer
        out.append(f"{pad}{b.scope.value} {b.dtype} {b.name}[{']['.join(map(str, b.shape))}];")
        _stmt(s.body, ind, out)
    elif isinstance(s, Seq):
        for c in s.stmts:
            _stmt(c, ind, out)
    elif isinstance(s, IfThenElse):
        out.append(f"{pad}if ({expr_str(s.cond)}) {{")
        _stmt(s.then, ind + 1, out)
        if s.else_ is not None:
            out.append(f"{pad}}} else {{")
            _stmt(s.else_, ind + 1, out)
        out.append(f"{pad}}}")
    elif isinstance(s, Barrier):
        out.append(f"{pad}__syncthreads();")
    else:
        out.append(f"{pad}<{type(s).__name__}>")


def func_str(f: PrimFunc) -> str:
    """The function as C-like text; loop variables that share a name get ``_1``, ``_2`` suffixes."""
    from .loop import stmts
    params = ", ".join(f"{b.dtype} {b.name}[{']['.join(map(str, b.shape))}]" for b in f.params)
    seen: dict = {}
    names = {}
    for st in stmts(f.body):
        if isinstance(st, For) and id(st.var) not in names:
            n = seen.get(st.var.name, 0)
            seen[st.var.name] = n + 1
            names[id(st.var)] = st.var.name if n == 0 else f"{st.var.name}_{n}"
    _NAMES.clear()
    _NAMES.update(names)
    try:
        return f"void {f.name}({params}) {{\n{stmt_str(f.body, 1)}\n}}"
    finally:
        _NAMES.clear()
