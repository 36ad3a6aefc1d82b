"""ONNX Einsum: the equation parsed once at import (:func:`parse_einsum`), then lowered to one
tecomp compute that sums the product of its operands over the letters the output drops
(:func:`lower_einsum`). No rewriting into matmuls is needed: the search schedules the sum like
any reduction, and factors a product of three or more operands into cheaper partial sums
(:mod:`tecomp.search.factor_sketch`)."""
from __future__ import annotations

from dataclasses import dataclass

from .. import ir
from .graph import Op

__all__ = ["EinsumSpec", "parse_einsum", "lower_einsum", "einsum"]

_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


@dataclass(frozen=True)
class EinsumSpec:
    """An equation with its ellipses expanded: each operand's letters, the output's letters and
    each letter's size (the largest over operands: a size-1 ellipsis dimension broadcasts)."""
    inputs: tuple
    output: str
    sizes: tuple  # ((letter, size), ...)

    def size(self, letter: str) -> int:
        return dict(self.sizes)[letter]


def parse_einsum(equation: str, shapes) -> EinsumSpec:
    """Parse ``equation`` (numpy's einsum grammar, with ``...`` and the implicit output) for
    operands of ``shapes``.

    Raises
    ------
    ValueError
        A malformed equation, a wrong operand count or rank, or sizes that disagree.
    """
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise ValueError(f"equation {equation!r} has {len(terms)} operands, got {len(shapes)}")
    used = set(c for c in eq if c.isalpha())
    spare = [c for c in _LETTERS if c not in used]
    n_ell = max([len(s) - (len(t) - 3) for t, s in zip(terms, shapes) if "..." in t] or [0])
    ell = "".join(spare[:n_ell])
    expanded = []
    for t, s in zip(terms, shapes):
        if t.count("...") > 1 or not all(c.isalpha() for c in t.replace("...", "")):
            raise ValueError(f"malformed operand {t!r} in {equation!r}")
        if "..." in t:
            k = len(s) - (len(t) - 3)
            if k < 0:
                raise ValueError(f"operand {t!r} has rank {len(s)}")
            t = t.replace("...", ell[n_ell - k:])
        if len(t) != len(s):
            raise ValueError(f"operand {t!r} of {equation!r} has rank {len(s)}")
        expanded.append(t)
    if arrow:
        if rhs.count("...") > 1 or not all(c.isalpha() for c in rhs.replace("...", "")):
            raise ValueError(f"malformed output {rhs!r} in {equation!r}")
        out = rhs.replace("...", ell)
        if len(set(out)) != len(out) or any(c not in "".join(expanded) for c in out):
            raise ValueError(f"output {rhs!r} repeats a letter or names one no operand has")
    else:  # implicit: the ellipsis, then the letters that appear once, sorted
        joined = "".join(t.replace("...", "") for t in terms)
        out = ell + "".join(sorted(c for c in set(joined) if joined.count(c) == 1))
    sizes: dict = {}
    for t, s in zip(expanded, shapes):
        for c, n in zip(t, s):
            m = sizes.get(c, 1)
            if n != m and 1 not in (n, m):
                raise ValueError(f"letter {c!r} of {equation!r} has sizes {m} and {n}")
            sizes[c] = max(m, int(n))
    return EinsumSpec(tuple(expanded), out, tuple(sorted(sizes.items())))


def lower_einsum(spec: EinsumSpec, operands: list, name: str):
    """The einsum as one compute: ``out[output letters] = sum over the others of the product
    of the operands`` (a size-1 dimension of an operand reads index 0 where the letter is
    larger: numpy's broadcasting of ellipsis dimensions)."""
    reduced = sorted(set("".join(spec.inputs)) - set(spec.output))
    raxes = {c: ir.reduce_axis(spec.size(c), name=f"r_{c}") for c in reduced}

    def body(*idx):
        at = dict(zip(spec.output, idx), **raxes)
        term = None
        for t, x in zip(spec.inputs, operands):
            v = x[tuple(at[c] if x.shape[d] == spec.size(c) else 0 for d, c in enumerate(t))]
            term = v if term is None else term * v
        return ir.sum(term, axis=[raxes[c] for c in reduced]) if reduced else term

    shape = tuple(spec.size(c) for c in spec.output)
    return ir.compute(shape, body, name=name, tag="einsum" if reduced else "elemwise")


def einsum(ctx, node, attrs):
    """The ONNX converter: an ``Op.EINSUM`` node carrying the parsed spec."""
    if "equation" not in attrs:
        ctx.fail("Einsum needs an equation")
    ins = [i for i in node.input if i]
    dts = {ctx.value(i).dtype for i in ins}
    if len(dts) != 1:
        ctx.fail(f"operand types differ: {sorted(str(d) for d in dts)}")
    try:
        spec = parse_einsum(attrs["equation"], [ctx.value(i).shape for i in ins])
    except ValueError as e:
        ctx.fail(str(e))
    ctx.emit(Op.EINSUM, ins, {"spec": spec, "equation": attrs["equation"]}, node.output[0])

