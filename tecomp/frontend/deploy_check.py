"""The checks of a model export's manifest (``model.json``) before anything in it is used: JSON
of bounded size, the format and version, and every field's type and range (slots, kernels and
arrays referenced by index must exist). A failure is a ``ValueError`` naming the field."""
from __future__ import annotations

import json
import os

from ..deploy.manifest import MAX_FILE_BYTES, read_regular_file

__all__ = ["read_model_manifest", "check_array_spec"]

_DTYPES = ("float16", "float32", "float64", "int8", "int32", "int64", "bool")
_HEX = set("0123456789abcdef")


class _Bad(ValueError):
    pass


def _need(cond, where: str, what: str) -> None:
    if not cond:
        raise _Bad(f"{where}: {what}")


def _int(x, where, lo=0, hi=None) -> int:
    _need(isinstance(x, int) and not isinstance(x, bool) and x >= lo and (hi is None or x < hi),
          where, f"must be an integer in [{lo}, {hi if hi is not None else 'inf'}), got {x!r}")
    return x


_MAX_STR = 4095


def _str(x, where) -> str:
    _need(isinstance(x, str), where, f"must be a string, got {type(x).__name__}")
    _need(len(x) <= _MAX_STR, where, f"must be a string of at most {_MAX_STR} characters, got "
                                     f"{len(x)}")
    return x


def _list(x, where, item=None) -> list:
    _need(isinstance(x, list), where, f"must be a list, got {type(x).__name__}")
    if item is not None:
        for k, v in enumerate(x):
            item(v, f"{where}[{k}]")
    return x


def _dict(x, where, keys) -> dict:
    _need(isinstance(x, dict), where, f"must be an object, got {type(x).__name__}")
    missing = [k for k in keys if k not in x]
    _need(not missing, where, f"lacks {missing}")
    return x


def _sha(x, where) -> None:
    _need(isinstance(x, str) and len(x) == 64 and set(x) <= _HEX, where, "must be a SHA-256")


def _shape(x, where) -> None:
    _list(x, where, lambda v, w: _int(v, w, 1, 1 << 31))
    _need(len(x) <= 16, where, "has more than 16 dimensions")


def check_array_spec(x, where) -> dict:
    _dict(x, where, ("file", "sha256", "shape", "dtype"))
    _str(x["file"], f"{where}.file")
    _sha(x["sha256"], f"{where}.sha256")
    _list(x["shape"], f"{where}.shape", lambda v, w: _int(v, w, 0, 1 << 31))
    _need(x["dtype"] in _DTYPES, f"{where}.dtype", f"must be one of {_DTYPES}")
    return x


def _check(m: dict) -> None:
    _dict(m, "model.json", ("name", "host", "runtime", "inputs", "outputs", "slots", "kernels",
                            "steps"))
    _str(m["name"], "name")
    h = _dict(m["host"], "host", ("machine", "triple", "data_layout", "cpu", "features"))
    for k in ("machine", "triple", "data_layout", "cpu", "features"):
        _str(h[k], f"host.{k}")
    if m["runtime"] is not None:
        rt = _dict(m["runtime"], "runtime", ("object", "sha256"))
        _str(rt["object"], "runtime.object")
        _sha(rt["sha256"], "runtime.sha256")
    slots = _list(m["slots"], "slots")
    for k, s in enumerate(slots):
        _dict(s, f"slots[{k}]", ("shape", "dtype"))
        _list(s["shape"], f"slots[{k}].shape", lambda v, w: _int(v, w, 0, 1 << 31))
        _need(s["dtype"] in _DTYPES, f"slots[{k}].dtype", f"must be one of {_DTYPES}")
    n_slots = len(slots)
    for k, i in enumerate(_list(m["inputs"], "inputs")):
        _dict(i, f"inputs[{k}]", ("name", "shape", "dtype", "slot"))
        _str(i["name"], f"inputs[{k}].name")
        _int(i["slot"], f"inputs[{k}].slot", 0, n_slots)
        _need(slots[i["slot"]]["shape"] == i["shape"] and slots[i["slot"]]["dtype"] == i["dtype"],
              f"inputs[{k}]", "differs from its slot")
    for k, o in enumerate(_list(m["outputs"], "outputs")):
        _need(isinstance(o, dict) and ("slot" in o or "array" in o), f"outputs[{k}]",
              "needs a slot or an array")
        if "slot" in o:
            _int(o["slot"], f"outputs[{k}].slot", 0, n_slots)
        else:
            check_array_spec(o["array"], f"outputs[{k}].array")
    kernels = _list(m["kernels"], "kernels")
    for k, kd in enumerate(kernels):
        w = f"kernels[{k}]"
        _dict(kd, w, ("workload_key", "symbol", "object", "object_sha256", "dag", "dag_sha256",
                      "steps", "constant_inputs", "loop_ir_sha256", "imports", "parallel"))
        for f in ("workload_key", "symbol", "object", "dag"):
            _str(kd[f], f"{w}.{f}")
        for f in ("object_sha256", "dag_sha256", "loop_ir_sha256"):
            _sha(kd[f], f"{w}.{f}")
        _list(kd["constant_inputs"], f"{w}.constant_inputs", lambda v, ww: _int(v, ww, 0, 4096))
        _list(kd["imports"], f"{w}.imports", _str)
        _need(isinstance(kd["parallel"], bool), f"{w}.parallel", "must be true or false")
        _need(kd["steps"] is None or isinstance(kd["steps"], list), f"{w}.steps",
              "must be a list of schedule steps or null")
    for k, st in enumerate(_list(m["steps"], "steps")):
        w = f"steps[{k}]"
        _dict(st, w, ("kernel", "args", "out", "name", "gather_checks", "constants", "bound"))
        _int(st["kernel"], f"{w}.kernel", 0, len(kernels))
        _list(st["args"], f"{w}.args", lambda v, ww: _int(v, ww, 0, n_slots))
        _int(st["out"], f"{w}.out", 0, n_slots)
        _str(st["name"], f"{w}.name")
        for j, g in enumerate(_list(st["gather_checks"], f"{w}.gather_checks")):
            _need(isinstance(g, list) and len(g) == 3, f"{w}.gather_checks[{j}]",
                  "must be [slot, size, where]")
            _int(g[0], f"{w}.gather_checks[{j}][0]", 0, n_slots)
            _int(g[1], f"{w}.gather_checks[{j}][1]", 1, 1 << 62)
            _str(g[2], f"{w}.gather_checks[{j}][2]")
        _list(st["constants"], f"{w}.constants", check_array_spec)
        _list(st["bound"], f"{w}.bound", check_array_spec)
    _check_dataflow(m)


def _check_dataflow(m: dict) -> None:
    """Every slot a step or an output reads holds a model input or was written by an earlier
    step: a slot nothing writes is uninitialised arena memory (a reordered, emptied or edited step
    list). A Gather check reads one of its step's arguments."""
    written = {i["slot"] for i in m["inputs"]}
    for k, st in enumerate(m["steps"]):
        unwritten = sorted(set(st["args"]) - written)
        _need(not unwritten, f"steps[{k}].args", f"reads slot(s) {unwritten} before any step "
                                                 f"writes them")
        for j, g in enumerate(st["gather_checks"]):
            _need(g[0] in st["args"], f"steps[{k}].gather_checks[{j}]",
                  f"checks slot {g[0]}, which is not an argument of its step")
        written.add(st["out"])
    for k, o in enumerate(m["outputs"]):
        _need("slot" not in o or o["slot"] in written, f"outputs[{k}].slot",
              f"slot {o.get('slot')} is neither a model input nor written by any step")


def read_model_manifest(dirpath: str) -> dict:
    """The checked ``model.json`` of the export directory ``dirpath``."""
    from .deploy_model import FORMAT, MODEL_MANIFEST, VERSION
    mpath = os.path.join(dirpath, MODEL_MANIFEST)
    try:
        raw = read_regular_file(mpath, MAX_FILE_BYTES // 16)
    except FileNotFoundError:
        raise FileNotFoundError(f"{dirpath!r} is not a tecomp model export: no "
                                f"{MODEL_MANIFEST}") from None
    except ValueError as e:
        raise ValueError(f"{mpath}: {e}") from None
    if len(raw) > MAX_FILE_BYTES // 16:
        raise ValueError(f"{mpath}: larger than a model manifest can be")
    try:
        m = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise ValueError(f"{mpath}: not a JSON manifest ({type(e).__name__})") from None
    if not isinstance(m, dict) or m.get("format") != FORMAT:
        raise ValueError(f"{mpath}: not a tecomp model manifest (format {FORMAT!r})")
    if m.get("format_version") != VERSION:
        raise ValueError(f"{mpath}: model format version {m.get('format_version')!r}; this tecomp "
                         f"reads version {VERSION}")
    try:
        _check(m)
    except _Bad as e:
        raise ValueError(f"{mpath}: {e}") from None
    return m
