"""Text forms of a schedule: the loop structure of a State, and the Python that rebuilds it."""
from __future__ import annotations

from ..ir.loop import Scope
from .state import ComputeLocation, State

__all__ = ["state_str", "steps_python"]


def state_str(state: State) -> str:
    """Loop structure by stage, e.g. ``C: i.0 (16) parallel, j (64) vectorize | at D.i``."""
    lines = []
    for s in state.stages:
        if s.is_placeholder:
            lines.append(f"{s.name}: input")
            continue
        if s.location is ComputeLocation.INLINE:
            lines.append(f"{s.name}: inlined")
            continue
        loops = []
        for it in s.iters:
            ext = it.const_extent if it.const_extent is not None else repr(it.extent)
            ann = "" if it.annotation.name == "NONE" else f" {it.annotation.name.lower()}"
            loops.append(f"{it.name}({ext}){ann}")
        where = ""
        if s.location is ComputeLocation.AT:
            t = state.stages[s.attach[0]]
            where = f"  @ {t.name}.{t.iters[s.attach[1]].name}"
        scope = "" if s.scope is Scope.GLOBAL else f" [{s.scope.value}]"
        lines.append(f"{s.name}{scope}: {', '.join(loops)}{where}")
    return "\n".join(lines)


def steps_python(dag, steps) -> str:
    """Python that rebuilds the schedule: ``s = tc.Schedule(dag)`` followed by one call per step."""
    state = State(dag)
    lines = ["s = tc.Schedule(dag)"]
    for step in steps:
        lines.append(step.python(state))
        state.apply(step)
    return "\n".join(lines)
