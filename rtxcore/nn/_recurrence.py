"""The recurrences behind ``RNN``, ``LSTM`` and ``GRU``: one autograd ``Function``
per (layer, direction) that runs a whole sequence forward over time and back
through time.

A layer runs each (layer, direction) in two parts: the input projection of every
time step at once (one matmul over the whole sequence, recorded by autograd),
then the recurrence as one of these Functions. Its forward loops over time with
one ``h @ W_hh.T`` matmul per step and records nothing; its backward runs back
through time, one matmul per step, and gathers the weight gradients into one
matmul at the end. Per-step indexing would cost a full-size scatter per step in
backward; the Function keeps backward linear in the sequence length. The GRU's
goes one step further and runs its time loops as kernel calls on preallocated
buffers (see ``_GRUSeq``).
"""

from __future__ import annotations

from typing import Any

from ..autograd.function import Function, once_differentiable
from ..ops.indexing import cat, stack
from ..ops.core import empty, expand_to, kernel, view_of
from ..ops.linalg import matmul
from ..tensor import Tensor


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
