"""One step of an LSTM, GRU or Elman RNN: the gate arithmetic as one kernel, and
``LSTMCell``/``GRUCell``/``RNNCell``'s step as one recorded node.

The gate arithmetic of a step is the backend's composite kernel where it has
one (``lstm_cell``, ``gru_cell`` and their backwards, as
``rtxcore.dispatch.ops`` states them), else the decomposition below: tensor
ops in the order the kernels compute (``rtxcore.dispatch.xp``'s), the
reference every backend falls back to. The recurrences (``_recurrence``) run
it once per time step; ``jit``'s graphs decompose a node with it on a device
without the kernel.

A cell's step (both input products, the gates, the state) is one autograd
Function whose backward is the fused gate gradient and the products' matmuls.
Under ``create_graph`` its backward recomputes the step with recorded ops, so
that the gradient differentiates again.
"""

from __future__ import annotations

from typing import Any, Callable

from .. import dtype as D
from ..autograd.function import Function
from ..autograd.grad_mode import _state
from ..ops.core import empty, expand_to, kernel, own_kernel, view_of
from ..ops.joining import cat, stack
from ..ops.linalg import linear, matmul
from ..tensor import Tensor


def _blocks(t: Tensor, n: int, k: int) -> list[Tensor]:
    return [t[:, j * n:(j + 1) * n] for j in range(k)]


def _float16_in_float32(math: Callable[..., Any]) -> Callable[..., Any]:
    """``math`` computing float16 in float32, each result rounded once (as the
    kernels, and PyTorch, do: ten roundings to half in a row lose 3 digits)."""
    def run(*args: Any) -> Any:
        if args[0]._dtype is not D.float16:
            return math(*args)
        out = math(*(a.float() if isinstance(a, Tensor) else a for a in args))
        return tuple(o.half() for o in out)

    run.__doc__ = math.__doc__
    return run


# -- the decomposition: tensor ops in the kernels' order ----------------------------------------


@_float16_in_float32
def lstm_math(gi: Tensor, gh: Tensor, c_prev: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """(h, c, act) of one LSTM step from its gates' two parts ``gi + gh``."""
    i, f, g, o = _blocks(gi + gh, c_prev._shape[-1], 4)
    i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
    c = f * c_prev + i * g
    return o * c.tanh(), c, stack([i, f, g, o])


@_float16_in_float32
def lstm_back_math(dh: Tensor, dc: Tensor | None, act: Tensor, c: Tensor, c_prev: Tensor
                   ) -> tuple[Tensor, Tensor]:
    """(dgates, dc_prev) of one LSTM step: the gradient of its gates' pre-activations."""
    i, f, g, o = act.unbind(0)
    tc = c.tanh()
    dct = (1 - tc * tc) * o * dh
    if dc is not None:
        dct = dct + dc
    si, sf, _, so = ((1 - act) * act).unbind(0)
    dgates = cat([si * g * dct, sf * c_prev * dct, (1 - g * g) * i * dct, so * tc * dh], 1)
    return dgates, dct * f


@_float16_in_float32
def gru_math(gi: Tensor, gh: Tensor, h_prev: Tensor) -> tuple[Tensor, Tensor]:
    """(h, act) of one GRU step; ``gh`` holds ``b_hh``."""
    n = h_prev._shape[-1]
    rz = (gi[:, :2 * n] + gh[:, :2 * n]).sigmoid()
    r, z = rz[:, :n], rz[:, n:]
    nn_ = (r * gh[:, 2 * n:] + gi[:, 2 * n:]).tanh()
    return (h_prev - nn_) * z + nn_, stack([r, z, nn_])


@_float16_in_float32
def gru_back_math(dh: Tensor, act: Tensor, gh: Tensor, h_prev: Tensor
                  ) -> tuple[Tensor, Tensor, Tensor]:
    """(dgi, dgh, dh * z) of one GRU step (the caller adds ``dgh @ W_hh`` to the last)."""
    n = h_prev._shape[-1]
    r, z, nn_ = act.unbind(0)
    t = 1 - z
    dn = dh * (t * (1 - nn_ * nn_))
    dz = dh * ((h_prev - nn_) * z * t)
    dr = dn * (gh[:, 2 * n:] * r * (1 - r))
    return cat([dr, dz, dn], 1), cat([dr, dz, dn * r], 1), dh * z


# the same with the kernels' signatures (outputs first, written): the recurrences'
# steps on a backend without the kernel, and jit's DECOMPOSE


def _written(math: Callable[..., Any], n_out: int) -> Callable[..., None]:
    def run(*args: Any) -> None:
        for o, v in zip(args[:n_out], math(*args[n_out:])):
            o.copy_(v)

    return run


DECOMPOSE: dict[str, Callable[..., None]] = {
    "lstm_cell": _written(lstm_math, 3), "lstm_cell_backward": _written(lstm_back_math, 2),
    "gru_cell": _written(gru_math, 2), "gru_cell_backward": _written(gru_back_math, 3),
}


# -- one call on tensors: the kernel into fresh outputs, or the decomposition -------------------


def _run(op: str, like: Tensor, shapes: list[tuple[int, ...]], args: tuple[Any, ...],
         math: Callable[..., Any]) -> tuple[Tensor, ...]:
    """Composite ``op`` on ``args``: the backend's kernel into fresh outputs of
    ``shapes``, or ``math`` (recorded, under ``create_graph``)."""
    dev, dt = like._device, like._dtype
    k = own_kernel(dev, op, dt)
    if k is None or _state.enabled:
        return math(*args)
    outs = tuple(empty(s, dt, dev) for s in shapes)
    k(*(o._h for o in outs), *(None if a is None else view_of(a) for a in args))
    return outs


def lstm_cell(gi: Tensor, gh: Tensor, c_prev: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    b, n = c_prev._shape
    return _run("lstm_cell", gi, [(b, n), (b, n), (4, b, n)], (gi, gh, c_prev), lstm_math)


def lstm_cell_backward(dh: Tensor, dc: Tensor | None, act: Tensor, c: Tensor, c_prev: Tensor
                       ) -> tuple[Tensor, Tensor]:
    b, n = c._shape
    return _run("lstm_cell_backward", act, [(b, 4 * n), (b, n)], (dh, dc, act, c, c_prev),
                lstm_back_math)


def gru_cell(gi: Tensor, gh: Tensor, h_prev: Tensor) -> tuple[Tensor, Tensor]:
    b, n = h_prev._shape
    return _run("gru_cell", gi, [(b, n), (3, b, n)], (gi, gh, h_prev), gru_math)


def gru_cell_backward(dh: Tensor, act: Tensor, gh: Tensor, h_prev: Tensor
                      ) -> tuple[Tensor, Tensor, Tensor]:
    b, n = h_prev._shape
    return _run("gru_cell_backward", act, [(b, 3 * n), (b, 3 * n), (b, n)],
                (dh, act, gh, h_prev), gru_back_math)


# -- the cells' steps as one node --------------------------------------------------------------


def fused_step_applies(x: Tensor, states: list[Tensor], weights: list[Tensor | None]) -> bool:
    """Whether a cell's step runs as one node: one float dtype and device for
    everything, nothing empty (else the modules' op-by-op step)."""
    dt, dev = x._dtype, x._device
    return (dt.kind == "f" and x.numel() > 0 and states[0].numel() > 0
            and all(t is None or (t._dtype is dt and t._device is dev) for t in states + weights))


def _native_t(t: Tensor) -> Any:
    """A native view of 2-D ``t`` transposed (no tensor made)."""
    s0, s1 = t._strides
    return t._device.view(t._storage.buffer, t._shape[::-1], (s1, s0), t._offset, t._dtype)


def _mm(a: Tensor, b: Tensor, ta: bool = False, tb: bool = False) -> Tensor:
    """``a @ b`` (``a.T``, ``b.T`` when asked) by the device's matmul kernel, not
    recorded: the steps' products without the front-end's per-call work."""
    dev, dt = a._device, a._dtype
    out = empty((a._shape[1 if ta else 0], b._shape[0 if tb else 1]), dt, dev)
    k = dev.kernels.get("matmul") or kernel(dev, "matmul")
    k(out._h, _native_t(a) if ta else view_of(a), _native_t(b) if tb else view_of(b))
    return out


def _linear(x: Tensor, w: Tensor, b: Tensor | None) -> Tensor:
    """``x @ w.T + b`` as ``ops.linalg.linear`` computes it, not recorded."""
    out = _mm(x, w, tb=True)
    if b is not None:
        k = out._device.kernels.get("add") or kernel(out._device, "add")
        k(out._h, out._h, expand_to(b, out._shape))
    return out


def _input_grads(need: tuple[bool, ...], d: Tensor, x: Tensor, h: Tensor, w_ih: Tensor,
                 w_hh: Tensor, d_h: Tensor | None = None) -> list[Tensor | None]:
    """Gradients of (x, h, w_ih, w_hh, b_ih, b_hh) from the gradient ``d`` of
    ``gi = x @ w_ih.T + b_ih`` and ``d_h`` of ``gh = h @ w_hh.T + b_hh`` (the
    same as ``d`` when not given); ``need``: which (as needs_input_grad, with
    c's place after h). Recorded ops under ``create_graph``, else the kernels."""
    rec = _state.enabled
    mm = (lambda a, b, ta=False: matmul(a.T if ta else a, b)) if rec else _mm
    same = d_h is None
    d_h = d if d_h is None else d_h
    dx = mm(d, w_ih) if need[0] else None
    dh = mm(d_h, w_hh) if need[1] else None
    dw_ih = mm(d, x, ta=True) if need[3] else None
    dw_hh = mm(d_h, h, ta=True) if need[4] else None
    db_ih = d.sum(0) if need[5] else None
    db_hh = None
    if need[6]:  # (never the same tensor as b_ih's: a gradient may be accumulated into)
        db_hh = db_ih.clone() if same and db_ih is not None else d_h.sum(0)
    return [dx, dh, dw_ih, dw_hh, db_ih, db_hh]


class LSTMCellStep(Function):
    """(h', c') = one LSTM step of (x, h, c) as one node."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, h: Tensor, c: Tensor, w_ih: Tensor, w_hh: Tensor,
                b_ih: Tensor | None, b_hh: Tensor | None) -> tuple[Tensor, Tensor]:
        ctx.set_materialize_grads(False)
        h2, c2, act = lstm_cell(_linear(x, w_ih, b_ih), _linear(h, w_hh, b_hh), c)
        ctx.save_for_backward(x, h, c, w_ih, w_hh, b_ih, b_hh, act, c2)
        return h2, c2

    @staticmethod
    def backward(ctx: Any, dh: Tensor | None, dc: Tensor | None) -> Any:
        x, h, c, w_ih, w_hh, b_ih, b_hh, act, c2 = ctx.saved_tensors
        if dh is None:
            dh = c2.new_zeros(c2._shape)
        if _state.enabled:  # create_graph: the step again, recorded
            _, c2, act = lstm_math(linear(x, w_ih, b_ih), linear(h, w_hh, b_hh), c)
        d, dc_prev = lstm_cell_backward(dh, dc, act, c2, c)
        need = ctx.needs_input_grad
        g = _input_grads(need, d, x, h, w_ih, w_hh)
        return g[0], g[1], dc_prev if need[2] else None, *g[2:]


class GRUCellStep(Function):
    """h' = one GRU step of (x, h) as one node."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, h: Tensor, w_ih: Tensor, w_hh: Tensor,
                b_ih: Tensor | None, b_hh: Tensor | None) -> Tensor:
        gh = _linear(h, w_hh, b_hh)
        h2, act = gru_cell(_linear(x, w_ih, b_ih), gh, h)
        ctx.save_for_backward(x, h, w_ih, w_hh, b_ih, b_hh, act, gh)
        return h2

    @staticmethod
    def backward(ctx: Any, dh: Tensor) -> Any:
        x, h, w_ih, w_hh, b_ih, b_hh, act, gh = ctx.saved_tensors
        if _state.enabled:  # create_graph: the step again, recorded
            gh = linear(h, w_hh, b_hh)
            _, act = gru_math(linear(x, w_ih, b_ih), gh, h)
        dgi, dgh, dhz = gru_cell_backward(dh, act, gh, h)
        need = ctx.needs_input_grad
        g = _input_grads(need[:2] + (False,) + need[2:], dgi, x, h, w_ih, w_hh, dgh)
        if g[1] is not None:
            g[1] = g[1] + dhz
        return (*g,)


class RNNCellStep(Function):
    """h' = tanh or relu of ``x W_ih^T + b_ih + h W_hh^T + b_hh``, as one node."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, h: Tensor, w_ih: Tensor, w_hh: Tensor,
                b_ih: Tensor | None, b_hh: Tensor | None, relu: bool) -> Tensor:
        pre = _linear(x, w_ih, b_ih).add_(_linear(h, w_hh, b_hh))
        h2 = pre.relu_() if relu else pre.tanh_()
        ctx.save_for_backward(x, h, w_ih, w_hh, b_ih, b_hh, h2)
        return h2

    @staticmethod
    def backward(ctx: Any, dh: Tensor) -> Any:
        x, h, w_ih, w_hh, b_ih, b_hh, h2 = ctx.saved_tensors
        relu = ctx.args[6]
        if _state.enabled:  # create_graph: the step again, recorded
            pre = linear(x, w_ih, b_ih) + linear(h, w_hh, b_hh)
            h2 = pre.relu() if relu else pre.tanh()
        d = dh * (h2 > 0) if relu else dh * (1 - h2 * h2)
        need = ctx.needs_input_grad
        return (*_input_grads(need[:2] + (False,) + need[2:], d, x, h, w_ih, w_hh), None)
