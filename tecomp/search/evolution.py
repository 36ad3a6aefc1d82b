"""Evolutionary search, ask/tell.

``ask(n)`` builds a population from random annotations of the sketches plus mutants of the best
measured candidates, evolves it for a few generations under the cost model's scores (parents drawn
in proportion to score, a share of the slots kept per sketch, mutation = change one decision and
materialize again), keeps the best
distinct never-measured candidates seen in any generation, and returns ``n`` of them: a few of
each sketch, the best few of the round's fresh random samples, a few of distinct tile
structures, the rest by score, and an epsilon-greedy share picked at random. ``tell`` records
what was measured.
"""
from __future__ import annotations

import gc
import logging
import math

import numpy as np

from .annotate import MAX_INNERMOST, UNROLL_CHOICES, Candidate, sample_tile
from .decisions import Decisions, MutationKind
from .register_tile import keep_inner
from .sketch_rule import TileHole
from .target_search import generate_sketches, materialize

__all__ = ["EvolutionarySearch", "mutate", "MUTATION_WEIGHTS", "unique_sketch_names"]

_LOG = logging.getLogger("tecomp.search")

#: mutation kinds and their weights (Ansor's CPU weights, with vectorization, sparse chunking and
#: weight packing added); the order is the order the kinds are drawn in
MUTATION_WEIGHTS = {MutationKind.TILE: 0.85, MutationKind.UNROLL: 0.05, MutationKind.LOC: 0.05,
                    MutationKind.PAR: 0.03, MutationKind.VEC: 0.02, MutationKind.CHUNK: 0.03,
                    MutationKind.PACK: 0.03}


def _prime_factors(n: int) -> list:
    out, p = [], 2
    while p * p <= n:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    if n > 1:
        out.append(n)
    return out


def mutate(task, sketches, parent: Candidate, rng) -> Candidate | None:
    """One mutation of ``parent``: a decision changed, the candidate materialized again."""
    dec = parent.decisions
    sketch = sketches[parent.sketch]
    kinds = [k for k in MUTATION_WEIGHTS if dec.table(k)]
    if not kinds:
        return None
    w = np.array([MUTATION_WEIGHTS[k] for k in kinds])
    kind = kinds[int(rng.choice(len(kinds), p=w / w.sum()))]
    table = dict(dec.table(kind))
    names = list(table)
    if kind is MutationKind.TILE:  # only the sketch's own holes (decisions may come from a log)
        names = [k for k in names if k in sketch.holes]
        if not names:
            return None
    name = names[int(rng.integers(len(names)))]
    if kind is MutationKind.TILE:
        table[name] = tuple(_mutate_tile(rng, table[name], sketch.holes[name]))
    elif kind is MutationKind.UNROLL:
        table[name] = int(rng.choice(UNROLL_CHOICES))
    else:
        del table[name]  # re-sampled by materialize
    child = materialize(task, parent.sketch, sketch, dec.with_table(kind, table), rng)
    if child is None or child.key == parent.key:
        return None
    return child


def unique_sketch_names(sketches) -> list:
    """The sketches' names, the second and later of a repeated name suffixed ``#2``, ``#3``...:
    the name in a record's decisions must find its sketch again. A multi-stage reduction has
    several sketches of one name (``tile+rfactor`` of either reduction); looked up by name,
    the second one's measured programs came back as the first's, with tile decisions for holes
    that sketch does not have (a ``KeyError`` in ``mutate``)."""
    seen: dict = {}
    out = []
    for sk in sketches:
        n = seen[sk.name] = seen.get(sk.name, 0) + 1
        out.append(sk.name if n == 1 else f"{sk.name}#{n}")
    return out


def _mutate_tile(rng, lengths: list, hole: TileHole) -> list:
    """Move a prime factor between two levels (the product stays the extent); a non-divisible
    tiling is re-sampled instead, half the time keeping its innermost length. A covering hole
    (fused rows: one outer tile) moves factors among its inner levels only; materialization
    would raise a factor moved outside back to the extent."""
    prod = math.prod(lengths)
    if hole.extent % prod:  # non-divisible (a register tile, half the time kept)
        if rng.random() < 0.5:
            return keep_inner(rng, list(lengths), hole.extent, sample_tile)
        return sample_tile(rng, hole.extent, hole.parts)
    if rng.random() < 0.1:
        return sample_tile(rng, hole.extent, hole.parts)
    full = [hole.extent // prod] + list(lengths)
    lo = 1 if hole.covers else 0
    for _ in range(8 if len(full) - lo >= 2 else 0):
        src, dst = lo + rng.choice(len(full) - lo, 2, replace=False)
        if full[src] == 1:
            continue
        f = int(rng.choice(_prime_factors(full[src])))
        new = list(full)
        new[src] //= f
        new[dst] *= f
        if new[-1] <= MAX_INNERMOST:
            return new[1:]
    return sample_tile(rng, hole.extent, hole.parts)


def sketch_signature(search) -> tuple:
    """What decisions mean in a search: its sketches' names and holes. Two tasks with equal
    signatures (one operator at other shapes) can replay each other's decisions (a tile
    length that does not fit the other extent is sampled again)."""
    return tuple((name, tuple(sorted((i, type(h).__name__, getattr(h, "parts", 0))
                                     for i, h in sk.holes.items())))
                 for name, sk in zip(search.sketch_names, search.sketches))


def register_tile(c: Candidate) -> tuple:
    """A candidate's innermost structure: sketch, innermost tile length of every tiled loop and
    vectorization. Candidates that share it differ only in their outer (cache-level) tiling."""
    tiles = c.decisions.table(MutationKind.TILE)
    return (c.sketch, tuple(sorted((k, v[-1]) for k, v in tiles.items() if v)),
            tuple(sorted(c.decisions.table(MutationKind.VEC).items())))


def tile_structure(c: Candidate) -> tuple:
    """A candidate's sketch and the lengths of every tiled loop but the outermost (which follows
    from them)."""
    tiles = c.decisions.table(MutationKind.TILE)
    return (c.sketch, tuple(sorted((k, tuple(v[1:])) for k, v in tiles.items())))


class EvolutionarySearch:
    """The search of one task. ``options`` is a TuningOptions; ``model`` a CostModel."""

    def __init__(self, task, options, model, sketches=None, rng=None):
        self.task, self.options, self.model = task, options, model
        self.sketches = sketches if sketches is not None else generate_sketches(task)
        if not self.sketches:
            raise ValueError(f"no sketch for {task}")
        self.sketch_names = unique_sketch_names(self.sketches)
        self.failures = 0  # candidates dropped because building or mutating them raised
        self.rng = rng if rng is not None else np.random.default_rng(options.seed)
        self.measured: set = set()
        self.elites: list = []  # (cost, sketch index, decisions), best first
        self.valid_per_sketch = [0] * len(self.sketches)  # measured programs that ran
        #: decisions of good programs of similar tasks (set by the task scheduler): replayed here
        #: beside this task's elites, so a layer with few trials starts from its siblings' tiles
        self.transfer: list = []
        #: decisions of this task's best programs measured on another CPU of the same kind (set
        #: by the tuner from the log, best first): they join every round's population, and those
        #: not yet measured here take up to half of a round's picks, so a log carried to a new
        #: machine starts the search from what was fastest on the old one
        self.seeds: list = []

    # ------------------------------------------------------------------ history
    def sketch_index(self, name: str) -> int | None:
        return self.sketch_names.index(name) if name in self.sketch_names else None

    def remember(self, key: str, cost: float, decisions: Decisions | dict | None) -> None:
        """A measured candidate (from this run or a resumed log: ``decisions`` may be a record's
        JSON object)."""
        self.measured.add(key)
        if decisions and math.isfinite(cost):
            decisions = Decisions.coerce(decisions)
            idx = self.sketch_index(decisions.sketch)
            if idx is not None:
                self.valid_per_sketch[idx] += 1
                self.elites.append((cost, idx, decisions))
                self.elites.sort(key=lambda e: e[0])
                del self.elites[256:]

    def tell(self, candidates: list, results: list) -> None:
        for c, r in zip(candidates, results):
            self.remember(c.key, r.mean_cost, self.decisions_of(c))
        self.model.update(candidates, results)

    def decisions_of(self, c: Candidate) -> Decisions:
        """``c``'s decisions naming its sketch, as its record stores them (``.to_json()``)."""
        return c.decisions.with_sketch(self.sketch_names[c.sketch])

    def _guarded(self, what: str, fn, *args):
        """``fn(*args)``, or None when it raises: one candidate or one mutation that fails (a
        bug, or a schedule this version cannot build) is logged and dropped; the search goes on."""
        try:
            return fn(*args)
        except Exception as e:  # noqa: BLE001 - any failure of one candidate drops just it
            self.failures += 1
            if self.failures <= 3 or self.failures % 100 == 0:
                _LOG.warning("%s: %s failed (%s: %s); the candidate is dropped (%d so far)",
                             self.task, what, type(e).__name__, e, self.failures)
            return None

    # ------------------------------------------------------------------ ask
    def random_candidate(self) -> Candidate | None:
        i = int(self.rng.integers(len(self.sketches)))
        return self._guarded("a random annotation", materialize, self.task, i, self.sketches[i],
                             Decisions(), self.rng)

    def ask(self, n: int) -> list:
        # the search allocates millions of short-lived, acyclic objects (expressions, loop nests,
        # states): refcounting frees them, and the cyclic collector, which would also traverse
        # everything long-lived (the replay cache, the model's feature cache) each time it runs,
        # halved the time of an ask when held off until the ask is done
        enabled = gc.isenabled()
        gc.disable()
        try:
            return self._ask(n)
        finally:
            if enabled:
                gc.enable()

    def _ask(self, n: int) -> list:
        opt, rng = self.options, self.rng
        pop = []
        for _ in range(opt.population * 3):
            if len(pop) >= opt.population:
                break
            c = self.random_candidate()
            if c is not None:
                pop.append(c)
        init = list(pop)
        for cost, idx, dec in self.elites[:max(1, int(opt.init_measured_ratio * opt.population))]:
            c = self._guarded("replaying a measured program", materialize, self.task, idx,
                              self.sketches[idx], dec.with_sketch(""), rng)
            if c is not None:
                pop.append(c)
        seeded = []
        for dec in self.seeds:
            idx = self.sketch_index(dec.sketch)
            c = None if idx is None else self._guarded(
                "replaying a program of another target", materialize, self.task, idx,
                self.sketches[idx], dec.with_sketch(""), rng)
            if c is not None:
                pop.append(c)
                if c.key not in self.measured:
                    seeded.append(c)
        for dec in self.transfer:
            idx = self.sketch_index(dec.sketch)
            if idx is None:
                continue
            c = self._guarded("replaying a similar task's program", materialize, self.task, idx,
                              self.sketches[idx], dec.with_sketch(""), rng)
            if c is not None:
                pop.append(c)
        best: dict = {}
        for gen in range(opt.generations + 1):
            if not pop:
                break
            scores = np.asarray(self.model.predict(pop), dtype=float)
            for c, s in zip(pop, scores):
                k = c.key
                if k not in self.measured and (k not in best or best[k][0] < s):
                    best[k] = (s, c)
            if gen == opt.generations:
                break
            pop = self._next_generation(pop, scores)
        ranked = [c for _, c in sorted(best.values(), key=lambda sc: -sc[0])]
        return self._pick(ranked, init, n, seeded)

    def _pick(self, ranked: list, init: list, n: int, seeded: tuple = ()) -> list:
        """``n`` of the round's candidates: the other target's programs not measured here (up
        to half the round, best first), each sketch's best few, the best of the fresh random
        samples (``init``), the best of distinct tile structures, the rest of the ranking
        (``max_per_register_tile`` at a time first), and an epsilon-greedy share of unmeasured
        random samples."""
        opt, rng = self.options, self.rng
        n_eps = min(n, int(round(opt.eps_greedy * n)) or (1 if n > 1 and opt.eps_greedy else 0))
        n_model = n - n_eps
        picked, keys, per_sig, structures = [], set(), {}, set()

        def take_first(quota, accept, pool=ranked, limit=n_model):
            """The first ``quota`` candidates of ``pool`` not picked yet that ``accept``, while
            the round has fewer than ``limit``."""
            for c in pool:
                if quota <= 0 or len(picked) >= limit:
                    break
                if c.key not in keys and accept(c):
                    picked.append(c)
                    keys.add(c.key)
                    sig = register_tile(c)
                    per_sig[sig] = per_sig.get(sig, 0) + 1
                    structures.add(tile_structure(c))
                    quota -= 1

        take_first(n_model // 2, lambda c: True, list(seeded))
        if opt.per_sketch_picks and len(self.sketches) > 1:
            # each sketch's best few first: the model's ranking otherwise collapses onto the
            # sketch it knows best, and a better structure elsewhere is never measured again.
            # A sketch with fewer than sketch_warmup programs measured gets an equal share of
            # the round: a model cannot rank within a sketch it has (almost) no data of
            share = max(opt.per_sketch_picks, n_model // len(self.sketches))
            for i in range(len(self.sketches)):
                quota = (share if self.valid_per_sketch[i] < opt.sketch_warmup
                         else opt.per_sketch_picks)
                take_first(quota, lambda c, i=i: c.sketch == i)
        # the best-scored of the round's fresh random samples: the evolved candidates descend
        # from the measured elites, and a model trained on a mediocre first elite ranks its
        # near-copies first; these are the model's pick among structures nobody measured
        fresh = {c.key for c in init}
        take_first(opt.fresh_picks, lambda c: c.key in fresh)
        # picks of distinct tile structures (every tiled loop's lengths but the outermost): the
        # model's ranking is otherwise topped by near-copies of the best measured program (other
        # outer tiles, unroll depths), and a run whose first elite is mediocre never leaves it
        take_first(opt.diverse_picks, lambda c: tile_structure(c) not in structures)
        # with a cap: diverse picks first, then the rest of the ranking fills up
        if opt.max_per_register_tile:
            take_first(n_model, lambda c: per_sig.get(register_tile(c), 0)
                       < opt.max_per_register_tile)
        take_first(n_model, lambda c: True)
        pool = [c for c in init if c.key not in self.measured and c.key not in keys]
        rng.shuffle(pool)
        take_first(n, lambda c: True, pool, limit=n)  # take_first skips init's duplicates
        return picked

    def _next_generation(self, pop: list, scores: np.ndarray) -> list:
        """Parents drawn in proportion to score; each sketch present keeps ``sketch_share`` of
        the slots, its parents drawn among its own members (niches: otherwise the generations
        collapse onto the sketch the model scores highest, and the other sketches' best picks
        are unevolved random samples)."""
        opt, rng = self.options, self.rng
        w = np.maximum(scores, 0) + 1e-9
        groups = {}
        if opt.sketch_share > 0 and len(self.sketches) > 1:
            for j, c in enumerate(pop):
                groups.setdefault(c.sketch, []).append(j)
        # at most half the population reserved, however many sketches there are
        reserved = (min(int(opt.sketch_share * opt.population),
                        opt.population // (2 * len(groups))) if len(groups) > 1 else 0)
        plan = [m for m in map(np.asarray, groups.values()) for _ in range(reserved)]
        out = []
        everyone = np.arange(len(pop))
        for attempt in range(opt.population * 3):
            if len(out) >= opt.population:
                break
            members = plan[attempt] if attempt < len(plan) else everyone
            p = w[members] / w[members].sum()
            parent = pop[int(members[int(rng.choice(len(members), p=p))])]
            if rng.random() < opt.mutation_prob:
                child = self._guarded("a mutation", mutate, self.task, self.sketches, parent,
                                      rng)
                if child is not None:
                    out.append(child)
            else:
                out.append(parent)
        return out
