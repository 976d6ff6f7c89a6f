"""``einsum``: Einstein summation for one or two operands, by views, sums and one
``matmul``."""

from __future__ import annotations

from typing import Any

from ..shape import prod
from ..tensor import Tensor
from . import views as V
from .linalg import matmul


def einsum(equation: str, *operands: Any) -> Tensor:
    """Einstein summation for one or two operands, by views, sums and one matmul.

    ``"ij,jk->ik"``, ``"bij,bjk->bik"``, ``"i,i->"``, ``"ij->ji"``, ``"ii->i"``,
    implicit outputs (``"ij,jk"``) and ``...`` for leading batch dims.
    """
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(operands):
        raise ValueError(f"einsum(): {len(terms)} operand subscripts in {equation!r} but {len(operands)} operands given")
    if len(terms) > 2:
        raise NotImplementedError("einsum(): more than two operands is not supported; chain two-operand calls")
    # expand "..." into explicit letters unused elsewhere
    spare = iter(c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if c not in eq)
    ell_letters: str | None = None
    new_terms = []
    for term, op in zip(terms, operands):
        if "..." in term:
            nell = op.ndim - (len(term) - 3)
            if ell_letters is None:
                ell_letters = "".join(next(spare) for _ in range(nell))
            elif len(ell_letters) < nell:
                ell_letters = "".join(next(spare) for _ in range(nell - len(ell_letters))) + ell_letters
            term = term.replace("...", ell_letters[len(ell_letters) - nell:])
        if len(term) != op.ndim:
            raise RuntimeError(f"einsum(): the number of subscripts in {term!r} ({len(term)}) does not match the number of dimensions ({op.ndim}) of an operand of shape {tuple(op._shape)}")
        new_terms.append(term)
    terms = new_terms
    if arrow:
        out = rhs.replace("...", ell_letters or "")
    else:
        counts: dict[str, int] = {}
        for t_ in terms:
            for c in t_:
                counts[c] = counts.get(c, 0) + 1
        out = (ell_letters or "") + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in (ell_letters or "")))
    ops = [_take_diagonals(t_, op) for t_, op in zip(terms, operands)]
    terms = [t_ for t_, _ in ops]
    ops = [op for _, op in ops]
    # sum out letters that appear in one operand only and not in the output
    for i in range(len(ops)):
        others = "".join(terms[j] for j in range(len(ops)) if j != i)
        drop = [p for p, c in enumerate(terms[i]) if c not in out and c not in others]
        if drop:
            ops[i] = ops[i].sum(dim=tuple(drop))
            terms[i] = "".join(c for p, c in enumerate(terms[i]) if p not in drop)
    if len(ops) == 1:
        return _arrange(ops[0], terms[0], out)
    (a, ta), (b, tb) = (ops[0], terms[0]), (ops[1], terms[1])
    batch = [c for c in ta if c in tb and c in out]
    contract = [c for c in ta if c in tb and c not in out]
    left = [c for c in ta if c not in tb]
    right = [c for c in tb if c not in ta]
    sizes = {}
    for t_, op in ((ta, a), (tb, b)):
        for c, n in zip(t_, op._shape):
            if c in sizes and sizes[c] != n and n != 1 and sizes[c] != 1:
                raise RuntimeError(f"einsum(): subscript {c!r} has size {sizes[c]} in one operand and {n} in another")
            sizes[c] = n if c not in sizes or sizes[c] == 1 else sizes[c]

    def prep(op: Tensor, t_: str, mid: list[str], last: list[str]) -> Tensor:
        order = [t_.index(c) for c in batch + mid + last]
        p = op.permute(order)
        shape = [sizes[c] for c in batch] + [p._shape[len(batch) + i] for i in range(len(mid) + len(last))]
        p = p.expand(shape)
        nb = len(batch)
        return p.reshape(tuple(shape[:nb]) + (prod(shape[nb:nb + len(mid)]), prod(shape[nb + len(mid):])))

    A = prep(a, ta, left, contract)  # (batch, L, K)
    B = prep(b, tb, contract, right)  # (batch, K, R)
    C = matmul(A, B)
    C = C.reshape(tuple(sizes[c] for c in batch + left + right))
    return _arrange(C, "".join(batch + left + right), out)


def _take_diagonals(term: str, op: Tensor) -> tuple[str, Tensor]:
    while True:
        dup = next((c for c in term if term.count(c) > 1), None)
        if dup is None:
            return term, op
        i = term.index(dup)
        j = term.index(dup, i + 1)
        op = V.diagonal(op, 0, i, j)
        term = "".join(c for p, c in enumerate(term) if p not in (i, j)) + dup


def _arrange(x: Tensor, term: str, out: str) -> Tensor:
    extra = [p for p, c in enumerate(term) if c not in out]
    if extra:
        x = x.sum(dim=tuple(extra))
        term = "".join(c for p, c in enumerate(term) if p not in extra)
    if sorted(term) != sorted(out):
        raise RuntimeError(f"einsum(): output subscripts {out!r} name a letter not in the inputs")
    return x.permute([term.index(c) for c in out]) if term != out else x
