"""``gradcheck`` / ``gradgradcheck``: the backward rules against finite differences.

For every input that requires grad, every element is nudged by +-eps (in place,
through any strides) and the central difference of every output element gives
the numerical Jacobian; the analytical one comes from one ``autograd.grad`` per
output element. They must agree within ``atol + rtol * |numerical|``; when they
don't, the report names the worst element: which input and output, where, both
values.
"""

from __future__ import annotations

import itertools
import warnings
from typing import Any, Callable, Sequence

from ..tensor import Tensor
from .grad_mode import enable_grad, no_grad


class GradcheckError(RuntimeError):
    """A Jacobian mismatch (``gradcheck(..., raise_exception=True)``)."""


def _tensors(x: Any) -> tuple[Any, ...]:
    return (x,) if isinstance(x, Tensor) else tuple(x)


def _flat_values(outs: Sequence[Any]) -> list[float]:
    vals: list[float] = []
    for o in outs:
        if isinstance(o, Tensor) and o._dtype.kind == "f":
            vals.extend(float(v) for v in o.detach().numpy().reshape(-1))
    return vals


def _coords(shape: tuple[int, ...]) -> list[tuple[int, ...]]:
    return list(itertools.product(*[range(n) for n in shape])) if shape else [()]


def _numerical(fn: Callable[..., Any], inputs: tuple[Any, ...], eps: float) -> list[list[list[float]]]:
    """J[i][j][k]: d output element k / d element j of input i."""
    # fn runs with recording on: gradgradcheck's fn is itself a backward
    jac = []
    for x in inputs:
        cols = []
        if isinstance(x, Tensor) and x.requires_grad:
            for c in _coords(tuple(x._shape)):
                with no_grad():
                    orig = float(x[c].item())
                    x[c] = orig + eps
                plus = _flat_values(_tensors(fn(*inputs)))
                with no_grad():
                    x[c] = orig - eps
                minus = _flat_values(_tensors(fn(*inputs)))
                with no_grad():
                    x[c] = orig
                cols.append([(p - m) / (2 * eps) for p, m in zip(plus, minus)])
        jac.append(cols)
    return jac


def _analytical(fn: Callable[..., Any], inputs: tuple[Any, ...]) -> tuple[list[list[list[float]]], list[str]]:
    from ..ops.creation import zeros_like
    from .engine import grad

    with enable_grad():
        outs = [o for o in _tensors(fn(*inputs)) if isinstance(o, Tensor) and o._dtype.kind == "f"]
    diff = [x for x in inputs if isinstance(x, Tensor) and x.requires_grad]
    problems: list[str] = []
    rows: list[list[list[float]]] = []  # per output element: per diff input: flat grad
    for o in outs:
        n = o.numel()
        for k in range(n):
            if not o.requires_grad:
                rows.append([[0.0] * x.numel() for x in diff])
                continue
            seed = zeros_like(o)
            with no_grad():
                seed.view(-1)[k] = 1.0
            gs = grad(o, diff, seed, retain_graph=True, allow_unused=True)
            row = []
            for x, g in zip(diff, gs):
                if g is None:
                    row.append([0.0] * x.numel())
                    continue
                if g._shape != x._shape or g._dtype is not x._dtype or g._device is not x._device:
                    problems.append(
                        f"gradient for an input of shape {tuple(x._shape)} {x._dtype.name} on "
                        f"{x._device} came back as shape {tuple(g._shape)} {g._dtype.name} on {g._device}"
                    )
                row.append([float(v) for v in g.detach().numpy().reshape(-1)])
            rows.append(row)
    # to J[i][j][k]
    jac: list[list[list[float]]] = []
    d = 0
    for x in inputs:
        if isinstance(x, Tensor) and x.requires_grad:
            jac.append([[rows[k][d][j] for k in range(len(rows))] for j in range(x.numel())])
            d += 1
        else:
            jac.append([])
    return jac, problems


def gradcheck(fn: Callable[..., Any], inputs: Any, *, eps: float = 1e-6, atol: float = 1e-5,
              rtol: float = 1e-3, raise_exception: bool = True) -> bool:
    """Check ``fn``'s gradients at ``inputs`` against central finite differences.

    Inputs that require grad should be float64 (a warning says so otherwise:
    finite differences in float32 are too coarse for these tolerances). Returns
    True, or raises GradcheckError (False with ``raise_exception=False``)."""
    inputs = _tensors(inputs)
    for i, x in enumerate(inputs):
        if isinstance(x, Tensor) and x.requires_grad and x._dtype.name != "float64":
            warnings.warn(
                f"Input #{i} requires gradient and is not a double precision floating point "
                f"({x._dtype.name}); gradcheck may fail for precision reasons", stacklevel=2)
    if not any(isinstance(x, Tensor) and x.requires_grad for x in inputs):
        raise ValueError("gradcheck expects at least one input tensor to require gradient")
    num = _numerical(fn, inputs, eps)
    ana, problems = _analytical(fn, inputs)
    if problems:
        return _fail("; ".join(problems), raise_exception)
    worst = None
    for i, (nx, ax) in enumerate(zip(num, ana)):
        if not nx:
            continue
        shape = tuple(inputs[i]._shape)
        coords = _coords(shape)
        for j, (ncol, acol) in enumerate(zip(nx, ax)):
            for k, (n, a) in enumerate(zip(ncol, acol)):
                err = abs(a - n) - (atol + rtol * abs(n))
                if not (err <= 0) and (worst is None or not (err <= worst[0])):
                    worst = (err, i, coords[j], k, a, n)
    if worst is None:
        return True
    _, i, c, k, a, n = worst
    return _fail(
        f"Jacobian mismatch for output element {k} with respect to input {i} at index "
        f"{c}: analytical {a!r} vs numerical {n!r} (difference {abs(a - n):.3g}, allowed "
        f"atol={atol} + rtol={rtol} * |numerical|)", raise_exception)


def _fail(msg: str, raise_exception: bool) -> bool:
    if raise_exception:
        raise GradcheckError(msg)
    return False


def gradgradcheck(fn: Callable[..., Any], inputs: Any, grad_outputs: Any = None, *,
                  eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3,
                  raise_exception: bool = True, seed: int = 0) -> bool:
    """Check second derivatives: gradcheck of ``v -> grad(fn(x), x, v,
    create_graph=True)`` over the inputs and the output gradients ``v`` (random
    when not given). Hessian-vector products are what this compares."""
    from ..ops.creation import randn
    from ..random import Generator
    from .engine import grad

    inputs = _tensors(inputs)
    with enable_grad():
        outs = [o for o in _tensors(fn(*inputs)) if isinstance(o, Tensor) and o._dtype.kind == "f"]
    if grad_outputs is None:
        gen = Generator().manual_seed(seed)
        grad_outputs = tuple(
            randn(o._shape, generator=gen, dtype=o._dtype, device=o._device).requires_grad_()
            for o in outs)
    else:
        grad_outputs = _tensors(grad_outputs)
    n_in = len(inputs)
    diff_idx = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]

    def first_grads(*args: Any) -> tuple[Tensor, ...]:
        xs, vs = args[:n_in], args[n_in:]
        ys = [o for o in _tensors(fn(*xs)) if isinstance(o, Tensor) and o._dtype.kind == "f"]
        diff = [xs[i] for i in diff_idx]
        pairs = [(y, v) for y, v in zip(ys, vs) if y.requires_grad]
        if not pairs:
            return tuple(x.detach() * 0 for x in diff)
        gs = grad([y for y, _ in pairs], diff, [v for _, v in pairs], create_graph=True,
                  allow_unused=True)
        from ..ops.creation import zeros_like

        return tuple(g if g is not None else zeros_like(x) for g, x in zip(gs, diff))

    return gradcheck(first_grads, tuple(inputs) + tuple(grad_outputs), eps=eps, atol=atol,
                     rtol=rtol, raise_exception=raise_exception)
