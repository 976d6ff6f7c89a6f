"""matmul and its relatives. One primitive (batched ``matmul``); the core turns
PyTorch's 1-D / 2-D / batched cases into it with views: vectors become
matrices by ``unsqueeze``, batch dims broadcast by stride-0 ``expand``."""

from __future__ import annotations

from typing import Any

from .. import dtype as D
from ..shape import broadcast_shapes
from ..tensor import Tensor
from . import views as V
from ..autograd.tape import differentiable
from .._autocast import autocast_inputs, regions as _autocast_regions
from .core import as_view, bad_operand, cast, empty, expand_to, kernel, mixed_devices, view_of


def _fmt(shape: tuple[int, ...]) -> str:
    return "x".join(str(s) for s in shape) if shape else "()"


@differentiable("matmul", inputs=2)
def matmul(a: Tensor, b: Tensor) -> Tensor:
    if _autocast_regions[0]:  # an autocast region is open: products may run in float16
        a, b = autocast_inputs("matmul", a, b)
    if not isinstance(a, Tensor) or not isinstance(b, Tensor):
        raise bad_operand("matmul", b if isinstance(a, Tensor) else a)
    if a._device is not b._device:
        raise mixed_devices("matmul", a, b)
    na, nb = len(a._shape), len(b._shape)
    dev = a._device
    if na == 2 and nb == 2 and a._dtype is b._dtype:
        # fast path: a plain matrix product
        (n, k), (k2, m) = a._shape, b._shape
        if k == k2:
            out = empty((n, m), a._dtype, dev)
            (dev.kernels.get("matmul") or kernel(dev, "matmul"))(out._h, view_of(a), view_of(b))
            return out
    elif na == 1 and nb == 1 and a._dtype is b._dtype and a._shape == b._shape:
        # fast path: a dot product, as a (1, k) @ (k, 1) matmul on views
        (k,) = a._shape
        view = dev.view
        res = empty((1, 1), a._dtype, dev)
        (dev.kernels.get("matmul") or kernel(dev, "matmul"))(
            res._h,
            view(a._storage.buffer, (1, k), (0, a._strides[0]), a._offset, a._dtype),
            view(b._storage.buffer, (k, 1), (b._strides[0], 0), b._offset, b._dtype),
        )
        return as_view(res, (), (), 0)
    if na == 0 or nb == 0:
        raise RuntimeError(
            f"both arguments to matmul need to be at least 1D, but they are {na}D and {nb}D"
        )
    dt = D.result_type(a, b)
    a, b = cast(a, dt), cast(b, dt)
    a2 = V.unsqueeze(a, 0) if na == 1 else a
    b2 = V.unsqueeze(b, 1) if nb == 1 else b
    n, k = a2._shape[-2:]
    k2, m = b2._shape[-2:]
    if k != k2:
        raise RuntimeError(
            f"matmul: shapes {tuple(a._shape)} and {tuple(b._shape)} cannot be multiplied "
            f"({_fmt(a2._shape[-2:])} and {_fmt(b2._shape[-2:])}): inner dimensions {k} and {k2} differ"
        )
    try:
        batch = broadcast_shapes(a2._shape[:-2], b2._shape[:-2])
    except RuntimeError:
        raise RuntimeError(
            f"matmul: shapes {tuple(a._shape)} and {tuple(b._shape)} cannot be multiplied: "
            f"batch dimensions {tuple(a2._shape[:-2])} and {tuple(b2._shape[:-2])} don't broadcast"
        ) from None
    out = empty(batch + (n, m), dt, a._device)
    kernel(a._device, "matmul")(
        out._h, expand_to(a2, batch + (n, k)), expand_to(b2, batch + (k, m))
    )
    # drop the dims that 1-D operands gained
    if na == 1 and nb == 1:
        return as_view(out, (), (), 0)
    if na == 1:
        return V.squeeze(out, -2)
    if nb == 1:
        return V.squeeze(out, -1)
    return out


@differentiable("linear", inputs=3)
def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``x @ weight.T + bias`` (weight (out, in)), recorded as one node whose
    backward gives ``weight`` a contiguous (out, in) gradient directly."""
    out = matmul(x, weight.T)
    return out if bias is None else out.add_(bias) if out._dtype is bias._dtype else out + bias


def mm(a: Tensor, b: Tensor) -> Tensor:
    if a.ndim != 2 or b.ndim != 2:
        raise RuntimeError(f"mm: expected 2-D tensors, got {a.ndim}-D and {b.ndim}-D (shapes {tuple(a._shape)} and {tuple(b._shape)})")
    return matmul(a, b)


def bmm(a: Tensor, b: Tensor) -> Tensor:
    if a.ndim != 3 or b.ndim != 3:
        raise RuntimeError(f"bmm: expected 3-D tensors, got {a.ndim}-D and {b.ndim}-D")
    if a._shape[0] != b._shape[0]:
        raise RuntimeError(f"bmm: batch sizes differ: shapes {tuple(a._shape)} and {tuple(b._shape)}")
    return matmul(a, b)


def mv(a: Tensor, v: Tensor) -> Tensor:
    if a.ndim != 2 or v.ndim != 1:
        raise RuntimeError(f"mv: expected a 2-D matrix and a 1-D vector, got shapes {tuple(a._shape)} and {tuple(v._shape)}")
    return matmul(a, v)


def dot(a: Tensor, b: Tensor) -> Tensor:
    if a.ndim != 1 or b.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {a.ndim}D and {b.ndim}D tensors")
    if a._dtype is not b._dtype:
        raise RuntimeError(f"dot: expected both vectors to have same dtype, but found {a._dtype.name} and {b._dtype.name}")
    if a._shape != b._shape:
        raise RuntimeError(f"inconsistent tensor size, expected tensor [{a._shape[0]}] and src [{b._shape[0]}] to have the same number of elements")
    return matmul(a, b)


inner = dot


def outer(a: Tensor, b: Tensor) -> Tensor:
    if a.ndim != 1 or b.ndim != 1:
        raise RuntimeError(f"outer: expected 1-D vectors, got shapes {tuple(a._shape)} and {tuple(b._shape)}")
    from .elementwise import mul

    return mul(V.unsqueeze(a, 1), V.unsqueeze(b, 0))


ger = outer


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
        from ..shape import prod

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


METHODS = ["matmul", "mm", "bmm", "mv", "dot", "outer", "inner"]
