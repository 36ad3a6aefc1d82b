"""Replay with shared prefixes: the search materializes thousands of candidates per round, and a
mutant shares most of its steps with its parent (all of them up to the mutated decision, often all
but a few annotations). A :class:`ReplayCache` keeps the state after each step it applied, keyed by
(state before, step), so replaying a step list applies only the steps no earlier replay applied
after the same prefix. A state depends only on the DAG and the steps (replay is deterministic), so
a cached state is the state a full replay would give.

A state being replayed through the cache carries its node (the prefix it is the state of); a state
changed behind the cache's back (``state.apply``) is recognized by its step count and applies its
later steps uncached.
"""
from __future__ import annotations

import itertools
from collections import OrderedDict

from .state import ScheduleError, State

__all__ = ["ReplayCache", "REPLAY_CACHE"]

_FAILED = object()


class ReplayCache:
    """States after (prefix, step), of any DAG; ``size`` states at most (least recently used go
    first, and with them the last reference to a DAG no longer tuned)."""

    def __init__(self, size: int = 16384):
        self.size = size
        # (node, step) -> (node, State or _FAILED, message); a node is a prefix: the DAG itself
        # for no steps, else a number no other prefix of any DAG has
        self.table: OrderedDict = OrderedDict()
        self._ids = itertools.count(1)
        self.hits = self.misses = 0

    def start(self, dag) -> State:
        """The DAG's default state, to be replayed through :meth:`apply`."""
        st = State(dag)
        st._replay_node = (dag, 0)
        return st

    def replay(self, dag, steps) -> State:
        """``State.replay(dag, steps)``, with the prefixes seen before taken from the cache."""
        st = self.start(dag)
        for step in steps:
            self.apply(st, step)
        return st

    def apply(self, state: State, step) -> None:
        """``state.apply(step, atomic=False)``: on a failure the state is unusable, as there. The
        stage objects of ``state`` stay the same objects (their contents change), and stages are
        inserted into its list in place, as a plain apply does: callers iterate over them."""
        node = state.__dict__.get("_replay_node")
        try:
            key = None if node is None or node[1] != len(state.steps) else (node[0], step)
            hit = None if key is None else self.table.get(key)
        except TypeError:  # an unhashable step (a list where a tuple belongs): no caching
            key = hit = None
        if hit is not None:
            self.hits += 1
            self.table.move_to_end(key)
            nid, snap, msg = hit
            if snap is _FAILED:
                state._replay_node = None
                raise ScheduleError(msg)
            _assign(state, snap)
            state._replay_node = (nid, len(state.steps))
            return
        state._replay_node = None
        if key is None:
            state.apply(step, atomic=False)
            return
        self.misses += 1
        try:
            state.apply(step, atomic=False)
        except ScheduleError as e:
            self._put(key, (next(self._ids), _FAILED, str(e)))
            raise
        nid = next(self._ids)
        self._put(key, (nid, state.copy(), None))
        state._replay_node = (nid, len(state.steps))

    def _put(self, key, value) -> None:
        self.table[key] = value
        if len(self.table) > self.size:
            self.table.popitem(last=False)

    def clear(self) -> None:
        self.table.clear()


def _assign(state: State, snap: State) -> None:
    """Make ``state`` equal to ``snap`` (a descendant of it by one step), keeping its stage objects
    (matched by tensor, which identifies a stage across steps) and its stage list object."""
    live = {id(s.tensor): s for s in state.stages}
    stages = []
    for src in snap.stages:
        new = src.copy()
        dst = live.get(id(src.tensor))
        if dst is None:
            dst = new
        else:
            dst.__dict__.clear()
            dst.__dict__.update(new.__dict__)
        stages.append(dst)
    state.stages[:] = stages
    state.steps[:] = snap.steps


#: the cache the search replays through
REPLAY_CACHE = ReplayCache()
