"""Tuning records: one JSON line per measured schedule, and picking the best one for a build.

A record is a serialized step list (``Schedule.records()``) plus its measurement. It lives in the
schedule layer so that building from a log (``tc.build(dag, log=...)``, see
:mod:`tecomp.schedule.log_schedule`) needs nothing of the search.

What we do better than Ansor's record format (docs/ARCHITECTURE.md: records are a schedule concern):

- the workload key is ``ComputeDAG.workload_key``, a structural hash of the computation, not an
  md5 of printed text, so logs survive changes to printing and naming;
- every line carries an integer version ``"v"``; a reader skips lines newer than it understands,
  with a warning, instead of misreading them;
- results carry a named error kind (``"build_timeout"``, ``"wrong_answer"`` ...) and its message;
- a batch is written with one ``write()`` and ``fsync``-ed, and a truncated or garbage line (a
  tuning killed with ``kill -9``) is skipped with a warning naming the file and line, never fatal;
- the random decisions of the search are stored beside the steps, so a record can be mutated and
  replayed, and sparse tasks store a hash of the index data they were tuned with.

Line format (version 1; keys in this order, compact separators)::

    {"v":1,"key":WORKLOAD_KEY,"target":"llvm -mcpu=znver3","steps":[["SP",2,0,[8,4],true],...],
     "decisions":{...},"result":{"costs":[s,...],"error":"none","msg":"","build_s":0.4,"time":T},
     "data":DATA_HASH,"flops":2.0e9}

Required on reading: ``v``, ``key``, ``target``, ``steps``, ``result`` (with ``costs`` and
``error``). ``decisions``, ``data``, ``flops`` and the other result fields default when absent.
A sparse workload's records also carry ``"family":FAMILY_KEY`` (last; written only when not
empty): its workload key with the nnz abstracted (:mod:`tecomp.schedule.record_family`), by which
a DAG of another nnz finds them. Readers that predate it ignore the field.

A record with ``"ctx":CONTEXT`` (format version 2, so that older readers skip it) holds costs
measured in a context rather than alone with warm caches: ``"model:HASH"`` is the per-occurrence
time of the schedule measured in place in a compiled model (:mod:`tecomp.frontend.in_place`);
``"rerank"`` its time alone re-measured over interleaved rounds (:mod:`tecomp.search.rerank`).
Such costs do not compare with plain ones, so :func:`load_records` leaves these records out
unless asked (``contexts=True``); the search never sees them. A build that names the model's
context (``tc.compile_model``) ranks by its in-place records, and every build from a log ranks a
workload's latest re-ranking first (:func:`tecomp.schedule.log_schedule.select_from_log`).
Costs that are not finite are written as ``null`` (strict JSON) and read back as infinity.
"""
from __future__ import annotations

import enum
import gc
import json
import math
import os
import time
import warnings
from dataclasses import dataclass, field

from .target_match import TargetMatch, match_target, same_target

__all__ = ["RECORD_VERSION", "ErrorKind", "MeasureResult", "Record", "append_records",
           "load_records", "best_record", "ranked_records", "ranked_family_records", "measured_keys",
           "warn_other_target"]

#: The newest version this code reads (and writes, for a record with a context; plain records are
#: written as version 1).
RECORD_VERSION = 2

_COMPACT = (",", ":")


class ErrorKind(enum.Enum):
    """Why a measurement has no valid cost (``NONE``: it has one)."""
    NONE = "none"
    INVALID_SCHEDULE = "invalid_schedule"
    BUILD_ERROR = "build_error"
    BUILD_TIMEOUT = "build_timeout"
    RUN_ERROR = "run_error"
    RUN_TIMEOUT = "run_timeout"
    CRASH = "crash"
    WRONG_ANSWER = "wrong_answer"
    #: the machine measuring it was lost (a Ray node died or left) and no other could take it:
    #: nothing is known of the program, so the cost model does not learn from it and a resumed
    #: tuning measures it again (``MeasureResult.measured`` is False)
    NODE_LOST = "node_lost"


@dataclass
class MeasureResult:
    """The measurement of one schedule.

    Attributes
    ----------
    costs : tuple of float
        Seconds per run, one per repeat (empty when it failed).
    error : ErrorKind
    error_msg : str
    build_seconds : float
        Time spent compiling.
    timestamp : float
        ``time.time()`` when measured.
    """
    costs: tuple = ()
    error: ErrorKind = ErrorKind.NONE
    error_msg: str = ""
    build_seconds: float = 0.0
    timestamp: float = field(default_factory=time.time)

    def __post_init__(self):
        self.costs = tuple(map(float, self.costs))
        if not isinstance(self.error, ErrorKind):
            self.error = ErrorKind(self.error)
        self.error_msg = str(self.error_msg)
        self.build_seconds = float(self.build_seconds)
        self.timestamp = float(self.timestamp)

    @property
    def mean_cost(self) -> float:
        """Mean seconds per run; infinity when it failed or has no (finite) costs."""
        if self.error is not ErrorKind.NONE or not self.costs:
            return math.inf
        m = sum(self.costs) / len(self.costs)
        return m if math.isfinite(m) else math.inf

    @property
    def is_valid(self) -> bool:
        return self.error is ErrorKind.NONE and math.isfinite(self.mean_cost)

    @property
    def measured(self) -> bool:
        """Whether this says anything of the program: False for ``NODE_LOST`` (its machine went
        away), which the search does not count as measured and the cost model does not learn."""
        return self.error is not ErrorKind.NODE_LOST


@dataclass
class Record:
    """One tuning-log line: which workload on which target, the schedule's steps (and the search's
    decisions that produced them), and how it measured."""
    workload_key: str
    target: str
    steps: list
    decisions: dict
    result: MeasureResult
    data_hash: str = ""
    flop_count: float = 0.0
    version: int = 1
    #: the workload's family key (nnz abstracted; ``""``: a dense workload, or an older log)
    family: str = ""
    #: where the costs were measured (``""``: alone, the search's measurements; see the module
    #: docstring)
    context: str = ""

    def __post_init__(self):
        self.workload_key = str(self.workload_key)
        self.target = str(self.target)
        # normalize tuples to lists (as they come back from JSON), so a round trip compares equal
        self.steps = _plain(list(self.steps))
        self.decisions = _plain(dict(self.decisions or {}))
        self.data_hash = str(self.data_hash or "")
        self.flop_count = float(self.flop_count)
        self.family = str(self.family or "")
        self.context = str(self.context or "")
        # made on first use and kept: a ranking asks each record of a log for its key (a shipped
        # log holds tens of thousands), and a record's steps are not changed once it is made
        self._key = None

    @property
    def key(self) -> str:
        """The de-duplication key of the schedule (equals ``Schedule.key`` / ``State.key``)."""
        if self._key is None:
            self._key = json.dumps(self.steps, separators=_COMPACT)
        return self._key

    @property
    def cost(self) -> float:
        return self.result.mean_cost

    def to_json(self) -> str:
        """The record as one line of compact JSON (no trailing newline)."""
        r = self.result
        obj = {
            "v": 2 if self.context else 1,
            "key": self.workload_key,
            "target": self.target,
            "steps": self.steps,
            "decisions": self.decisions,
            "result": {"costs": [c if math.isfinite(c) else None for c in r.costs],
                       "error": r.error.value, "msg": r.error_msg, "build_s": r.build_seconds,
                       "time": r.timestamp},
            "data": self.data_hash,
            "flops": self.flop_count,
        }
        if self.family:
            obj["family"] = self.family
        if self.context:
            obj["ctx"] = self.context
        return json.dumps(obj, separators=_COMPACT, allow_nan=False)

    @staticmethod
    def from_json(line: str) -> "Record":
        """Parse one line; ``ValueError`` with the reason when it is not a record this version
        reads (bad JSON, missing keys, wrong types, a newer format version)."""
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"not valid JSON ({e.msg} at column {e.colno})") from None
        except RecursionError:  # [[[[...]]]]: json's parser recurses once per level
            raise ValueError("JSON nested too deeply") from None
        if not isinstance(obj, dict):
            raise ValueError(f"a record is a JSON object, got {type(obj).__name__}")
        if "v" not in obj:
            raise ValueError("no format version key 'v'")
        v = obj["v"]
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ValueError(f"format version {v!r} is not a positive integer")
        if v > RECORD_VERSION:
            raise ValueError(f"record format version {v} is newer than this tecomp reads "
                             f"(up to {RECORD_VERSION}); upgrade tecomp to read it")
        missing = [k for k in ("key", "target", "steps", "result") if k not in obj]
        if missing:
            raise ValueError(f"missing key(s) {', '.join(map(repr, missing))}")
        res = obj["result"]
        if not isinstance(res, dict):
            raise ValueError("'result' must be an object")
        missing = [k for k in ("costs", "error") if k not in res]
        if missing:
            raise ValueError(f"'result' is missing key(s) {', '.join(map(repr, missing))}")
        if not isinstance(obj["key"], str) or not isinstance(obj["target"], str):
            raise ValueError("'key' and 'target' must be strings")
        if not isinstance(obj.get("family", ""), str):
            raise ValueError("'family' must be a string")
        if not isinstance(obj.get("ctx", ""), str):
            raise ValueError("'ctx' must be a string")
        steps = obj["steps"]
        if not isinstance(steps, list) or not all(isinstance(s, list) and s and
                                                  isinstance(s[0], str) for s in steps):
            raise ValueError("'steps' must be a list of step records like "
                             "[\"SP\", 2, 0, [8], true]")
        decisions = obj.get("decisions", {})
        if not isinstance(decisions, dict):
            raise ValueError("'decisions' must be an object")
        costs = res["costs"]
        kinds = set(map(type, costs)) if type(costs) is list else None
        if kinds is None or not kinds <= _COST_TYPES:
            raise ValueError("'result.costs' must be a list of numbers")
        if not all(c is None or c > 0 for c in costs):  # 0, negative, NaN: not a measurement
            raise ValueError(f"'result.costs' must be positive seconds, got {costs[:4]}")
        try:
            error = ErrorKind(res["error"])
        except ValueError:
            raise ValueError(f"unknown error kind {res['error']!r} (known: "
                             f"{', '.join(e.value for e in ErrorKind)})") from None
        if error is ErrorKind.NONE and not costs:
            raise ValueError("a result without error must have costs")
        try:
            result = MeasureResult(
                costs=tuple(math.inf if c is None else c for c in costs), error=error,
                error_msg=res.get("msg", ""), build_seconds=res.get("build_s", 0.0),
                timestamp=res.get("time", 0.0))
            rec = Record(obj["key"], obj["target"], [], {}, result,
                         data_hash=obj.get("data", ""), flop_count=obj.get("flops", 0.0),
                         version=v, family=obj.get("family", ""), context=obj.get("ctx", ""))
            rec.steps, rec.decisions = steps, decisions  # fresh from JSON: no normalizing
            return rec
        except (TypeError, ValueError) as e:
            raise ValueError(f"bad field: {e}") from None


# a cost's types (json.loads gives exact ones, so a bool is not an int here); null is infinity
_COST_TYPES = frozenset((int, float, type(None)))


def _plain(x):
    """``x`` as JSON gives it back: tuples become lists, dict keys strings, enums their values."""
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, enum.Enum):
        return x.value
    if isinstance(x, (bool, int, float, str)) or x is None:
        return x
    if hasattr(x, "item"):  # numpy scalars
        return x.item()
    raise TypeError(f"{type(x).__name__} {x!r} cannot be stored in a tuning record")


# ---------------------------------------------------------------------------------- files
def append_records(path, records) -> int:
    """Append records to the JSON-lines file ``path`` (parents created) and ``fsync`` it.

    The batch is one ``write()`` on a file opened for appending, so a tuning killed at any moment
    (``kill -9``) loses nothing appended before, and at worst leaves one truncated last line, which
    :func:`load_records` skips. If the file does not end with a newline (such a truncated line), a
    newline is written first so the new records are not glued to it. Returns the number appended.
    """
    if isinstance(records, Record):
        records = [records]
    lines = [r.to_json() for r in records]
    path = os.fspath(path)
    parent = os.path.dirname(path)
    if parent:
        os.makedirs(parent, exist_ok=True)
    created = not os.path.exists(path)
    with open(path, "ab+") as f:
        size = f.seek(0, os.SEEK_END)
        lead = b""
        if size:
            f.seek(size - 1)
            if f.read(1) != b"\n":
                lead = b"\n"
        if lines:
            f.write(lead + ("\n".join(lines) + "\n").encode("utf-8"))  # O_APPEND: at the end
            f.flush()
            os.fsync(f.fileno())
    if created and parent:
        _fsync_dir(parent)
    return len(lines)


def _fsync_dir(d: str) -> None:
    try:
        fd = os.open(d, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def load_records(path, contexts: bool = False) -> list:
    """Read the records of a JSON-lines log.

    The records measured in a context (``Record.context``, e.g. in place in a model) are left out
    unless ``contexts`` is True: their costs do not compare with the others.

    Blank lines and lines starting with ``#`` are skipped. A line that is not a record this version
    reads (the truncated last line of a killed run, garbage, a newer format version) is skipped with
    a ``RuntimeWarning`` naming the file, the line number and the reason; it never raises for that.
    A missing file raises ``FileNotFoundError``.
    """
    path = os.fspath(path)
    try:
        # utf-8-sig: a log saved by an editor that writes a byte-order mark keeps its first line
        with open(path, "r", encoding="utf-8-sig", errors="replace", newline=None) as f:
            text = f.read()
    except FileNotFoundError:
        raise FileNotFoundError(f"tuning log {path!r} does not exist") from None
    out = []
    # a log parses into millions of small lists and dicts, none in a cycle: the cyclic collector,
    # triggered by their count, would scan them (and all else alive) again and again
    collecting = gc.isenabled()
    gc.disable()
    try:
        for n, line in enumerate(text.split("\n"), 1):
            s = line.strip()
            if not s or s.startswith("#"):
                continue
            try:
                rec = Record.from_json(s)
            except (ValueError, TypeError, RecursionError, MemoryError) as e:  # whatever it holds
                warnings.warn(f"{path}:{n}: skipped a line that is not a tuning record: {e}",
                              RuntimeWarning, stacklevel=2)
                continue
            if contexts or not rec.context:
                out.append(rec)
    finally:
        if collecting:
            gc.enable()
    return out


def _as_records(records_or_path) -> list:
    if isinstance(records_or_path, (str, bytes, os.PathLike)):
        return load_records(records_or_path)
    return list(records_or_path)


# ---------------------------------------------------------------------------------- queries
def ranked_records(records_or_path, workload_key: str, target) -> tuple:
    """``(records, exact)``: the valid records of ``workload_key`` for ``target``, best (lowest mean
    cost) first, one per distinct schedule. ``exact`` says whether they were tuned for ``target``
    (:func:`~.target_match.match_target`: its string, or an older record of its ``-mcpu`` that
    names no features); when none was, records of other CPUs/archs of the same kind are returned
    with ``exact=False``. Records tuned with CPU features ``target`` lacks are never returned."""
    valid = [r for r in _as_records(records_or_path)
             if r.workload_key == workload_key and r.result.is_valid]
    return _rank(valid, str(target))


def ranked_family_records(records_or_path, family: str, target, exclude_key: str = "") -> tuple:
    """``(records, exact)`` as :func:`ranked_records`, for the records whose family key is
    ``family`` (workloads that differ only in nnz), leaving out workload key ``exclude_key``;
    ``([], True)`` for an empty ``family`` (dense workloads have none)."""
    if not family:
        return [], True
    valid = [r for r in _as_records(records_or_path)
             if r.family == family and r.workload_key != exclude_key and r.result.is_valid]
    return _rank(valid, str(target))


def _rank(valid: list, target: str) -> tuple:
    how = {t: match_target(t, target) for t in {r.target for r in valid}}
    exact = [r for r in valid if how[r.target] is TargetMatch.SAME]
    cands, is_exact = exact, True
    if not exact:
        cands, is_exact = [r for r in valid if how[r.target] is TargetMatch.OTHER], False
    cands.sort(key=lambda r: r.cost)
    seen, out = set(), []
    for r in cands:
        if r.key not in seen:
            seen.add(r.key)
            out.append(r)
    return out, is_exact


def warn_other_target(recs, target, stacklevel):
    tuned = sorted({r.target for r in recs})
    warnings.warn(f"no record was tuned for target {str(target)!r}; using records tuned for "
                  f"{', '.join(map(repr, tuned))} (another CPU/GPU architecture: the schedule is "
                  f"valid but may not be the fastest here; tune for this target to fix)",
                  UserWarning, stacklevel=stacklevel)


def best_record(records_or_path, workload_key: str, target, data_hash: str | None = None):
    """The valid record (error ``NONE``, finite mean cost) of lowest mean cost for ``workload_key``
    and ``target`` (a ``Target`` or its string), or ``None``.

    Records for exactly ``str(target)`` win; if there are none, records of the same target kind
    (the part before the first space, e.g. ``llvm``) are used, with a warning that the log was tuned
    for another CPU/architecture. ``data_hash`` does not filter: a tuned sparse kernel is valid for
    any index data of the same shapes and nnz (the workload key covers those).
    """
    del data_hash  # informational only, see the docstring
    recs, exact = ranked_records(records_or_path, workload_key, target)
    if not recs:
        return None
    if not exact:
        warn_other_target(recs, target, stacklevel=3)
    return recs[0]


def measured_keys(records, workload_key: str | None = None, target=None) -> set:
    """The de-duplication keys (``Schedule.key``) of the schedules in ``records`` (a list or a log
    path), optionally only those of one workload and/or target string: what a resumed tuning must
    not measure again (``NODE_LOST`` records excepted: they were never measured)."""
    t = None if target is None else str(target)
    return {r.key for r in _as_records(records) if r.result.measured
            and (workload_key is None or r.workload_key == workload_key)
            and (t is None or same_target(r.target, t))}
