"""Recurrent layers, as ``torch.nn``: ``RNN`` (tanh / relu), ``LSTM`` (with
``proj_size``), ``GRU`` and their single-step cells.

Parameters carry PyTorch's names, shapes and gate order (LSTM i, f, g, o; GRU
r, z, n), so a PyTorch ``state_dict`` loads as is and gives the same outputs.

A layer runs each (layer, direction) in two parts: the input projection of every
time step at once (one matmul over the whole sequence, recorded by autograd),
then the recurrence as one hand-written ``autograd.Function`` per sequence. Its
forward loops over time with one ``h @ W_hh.T`` matmul per step and records
nothing; its backward runs back through time, one matmul per step, and gathers
the weight gradients into one matmul at the end. Per-step indexing would cost a
full-size scatter per step in backward; the Function keeps backward linear in
the sequence length. The GRU's goes one step further and runs its time loops
as kernel calls on preallocated buffers (see ``_GRUSeq``).
"""

from __future__ import annotations

import math
import numbers
import warnings
from typing import Any

from ..autograd.function import Function, once_differentiable
from ..ops import creation as C
from ..ops.indexing import cat, stack
from ..ops.core import empty, expand_to, kernel, view_of
from ..ops.linalg import matmul
from ..tensor import Tensor
from . import functional as F
from . import init
from .module import Module
from .parameter import Parameter

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


# -- the recurrences: forward over time, backward through time --------------------------------


def _steps(reverse: bool, n: int) -> range:
    return range(n - 1, -1, -1) if reverse else range(n)


def _weight_grads(dpre: list[Tensor], hs: list[Tensor], need_w: bool, need_b: bool
                  ) -> tuple[Tensor | None, Tensor | None]:
    """``W_hh`` and ``b_hh`` gradients from every step's gate gradients ``dpre``
    and the hidden states they multiplied ``hs`` (both in time order): one matmul."""
    g = stack(dpre).reshape(-1, dpre[0]._shape[-1])
    dw = matmul(g.T, stack(hs).reshape(-1, hs[0]._shape[-1])) if need_w else None
    db = g.sum(0) if need_b else None
    return dw, db


def _kernels(dev: Any, *ops: str) -> list[Any]:
    return [dev.kernels.get(op) or kernel(dev, op) for op in ops]


def _step_views(t: Tensor, lo: int = 0, hi: int | None = None) -> list[Any]:
    """Native views of ``t[i, :, lo:hi]`` for every ``i`` of a 3-D ``t``, made
    once so that a time loop can hand them straight to kernels."""
    n, b, k = t._shape
    s0, s1, s2 = t._strides
    hi = k if hi is None else hi
    view, buf, dt, off = t._device.view, t._storage.buffer, t._dtype, t._offset + lo * s2
    shape, strides = (b, hi - lo), (s1, s2)
    return [view(buf, shape, strides, off + i * s0, dt) for i in range(n)]


class _SimpleRNNSeq(Function):
    """``h_t = act(gi_t + h_{t-1} @ W_hh.T + b_hh)`` over a whole sequence.
    Inputs: gi (T, B, H) the input projections, h0 (B, H), w_hh, b_hh (or None)."""

    @staticmethod
    def forward(ctx: Any, gi: Tensor, h0: Tensor, w_hh: Tensor, b_hh: Tensor | None,
                relu: bool, reverse: bool) -> tuple[Tensor, Tensor]:
        n = gi._shape[0]
        xs = gi.unbind(0)
        hs: list[Tensor] = [None] * n  # type: ignore[list-item]
        h = h0
        w_t = w_hh.T
        for t in _steps(reverse, n):
            pre = matmul(h, w_t).add_(xs[t])
            if b_hh is not None:
                pre.add_(b_hh)
            h = pre.relu_() if relu else pre.tanh()
            hs[t] = h
        _save_steps(ctx, hs, [])
        return stack(hs), h

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, g_out: Tensor, g_hn: Tensor) -> Any:
        gi, h0, w_hh, b_hh, relu, reverse = ctx.args
        hs, _ = _saved_steps(ctx)
        n = len(hs)
        gs = g_out.unbind(0)
        dpre: list[Tensor] = [None] * n  # type: ignore[list-item]
        dh = g_hn
        for t in _steps(not reverse, n):
            dh = gs[t] + dh
            h = hs[t]
            d = dh * (h > 0) if relu else dh * (1 - h * h)
            dpre[t] = d
            dh = matmul(d, w_hh)
        prev = _shifted(hs, h0, reverse)
        dw, db = _weight_grads(dpre, prev, ctx.next_functions[2] is not None,
                               b_hh is not None and ctx.next_functions[3] is not None)
        return stack(dpre), dh, dw, db, None, None


class _GRUSeq(Function):
    """PyTorch's GRU over a whole sequence, gates r, z, n:
    ``r, z = sigmoid(gi_rz + gh_rz)``, ``n = tanh(gi_n + r * gh_n)``,
    ``h = n + z * (h_prev - n)`` where ``gh = h_prev @ W_hh.T + b_hh``.

    The time loops call the device's kernels on views, made before the loop, of
    buffers that hold every step (hidden states, gates, gradients): a step is a
    dozen kernel calls and allocates nothing. Whatever depends only on saved
    values (the sigmoid and tanh derivatives, ``h_prev - n``) is computed for
    all steps at once before backward's loop, and the weight gradients are one
    matmul after it. Needs one dtype for all inputs and a non-empty input
    (``_GRUSeqOps`` handles the rest)."""

    @staticmethod
    def forward(ctx: Any, gi: Tensor, h0: Tensor, w_hh: Tensor, b_hh: Tensor | None,
                reverse: bool) -> tuple[Tensor, Tensor]:
        n_steps, batch, hid = gi._shape[0], h0._shape[0], h0._shape[-1]
        dev, dt = gi._device, gi._dtype
        k_mm, k_add, k_sub, k_mul, k_exp, k_rec, k_tanh, k_copy = _kernels(
            dev, "matmul", "add", "sub", "mul", "exp", "reciprocal", "tanh", "copy")
        # hs[i + 1] is step i's state (hs[0] = h0); reversed: hs[i], hs[n] = h0
        hs = empty((n_steps + 1, batch, hid), dt, dev)
        gh = empty((n_steps, batch, 3 * hid), dt, dev)
        rz = empty((n_steps, batch, 2 * hid), dt, dev)
        nn_ = empty((n_steps, batch, hid), dt, dev)
        # -(gi_rz + b_hh_rz): the sigmoid's exp(-x) then needs no negation per step
        neg_xrz = gi[..., :2 * hid] if b_hh is None else gi[..., :2 * hid] + b_hh[:2 * hid]
        neg_xrz = neg_xrz.neg()
        v_hs = _step_views(hs)
        k_copy(v_hs[n_steps if reverse else 0], view_of(h0))
        v_gh, v_ghrz, v_ghn = _step_views(gh), _step_views(gh, 0, 2 * hid), _step_views(gh, 2 * hid)
        v_rz, v_r, v_z = _step_views(rz), _step_views(rz, 0, hid), _step_views(rz, hid)
        v_n, v_xrz, v_xn = _step_views(nn_), _step_views(neg_xrz), _step_views(gi, 2 * hid)
        w_t = view_of(w_hh.T)
        b_n = None if b_hh is None else expand_to(b_hh[2 * hid:], (batch, hid))
        for t in _steps(reverse, n_steps):
            prev, out = (t + 1, t) if reverse else (t, t + 1)
            k_mm(v_gh[t], v_hs[prev], w_t)
            a = v_rz[t]
            k_sub(a, v_xrz[t], v_ghrz[t])           # -(gi + gh), then 1 / (1 + exp(.))
            k_exp(a, a)
            k_add(a, a, 1.0)
            k_rec(a, a)
            g = v_ghn[t]
            if b_n is not None:
                k_add(g, g, b_n)
            n = v_n[t]
            k_mul(n, v_r[t], g)
            k_add(n, n, v_xn[t])
            k_tanh(n, n)
            h = v_hs[out]
            k_sub(h, v_hs[prev], n)
            k_mul(h, h, v_z[t])
            k_add(h, h, n)
        # copies out of hs: writing to an output in place leaves backward's states alone
        out = (hs[:n_steps] if reverse else hs[1:]).clone()
        last = (hs[0] if reverse else hs[n_steps]).clone()
        # w_hh and h_n too: their version checks, and what a double backward
        # would depend on (once_differentiable refuses one)
        ctx.save_for_backward(hs, gh, rz, nn_, w_hh, last)
        return out, last

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, g_out: Tensor, g_hn: Tensor) -> Any:
        b_hh, reverse = ctx.args[3:]
        hs, gh, rz, nn_, w_hh, _ = ctx.saved_tensors
        n_steps, batch, hid = nn_._shape
        dev, dt = nn_._device, nn_._dtype
        k_mm, k_add, k_mul, k_copy = _kernels(dev, "matmul", "add", "mul", "copy")
        prev = hs[1:] if reverse else hs[:n_steps]
        r, z = rz[..., :hid], rz[..., hid:]
        # per-step factors that depend on saved values only, for all steps at once
        f_n = (1 - z) * (1 - nn_ * nn_)            # dn = dh * f_n
        f_z = (prev - nn_) * z * (1 - z)           # dz_pre = dh * f_z
        f_r = gh[..., 2 * hid:] * r * (1 - r)      # dr_pre = dn * f_r
        dgh = empty((n_steps, batch, 3 * hid), dt, dev)
        d_gi = empty((n_steps, batch, 3 * hid), dt, dev)
        dh_t = empty((batch, hid), dt, dev)
        mm = empty((batch, hid), dt, dev)
        dh, tmp = view_of(dh_t), view_of(mm)
        k_copy(dh, view_of(g_hn))
        v_g = _step_views(g_out)
        v_dgh, v_dr, v_dz, v_dghn = (_step_views(dgh), _step_views(dgh, 0, hid),
                                     _step_views(dgh, hid, 2 * hid), _step_views(dgh, 2 * hid))
        v_dn = _step_views(d_gi, 2 * hid)
        v_fn, v_fz, v_fr = _step_views(f_n), _step_views(f_z), _step_views(f_r)
        v_r, v_z = _step_views(rz, 0, hid), _step_views(rz, hid)
        w = view_of(w_hh)
        for t in _steps(not reverse, n_steps):
            k_add(dh, dh, v_g[t])
            dn = v_dn[t]
            k_mul(dn, dh, v_fn[t])
            k_mul(v_dz[t], dh, v_fz[t])
            k_mul(v_dr[t], dn, v_fr[t])
            k_mul(v_dghn[t], dn, v_r[t])
            k_mm(tmp, v_dgh[t], w)
            k_mul(dh, dh, v_z[t])
            k_add(dh, dh, tmp)
        k_copy(view_of(d_gi[..., :2 * hid]), view_of(dgh[..., :2 * hid]))
        need_w = ctx.next_functions[2] is not None
        need_b = b_hh is not None and ctx.next_functions[3] is not None
        g2 = dgh.reshape(-1, 3 * hid)
        dw = matmul(g2.T, prev.reshape(-1, hid)) if need_w else None
        db = g2.sum(0) if need_b else None
        return d_gi, dh_t, dw, db, None


class _GRUSeqOps(Function):
    """``_GRUSeq`` written with tensor ops, for what it does not take: inputs of
    mixed dtypes (which promote) and empty inputs."""

    @staticmethod
    def forward(ctx: Any, gi: Tensor, h0: Tensor, w_hh: Tensor, b_hh: Tensor | None,
                reverse: bool) -> tuple[Tensor, Tensor]:
        n_steps, hid = gi._shape[0], h0._shape[-1]
        xrz = gi[..., :2 * hid].unbind(0)
        xn = gi[..., 2 * hid:].unbind(0)
        hs: list[Tensor] = [None] * n_steps  # type: ignore[list-item]
        saved: list[tuple[Tensor, Tensor, Tensor]] = [None] * n_steps  # type: ignore[list-item]
        h = h0
        w_t = w_hh.T
        for t in _steps(reverse, n_steps):
            gh = matmul(h, w_t)
            if b_hh is not None:
                gh.add_(b_hh)
            rz = gh[:, :2 * hid].add_(xrz[t]).sigmoid()
            ghn = gh[:, 2 * hid:]
            r, z = rz[:, :hid], rz[:, hid:]
            nn_ = (r * ghn).add_(xn[t]).tanh()
            h = (h - nn_).mul_(z).add_(nn_)
            hs[t] = h
            saved[t] = (rz, nn_, ghn)
        _save_steps(ctx, hs, saved)
        return stack(hs), h

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, g_out: Tensor, g_hn: Tensor) -> Any:
        gi, h0, w_hh, b_hh, reverse = ctx.args
        hs, saved = _saved_steps(ctx)
        n_steps = len(hs)
        hid = h0._shape[-1]
        prev = _shifted(hs, h0, reverse)
        gs = g_out.unbind(0)
        d_rz: list[Tensor] = [None] * n_steps  # type: ignore[list-item]
        d_gin: list[Tensor] = [None] * n_steps  # type: ignore[list-item]
        d_gh: list[Tensor] = [None] * n_steps  # type: ignore[list-item]
        dh = g_hn
        for t in _steps(not reverse, n_steps):
            rz, nn_, ghn = saved[t]
            r, z = rz[:, :hid], rz[:, hid:]
            dh = gs[t] + dh
            dn = (dh - dh * z) * (1 - nn_ * nn_)          # through tanh
            dz = dh * (prev[t] - nn_)
            drz = cat([dn * ghn, dz], 1).mul_(rz * (1 - rz))  # through sigmoid
            dgh = cat([drz, dn * r], 1)
            d_rz[t], d_gin[t], d_gh[t] = drz, dn, dgh
            dh = (dh * z).add_(matmul(dgh, w_hh))
        d_gi = cat([stack(d_rz), stack(d_gin)], -1)
        dw, db = _weight_grads(d_gh, prev, ctx.next_functions[2] is not None,
                               b_hh is not None and ctx.next_functions[3] is not None)
        return d_gi, dh, dw, db, None


class _LSTMSeq(Function):
    """PyTorch's LSTM over a whole sequence, gates i, f, g, o:
    ``c = f * c_prev + i * g``, ``h = o * tanh(c)`` (then ``h @ W_hr.T`` with a
    projection), where the gates are ``gi + h_prev @ W_hh.T + b_hh``."""

    @staticmethod
    def forward(ctx: Any, gi: Tensor, h0: Tensor, c0: Tensor, w_hh: Tensor, b_hh: Tensor | None,
                w_hr: Tensor | None, reverse: bool) -> tuple[Tensor, Tensor, Tensor]:
        n_steps, hid = gi._shape[0], c0._shape[-1]
        xs = gi.unbind(0)
        hs: list[Tensor] = [None] * n_steps  # type: ignore[list-item]
        saved: list[tuple[Tensor, ...]] = [None] * n_steps  # type: ignore[list-item]
        h, c = h0, c0
        w_t = w_hh.T
        for t in _steps(reverse, n_steps):
            gates = matmul(h, w_t).add_(xs[t])
            if b_hh is not None:
                gates.add_(b_hh)
            ifo = cat([gates[:, :2 * hid], gates[:, 3 * hid:]], 1).sigmoid()
            g = gates[:, 2 * hid:3 * hid].tanh()
            i, f, o = ifo[:, :hid], ifo[:, hid:2 * hid], ifo[:, 2 * hid:]
            c_prev = c
            c = (f * c).add_(i * g)
            tc = c.tanh()
            m = o * tc
            h = matmul(m, w_hr.T) if w_hr is not None else m
            hs[t] = h
            saved[t] = (ifo, g, c_prev, tc, m)
        _save_steps(ctx, hs, saved)
        return stack(hs), h, c

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, g_out: Tensor, g_hn: Tensor, g_cn: Tensor) -> Any:
        gi, h0, c0, w_hh, b_hh, w_hr, reverse = ctx.args
        hs, saved = _saved_steps(ctx)
        n_steps = len(hs)
        hid = c0._shape[-1]
        gs = g_out.unbind(0)
        d_gates: list[Tensor] = [None] * n_steps  # type: ignore[list-item]
        d_hr: list[Tensor] = [None] * n_steps  # type: ignore[list-item]
        dh, dc = g_hn, g_cn
        for t in _steps(not reverse, n_steps):
            ifo, g, c_prev, tc, m = saved[t]
            i, f, o = ifo[:, :hid], ifo[:, hid:2 * hid], ifo[:, 2 * hid:]
            dh = gs[t] + dh
            if w_hr is not None:
                d_hr[t] = dh
                dm = matmul(dh, w_hr)
            else:
                dm = dh
            dc = dc + dm * o * (1 - tc * tc)
            difo = cat([dc * g, dc * c_prev, dm * tc], 1).mul_(ifo * (1 - ifo))
            dg = dc * i * (1 - g * g)
            dgates = cat([difo[:, :2 * hid], dg, difo[:, 2 * hid:]], 1)
            d_gates[t] = dgates
            dc = dc * f
            dh = matmul(dgates, w_hh)
        prev = _shifted(hs, h0, reverse)
        dw, db = _weight_grads(d_gates, prev, ctx.next_functions[3] is not None,
                               b_hh is not None and ctx.next_functions[4] is not None)
        dwr = None
        if w_hr is not None and ctx.next_functions[5] is not None:
            ms = stack([s[4] for s in saved]).reshape(-1, hid)
            dwr = matmul(stack(d_hr).reshape(-1, d_hr[0]._shape[-1]).T, ms)
        return stack(d_gates), dh, dc, dw, db, dwr, None


def _save_steps(ctx: Any, hs: list[Tensor], steps: list[tuple[Tensor, ...]]) -> None:
    """Keep every step's state and gate values for backward, through
    ``save_for_backward`` so they are freed after it (unless ``retain_graph``)."""
    ctx.n_steps, ctx.per_step = len(hs), len(steps[0]) if steps else 0
    ctx.save_for_backward(*hs, *(t for s in steps for t in s))


def _saved_steps(ctx: Any) -> tuple[list[Tensor], list[tuple[Tensor, ...]]]:
    saved = ctx.saved_tensors
    n, k = ctx.n_steps, ctx.per_step
    steps = [tuple(saved[n + i * k:n + (i + 1) * k]) for i in range(n)] if k else []
    return list(saved[:n]), steps


def _one_dtype(gi: Tensor, *ts: Tensor | None) -> bool:
    """Whether the kernel-level recurrences take these inputs: all of ``gi``'s
    dtype and device, nothing empty."""
    return gi.numel() > 0 and all(
        t is None or (t._dtype is gi._dtype and t._device is gi._device) for t in ts)


def _shifted(hs: list[Tensor], h0: Tensor, reverse: bool) -> list[Tensor]:
    """The hidden state each step started from, in time order."""
    return [h0] + hs[:-1] if not reverse else hs[1:] + [h0]


# -- the layers ---------------------------------------------------------------------------------


class RNNBase(Module):
    """Base of ``RNN``, ``LSTM`` and ``GRU``: PyTorch's constructor, parameters
    ``weight_ih_l{k}{_reverse}``, ``weight_hh_l{k}``, ``bias_ih_l{k}``,
    ``bias_hh_l{k}`` (and ``weight_hr_l{k}`` for a projected LSTM), all
    initialised U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, proj_size: int = 0, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        if mode not in _GATES:
            raise ValueError("Unrecognized RNN mode: " + mode)
        if (not isinstance(dropout, numbers.Number) or isinstance(dropout, bool)
                or not 0 <= dropout <= 1):
            raise ValueError("dropout should be a number in range [0, 1] representing the "
                             "probability of an element being zeroed")
        if dropout > 0 and num_layers == 1:
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so "
                          "non-zero dropout expects num_layers greater than 1, but got "
                          f"dropout={dropout} and num_layers={num_layers}", stacklevel=2)
        for name, v in (("bias", bias), ("batch_first", batch_first)):
            if not isinstance(v, bool):
                raise TypeError(f"{name} should be of type bool, got: {type(v).__name__}")
        for name, v in (("input_size", input_size), ("hidden_size", hidden_size)):
            if not isinstance(v, int) or isinstance(v, bool):
                raise TypeError(f"{name} should be of type int, got: {type(v).__name__}")
            if v <= 0:
                raise ValueError(f"{name} must be greater than zero")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable "
                             "projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        gate_size = _GATES[mode] * hidden_size
        real_hidden = proj_size if proj_size > 0 else hidden_size
        dirs = 2 if bidirectional else 1
        kw = {"device": device, "dtype": dtype}
        self._flat_weights_names: list[str] = []
        self._all_weights: list[list[str]] = []
        for layer in range(num_layers):
            for direction in range(dirs):
                layer_input = input_size if layer == 0 else real_hidden * dirs
                sfx = f"_l{layer}" + ("_reverse" if direction == 1 else "")
                params = [("weight_ih" + sfx, (gate_size, layer_input)),
                          ("weight_hh" + sfx, (gate_size, real_hidden))]
                if bias:
                    params += [("bias_ih" + sfx, (gate_size,)), ("bias_hh" + sfx, (gate_size,))]
                if proj_size > 0:
                    params.append(("weight_hr" + sfx, (proj_size, hidden_size)))
                for name, shape in params:
                    setattr(self, name, Parameter(C.empty(shape, **kw)))
                names = [p[0] for p in params]
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def flatten_parameters(self) -> None:
        """Nothing to do: the weights are used where they are (kept for PyTorch code)."""

    @property
    def _flat_weights(self) -> list[Parameter]:
        return [getattr(self, n) for n in self._flat_weights_names]

    @property
    def all_weights(self) -> list[list[Parameter]]:
        return [[getattr(self, n) for n in names] for names in self._all_weights]

    # -- argument checks, as PyTorch words them ---------------------------------------------

    def _name(self) -> str:
        return {"RNN_TANH": "RNN", "RNN_RELU": "RNN"}.get(self.mode, self.mode)

    def _check_input(self, input: Any) -> None:
        if not isinstance(input, Tensor):
            raise TypeError(f"{self._name()}: expected input to be a Tensor, got "
                            f"{type(input).__name__}")
        if input.ndim not in (2, 3):
            raise ValueError(f"{self._name()}: Expected input to be 2D or 3D, got {input.ndim}D "
                             "tensor instead")
        w = self.weight_ih_l0
        if input._dtype is not w._dtype:
            raise ValueError(f"RNN input dtype ({input._dtype}) does not match weight dtype "
                             f"({w._dtype}). Convert input: input.to({w._dtype}), or convert "
                             f"model: model.to({input._dtype})")
        if input._shape[-1] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected "
                               f"{self.input_size}, got {input._shape[-1]}")

    @staticmethod
    def _check_hidden(hx: Tensor, expected: tuple[int, int, int],
                      msg: str = "Expected hidden size {}, got {}") -> None:
        if tuple(hx._shape) != expected:
            raise RuntimeError(msg.format(expected, list(hx._shape)))

    def _prepare(self, input: Tensor, hx: Any) -> tuple[Tensor, Any, bool, int]:
        """Check the arguments; return the input time-major (T, B, F), hx batched,
        whether the input was batched and the batch size."""
        self._check_input(input)
        batched = input.ndim == 3
        if not batched:
            input = input.unsqueeze(1)
        elif self.batch_first:
            input = input.transpose(0, 1)
        return input, hx, batched, input._shape[1]

    def _run(self, x: Tensor, h0: list[Tensor], c0: list[Tensor] | None
             ) -> tuple[Tensor, list[Tensor], list[Tensor]]:
        """Every layer and direction over the time-major input ``x``; returns the
        last layer's output and each (layer, direction)'s final h (and c)."""
        dirs = 2 if self.bidirectional else 1
        hn: list[Tensor] = []
        cn: list[Tensor] = []
        n_steps, batch = x._shape[0], x._shape[1]
        for layer in range(self.num_layers):
            if layer > 0 and self.dropout > 0 and self.training:
                x = F.dropout(x, self.dropout, True)
            outs = []
            flat = x.reshape(n_steps * batch, x._shape[-1])
            for d in range(dirs):
                k = layer * dirs + d
                w = [getattr(self, n) for n in self._all_weights[k]]
                w_ih, w_hh = w[0], w[1]
                b_ih, b_hh = (w[2], w[3]) if self.bias else (None, None)
                gi = F.linear(flat, w_ih, b_ih).reshape(n_steps, batch, w_ih._shape[0])
                rev = d == 1
                if self.mode == "GRU":
                    seq = _GRUSeq if _one_dtype(gi, h0[k], w_hh, b_hh) else _GRUSeqOps
                    out, h = seq.apply(gi, h0[k], w_hh, b_hh, rev)
                elif self.mode == "LSTM":
                    w_hr = w[-1] if self.proj_size > 0 else None
                    out, h, c = _LSTMSeq.apply(gi, h0[k], c0[k],  # type: ignore[index]
                                               w_hh, b_hh, w_hr, rev)
                    cn.append(c)
                else:
                    relu = self.mode == "RNN_RELU"
                    out, h = _SimpleRNNSeq.apply(gi, h0[k], w_hh, b_hh, relu, rev)
                outs.append(out)
                hn.append(h)
            x = outs[0] if dirs == 1 else cat(outs, -1)
        return x, hn, cn

    def _finish(self, out: Tensor, batched: bool) -> Tensor:
        if not batched:
            return out.squeeze(1)
        return out.transpose(0, 1) if self.batch_first else out

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s


class _HiddenOnly(RNNBase):
    """``RNN`` and ``GRU``: forward(input, hx=None) -> (output, h_n)."""

    def forward(self, input: Tensor, hx: Tensor | None = None) -> tuple[Tensor, Tensor]:
        x, hx, batched, batch = self._prepare(input, hx)
        dirs = 2 if self.bidirectional else 1
        expected = (self.num_layers * dirs, batch, self.hidden_size)
        if hx is None:
            hx = C.zeros(expected, dtype=x._dtype, device=x._device)
        else:
            if not isinstance(hx, Tensor):
                raise TypeError(f"{self._name()}: expected hx to be a Tensor, got "
                                f"{type(hx).__name__}")
            if batched and hx.ndim != 3:
                raise RuntimeError(f"For batched 3-D input, hx should also be 3-D but got "
                                   f"{hx.ndim}-D tensor")
            if not batched:
                if hx.ndim != 2:
                    raise RuntimeError(f"For unbatched 2-D input, hx should also be 2-D but got "
                                       f"{hx.ndim}-D tensor")
                hx = hx.unsqueeze(1)
            self._check_hidden(hx, expected)
        out, hn, _ = self._run(x, list(hx.unbind(0)), None)
        h_n = stack(hn)
        return self._finish(out, batched), (h_n if batched else h_n.squeeze(1))


class RNN(_HiddenOnly):
    """Elman RNN: ``h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)`` (or relu).

    ``RNN(input_size, hidden_size, num_layers=1, nonlinearity='tanh', bias=True,
    batch_first=False, dropout=0.0, bidirectional=False)``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        if len(args) > 3:
            self_nl = args[3]
            args = args[:3] + args[4:]
        else:
            self_nl = kwargs.pop("nonlinearity", "tanh")
        if self_nl == "tanh":
            mode = "RNN_TANH"
        elif self_nl == "relu":
            mode = "RNN_RELU"
        else:
            raise ValueError(f"Unknown nonlinearity '{self_nl}'. Select from 'tanh' or 'relu'.")
        super().__init__(mode, *args, **kwargs)
        self.nonlinearity = self_nl

    def extra_repr(self) -> str:
        s = super().extra_repr()
        return s + (f", nonlinearity={self.nonlinearity}" if self.nonlinearity != "tanh" else "")


class GRU(_HiddenOnly):
    """Gated recurrent unit, PyTorch's equations and gate order (r, z, n):
    ``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))``, ``h' = (1 - z) * n + z * h``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        super().__init__("GRU", *args, **kwargs)


class LSTM(RNNBase):
    """Long short-term memory, gate order (i, f, g, o); forward(input, hx=None)
    -> (output, (h_n, c_n)). With ``proj_size > 0`` h is projected by ``weight_hr``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__("LSTM", *args, **kwargs)

    def forward(self, input: Tensor, hx: Any = None) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        x, hx, batched, batch = self._prepare(input, hx)
        dirs = 2 if self.bidirectional else 1
        real_hidden = self.proj_size if self.proj_size > 0 else self.hidden_size
        exp_h = (self.num_layers * dirs, batch, real_hidden)
        exp_c = (self.num_layers * dirs, batch, self.hidden_size)
        if hx is None:
            h0 = C.zeros(exp_h, dtype=x._dtype, device=x._device)
            c0 = C.zeros(exp_c, dtype=x._dtype, device=x._device)
        else:
            if (not isinstance(hx, (tuple, list)) or len(hx) != 2
                    or not all(isinstance(t, Tensor) for t in hx)):
                raise TypeError("LSTM: expected hx to be a tuple of two Tensors (h_0, c_0)")
            h0, c0 = hx
            want = 3 if batched else 2
            if h0.ndim != want or c0.ndim != want:
                kind = "batched 3-D" if batched else "unbatched 2-D"
                raise RuntimeError(f"For {kind} input, hx and cx should also be {want}-D but got "
                                   f"({h0.ndim}-D, {c0.ndim}-D) tensors")
            if not batched:
                h0, c0 = h0.unsqueeze(1), c0.unsqueeze(1)
            self._check_hidden(h0, exp_h, "Expected hidden[0] size {}, got {}")
            self._check_hidden(c0, exp_c, "Expected hidden[1] size {}, got {}")
        out, hn, cn = self._run(x, list(h0.unbind(0)), list(c0.unbind(0)))
        h_n, c_n = stack(hn), stack(cn)
        if not batched:
            h_n, c_n = h_n.squeeze(1), c_n.squeeze(1)
        return self._finish(out, batched), (h_n, c_n)


# -- cells --------------------------------------------------------------------------------------


class RNNCellBase(Module):
    """Base of the cells: ``weight_ih`` (chunks * hidden, input), ``weight_hh``
    (chunks * hidden, hidden), ``bias_ih``, ``bias_hh``; U(-1/sqrt(hidden), 1/sqrt(hidden))."""

    _chunks = 1

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        kw = {"device": device, "dtype": dtype}
        g = self._chunks * hidden_size
        self.weight_ih = Parameter(C.empty((g, input_size), **kw))
        self.weight_hh = Parameter(C.empty((g, hidden_size), **kw))
        if bias:
            self.bias_ih = Parameter(C.empty(g, **kw))
            self.bias_hh = Parameter(C.empty(g, **kw))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        nl = getattr(self, "nonlinearity", "tanh")
        return s + (f", nonlinearity={nl}" if nl != "tanh" else "")

    def _check(self, input: Any, hxs: list[Any]) -> tuple[Tensor, list[Tensor | None], bool]:
        """PyTorch's cell checks; returns input and the states batched."""
        name = type(self).__name__
        if not isinstance(input, Tensor):
            raise TypeError(f"{name}: expected input to be a Tensor, got {type(input).__name__}")
        if input.ndim not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {input.ndim}D instead")
        for i, h in enumerate(hxs):
            if h is not None and h.ndim not in (1, 2):
                what = "hidden" if len(hxs) == 1 else f"hx[{i}]"
                raise ValueError(f"{name}: Expected {what} to be 1D or 2D, got {h.ndim}D instead")
        batched = input.ndim == 2
        if not batched:
            input = input.unsqueeze(0)
            hxs = [h.unsqueeze(0) if h is not None else None for h in hxs]
        if input._shape[1] != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {input._shape[1]} expected "
                               f"{self.input_size}")
        out: list[Tensor | None] = []
        for i, h in enumerate(hxs):
            if h is None:
                h = C.zeros(input._shape[0], self.hidden_size, dtype=input._dtype,
                            device=input._device)
            if input._shape[0] != h._shape[0]:
                raise RuntimeError(f"Input batch size {input._shape[0]} doesn't match hidden{i} "
                                   f"batch size {h._shape[0]}")
            if h._shape[1] != self.hidden_size:
                raise RuntimeError(f"hidden{i} has inconsistent hidden_size: got {h._shape[1]}, "
                                   f"expected {self.hidden_size}")
            out.append(h)
        return input, out, batched

    def _gates(self, x: Tensor, h: Tensor) -> tuple[Tensor, Tensor]:
        return F.linear(x, self.weight_ih, self.bias_ih), F.linear(h, self.weight_hh, self.bias_hh)


class RNNCell(RNNCellBase):
    """One Elman step: ``h' = tanh(W_ih x + b_ih + W_hh h + b_hh)`` (or relu)."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 nonlinearity: str = "tanh", device: Any = None, dtype: Any = None) -> None:
        super().__init__(input_size, hidden_size, bias, device=device, dtype=dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        x, (h,), batched = self._check(input, [hx])
        gi, gh = self._gates(x, h)  # type: ignore[arg-type]
        pre = gi + gh
        if self.nonlinearity == "tanh":
            out = pre.tanh()
        elif self.nonlinearity == "relu":
            out = pre.relu()
        else:
            raise RuntimeError(f"Unknown nonlinearity: {self.nonlinearity}")
        return out if batched else out.squeeze(0)


class LSTMCell(RNNCellBase):
    """One LSTM step; forward(input, (h, c)=None) -> (h', c')."""

    _chunks = 4

    def forward(self, input: Tensor, hx: Any = None) -> tuple[Tensor, Tensor]:
        x, (h, c), batched = self._check(input, [None, None] if hx is None else list(hx))
        gi, gh = self._gates(x, h)  # type: ignore[arg-type]
        i, f, g, o = (gi + gh).chunk(4, 1)
        c2 = f.sigmoid() * c + i.sigmoid() * g.tanh()
        h2 = o.sigmoid() * c2.tanh()
        return (h2, c2) if batched else (h2.squeeze(0), c2.squeeze(0))


class GRUCell(RNNCellBase):
    """One GRU step, PyTorch's equations (r, z, n)."""

    _chunks = 3

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        x, (h,), batched = self._check(input, [hx])
        gi, gh = self._gates(x, h)  # type: ignore[arg-type]
        i_r, i_z, i_n = gi.chunk(3, 1)
        h_r, h_z, h_n = gh.chunk(3, 1)
        r = (i_r + h_r).sigmoid()
        z = (i_z + h_z).sigmoid()
        n = (i_n + r * h_n).tanh()
        out = n + z * (h - n)  # type: ignore[operator]
        return out if batched else out.squeeze(0)
