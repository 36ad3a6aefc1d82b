"""The search's random decisions as a typed value, and their JSON form in the tuning records.

An annotator (:mod:`.annotate`, :mod:`.gpu_annotate`) turns a sketch plus :class:`Decisions` into a
candidate; a mutation (:mod:`.evolution`) changes one entry of one table and materializes again.
The tables (:class:`MutationKind` names them):

- ``tile``: split step index -> inner lengths (outer to inner);
- ``loc``: stage name -> index into the stage's compute-location candidates;
- ``par``: stage name -> outer loops fused into the parallel loop;
- ``vec``: stage name -> inner loops fused into the vectorized loop (GPU: the vector length of a
  cooperative fetch);
- ``unroll``: stage name -> ``auto_unroll_max_step``;
- ``chunk``: stage name -> how a parallel loop over sparse rows is divided;
- ``pack``: input name -> inner tile levels its weight is re-laid out to.

A table an annotator does not use is ``None`` (absent from the JSON), an empty one ``{}``. The JSON
form is the one records have always had (format v1)::

    {"sketch": "tile", "tile": {"0": [2, 4, 8]}, "loc": {}, "par": {"matmul": 1}, ...}

with step indices as strings and lengths as lists; :meth:`Decisions.to_json` writes it (tables in
the order above, entries in the order they were decided) and :meth:`Decisions.from_json` reads it,
dropping entries of the wrong type (the annotator samples them again) so that a damaged log does
not stop a search.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, fields
from typing import Mapping

__all__ = ["Decisions", "MutationKind"]


class MutationKind(enum.Enum):
    """The decision tables (the value is the table's JSON key); a mutation changes one entry of
    one of them. The order is the order of the tables in the JSON."""
    TILE = "tile"
    LOC = "loc"
    PAR = "par"
    VEC = "vec"
    UNROLL = "unroll"
    CHUNK = "chunk"
    PACK = "pack"


def _plain_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _tile_key(k):
    """A tile table key as an int step index, or None when it is not one."""
    if _plain_int(k):
        return k
    if isinstance(k, str) and k.isdigit():
        return int(k)
    return None


def _read_table(kind: MutationKind, raw) -> dict | None:
    if raw is None or not isinstance(raw, Mapping):
        return None
    out = {}
    for k, v in raw.items():
        if kind is MutationKind.TILE:
            idx = _tile_key(k)
            if idx is not None and isinstance(v, (list, tuple)) and all(map(_plain_int, v)):
                out[idx] = tuple(v)
        elif isinstance(k, str) and _plain_int(v):
            out[k] = v
    return out


@dataclass(frozen=True)
class Decisions:
    """The decisions of one candidate. Treat the tables as read-only: :meth:`tables` gives
    copies to edit and :meth:`from_tables` makes the new value.

    Attributes
    ----------
    sketch : str
        The sketch's unique name (:func:`~.evolution.unique_sketch_names`) once the search names
        it; ``""`` in a candidate fresh from an annotator.
    tile : dict of int to tuple of int, or None
        Split step index -> inner lengths.
    loc, par, vec, unroll, chunk, pack : dict of str to int, or None
        Stage (``pack``: input) name -> the decision (see the module docstring).
    """
    sketch: str = ""
    tile: Mapping | None = None
    loc: Mapping | None = None
    par: Mapping | None = None
    vec: Mapping | None = None
    unroll: Mapping | None = None
    chunk: Mapping | None = None
    pack: Mapping | None = None

    def table(self, kind: MutationKind) -> Mapping:
        """The table of ``kind`` (empty when the annotator does not use it)."""
        t = getattr(self, kind.value)
        return {} if t is None else t

    def tables(self, kinds) -> dict:
        """``{kind: a copy of its table}`` for ``kinds`` (missing tables as ``{}``): what an
        annotator fills in."""
        return {k: dict(self.table(k)) for k in kinds}

    @staticmethod
    def from_tables(tables: Mapping, sketch: str = "") -> Decisions:
        """The decisions of ``{MutationKind: table}`` (as :meth:`tables` gives); the tables not
        given are ``None``."""
        return Decisions(sketch, **{k.value: dict(t) for k, t in tables.items()})

    def with_table(self, kind: MutationKind, table: Mapping) -> Decisions:
        """A copy with the table of ``kind`` replaced."""
        return _replace(self, **{kind.value: dict(table)})

    def with_sketch(self, name: str) -> Decisions:
        """A copy naming its sketch ``name``."""
        return _replace(self, sketch=name)

    # ------------------------------------------------------------------ JSON (record format v1)
    def to_json(self) -> dict:
        """The record's ``decisions`` object: ``sketch`` (when named), then each table present,
        step indices as strings and lengths as lists."""
        out: dict = {}
        if self.sketch:
            out["sketch"] = self.sketch
        for kind in MutationKind:
            t = getattr(self, kind.value)
            if t is None:
                continue
            if kind is MutationKind.TILE:
                out[kind.value] = {str(k): list(v) for k, v in t.items()}
            else:
                out[kind.value] = dict(t)
        return out

    @staticmethod
    def from_json(obj) -> Decisions:
        """The decisions of a record's ``decisions`` object (format v1, or this module's
        :meth:`to_json`). Entries and tables of the wrong type are dropped, unknown keys ignored.

        Parameters
        ----------
        obj : dict or None

        Returns
        -------
        Decisions

        Examples
        --------
        >>> d = Decisions.from_json({"sketch": "tile", "tile": {"0": [4, 8]}, "vec": {"C": 1}})
        >>> d.tile, d.vec, d.par
        ({0: (4, 8)}, {'C': 1}, None)
        >>> d.to_json()
        {'sketch': 'tile', 'tile': {'0': [4, 8]}, 'vec': {'C': 1}}
        """
        if isinstance(obj, Decisions):
            return obj
        if not isinstance(obj, Mapping):
            return Decisions()
        sketch = obj.get("sketch", "")
        return Decisions(sketch if isinstance(sketch, str) else "",
                         **{k.value: _read_table(k, obj.get(k.value)) for k in MutationKind})

    @staticmethod
    def coerce(obj) -> Decisions:
        """``obj`` if it is Decisions, else :meth:`from_json` of it (a dict or None)."""
        return Decisions.from_json(obj)


def _replace(d: Decisions, **changes) -> Decisions:
    return Decisions(**{f.name: changes.get(f.name, getattr(d, f.name)) for f in fields(d)})
