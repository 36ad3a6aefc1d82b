"""The sketch-rule interface: holes, sketches under construction and the rule protocol. Kept apart
from :mod:`.sketch` (the CPU rules and generation) so that rule modules for other stage kinds
(:mod:`.sparse_sketch`, :mod:`.gpu_sketch`) build on it without import cycles."""
from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field

from ..schedule.compute_steps import CacheReadStep
from ..schedule.state import ScheduleError, State
from ..schedule.steps import SplitStep

__all__ = ["Sketch", "TileHole", "FollowHole", "RuleResult", "SketchRule", "PartialSketch",
           "SkipStage", "enumerate_sketches"]


@dataclass(frozen=True)
class TileHole:
    """Split step ``step`` splits a loop of constant ``extent`` into ``parts`` loops; the search
    decides the ``parts - 1`` inner lengths. ``vector``: the loop whose innermost part is the
    innermost loop of its stage's tile (the one annotation vectorizes). ``covers``: the inner
    lengths span the whole extent, the outermost loop has one iteration (fused rows whose
    accumulator is computed at the outer tile: a tile of whole rows keeps its region exact, a
    tile within a row would need a box of two rows; :func:`~.register_tile.cover`). ``batch``:
    the loop's axis indexes every tensor the stage reads (:func:`~.analysis.batch_axes`), so a
    register tile takes its rows elsewhere when it can."""
    step: int
    extent: int
    parts: int
    vector: bool = field(default=False, kw_only=True)
    covers: bool = field(default=False, kw_only=True)
    batch: bool = field(default=False, kw_only=True)


@dataclass(frozen=True)
class FollowHole:
    """Split step ``step`` copies the tiling of split ``src``: its lengths are the products of the
    source's inner lengths over ``groups`` (``(start, stop)`` ranges), e.g. a consumer following a
    producer's first tile level. ``scale`` multiplies the last (innermost) length: the producer
    loop counts one stride phase, the consumer's rows hold all of them (a transposed conv).
    ``step`` may also be a packing cache read: its pack factor is the first length (a copy
    packed in panels of the reader's column tile)."""
    step: int
    src: int
    groups: tuple
    scale: int = 1


@dataclass
class Sketch:
    """A step list whose holes (by step index) annotation fills; replayable with placeholder
    lengths, which gives the loop structure."""
    name: str
    steps: list
    holes: dict = field(default_factory=dict)

    def with_lengths(self, tiles: dict) -> list:
        """The steps with every hole filled (``tiles``: step index -> inner lengths)."""
        out = list(self.steps)
        for idx, h in self.holes.items():
            st = out[idx]
            if isinstance(h, FollowHole):
                src = tiles[h.src]
                lengths = tuple(_prod(src[a:b]) for a, b in h.groups)
                lengths = lengths[:-1] + (lengths[-1] * h.scale,)
            else:  # a TileHole, or another kind whose lengths the annotation put in ``tiles``
                lengths = tuple(tiles[idx])
            out[idx] = dataclasses.replace(st, pack=(st.pack[0], lengths[0])) \
                if isinstance(st, CacheReadStep) else \
                SplitStep(st.stage_id, st.iter_id, lengths, st.inner_to_outer)
        return out


def _prod(xs) -> int:
    n = 1
    for x in xs:
        n *= x
    return n


class PartialSketch:
    """A sketch under construction, what every rule receives: the state (with placeholder lengths)
    and the sketch. ``apply(step, hole)`` applies a step and records it (with the hole that will
    fill its numbers, if any); ``copy()`` branches; ``tag(name)`` names the sketch."""

    def __init__(self, state: State, sketch: Sketch):
        self.state, self.sketch = state, sketch

    def copy(self) -> "PartialSketch":
        return PartialSketch(self.state.copy(), Sketch(self.sketch.name, list(self.sketch.steps),
                                                  dict(self.sketch.holes)))

    def apply(self, step, hole=None) -> int:
        self.state.apply(step)
        self.sketch.steps.append(step)
        idx = len(self.sketch.steps) - 1
        if hole is not None:
            self.sketch.holes[idx] = hole(idx)
        return idx

    def tag(self, name: str) -> None:
        self.sketch.name = f"{self.sketch.name}+{name}" if self.sketch.name else name


class RuleResult(enum.Enum):
    SKIP = 0
    APPLY = 1
    APPLY_AND_SKIP_REST = 2


class SketchRule:
    """One sketch rule: ``meet`` decides, ``apply`` returns ``[(partial, next_stage), ...]``."""
    name = ""

    def meet(self, p: PartialSketch, sid: int, task) -> RuleResult:
        raise NotImplementedError

    def apply(self, p: PartialSketch, sid: int, task) -> list:
        raise NotImplementedError


class SkipStage(SketchRule):
    """The last rule of every list: leave the stage as it is and go on to the previous one."""
    name = "skip"

    def meet(self, p, sid, task):
        return RuleResult.APPLY

    def apply(self, p, sid, task):
        return [(p, sid - 1)]


def enumerate_sketches(task, rules, max_sketches: int = 64) -> list:
    """All sketches of ``task.dag`` under ``rules`` (tried in order at every stage, from the
    output back to the inputs: Ansor's enumeration), at most ``max_sketches``."""
    start = PartialSketch(State(task.dag), Sketch("", []))
    queue = [(start, len(start.state.stages) - 1)]
    done = []
    while queue:
        p, sid = queue.pop(0)
        if sid < 0:
            done.append(p.sketch)
            if len(done) >= max_sketches:
                break
            continue
        for rule in rules:
            res = rule.meet(p, sid, task)
            if res is RuleResult.SKIP:
                continue
            try:
                queue.extend(rule.apply(p.copy(), sid, task))
            except ScheduleError:
                continue  # the rule does not fit this stage after all
            if res is RuleResult.APPLY_AND_SKIP_REST:
                break
    for sk in done:
        sk.name = sk.name or "default"
    return done
