"""The recurrences behind ``RNN``, ``LSTM`` and ``GRU``: one autograd ``Function``
per (layer, direction) that runs a whole sequence forward over time and back
through time.

A layer runs each (layer, direction) in two parts: the input projection of every
time step at once (one matmul over the whole sequence, recorded by autograd),
then the recurrence as one of these Functions, which records nothing inside.
Their time loops call the device's kernels on native views, made before the
loop, of buffers that hold every step (states, gates, gradients), so a step
allocates nothing and makes no tensor: forward, one ``h @ W_hh.T`` matmul and
the cell's fused kernel (``lstm_cell``, ``gru_cell``; an Elman step is an add
and its activation); backward, the fused backward kernel and one matmul. The
weight gradients are one matmul over all steps after the loop. Where the
backend lacks a cell kernel, the step is the core's decomposition
(``_rnn_cells``) on tensor slices of the same buffers.
"""

from __future__ import annotations

from typing import Any, Callable

from ..autograd.function import Function, once_differentiable
from ..ops.core import empty, expand_to, kernel, own_kernel, view_of
from ..ops.indexing import cat, stack
from ..ops.linalg import matmul
from ..tensor import Tensor
from ._rnn_cells import DECOMPOSE


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


def _seq_weight_grads(ctx: Any, k: int, d: Tensor, prev: Tensor, has_b: bool
                      ) -> tuple[Tensor | None, Tensor | None]:
    """The same from (T, B, G) gate gradients ``d`` and (T, B, H) states ``prev``;
    ``k``: W_hh's position among the Function's inputs (b_hh's is next)."""
    g = d.reshape(-1, d._shape[-1])
    dw = matmul(g.T, prev.reshape(-1, prev._shape[-1])) if ctx.next_functions[k] is not None \
        else None
    db = g.sum(0) if has_b and ctx.next_functions[k + 1] is not None else None
    return dw, db


def _kernels(dev: Any, *ops: str) -> list[Any]:
    return [dev.kernels.get(op) or kernel(dev, op) for op in ops]


def _step_views(t: Tensor) -> list[Any]:
    """Native views of ``t[i]`` for every ``i`` of ``t``, made once so that a
    time loop can hand them straight to kernels."""
    n, *rest = t._shape
    if 0 in rest:  # (an empty batch: view_of places empty views where the device allows)
        return [view_of(t[i]) for i in range(n)]
    s0, *strides = t._strides
    view, buf, dt, shape = t._device.view, t._storage.buffer, t._dtype, tuple(rest)
    return [view(buf, shape, tuple(strides), t._offset + i * s0, dt) for i in range(n)]


def _on_tensors(k: Callable[..., Any]) -> Callable[..., Any]:
    def run(*args: Any) -> None:
        k(*(view_of(a) if isinstance(a, Tensor) else a for a in args))

    return run


class _Loop:
    """What a time loop calls: the primitives ``mm``, ``add``, ``mul``, ``copy``,
    and the cell's kernels ``cell`` and ``back``, with the step operands that
    ``steps`` and ``one`` cut from buffers. Native views and the device's
    kernels, or, where the backend lacks ``cell`` or its backward for this
    dtype, tensor slices, the core's decomposition of the cell, and the
    primitives taking tensors."""

    def __init__(self, like: Tensor, cell: str | None) -> None:
        dev, dt = like._device, like._dtype
        prims = _kernels(dev, "matmul", "add", "mul", "copy")
        own = [None, None] if cell is None else [own_kernel(dev, cell, dt),
                                                  own_kernel(dev, cell + "_backward", dt)]
        self.native = cell is None or None not in own
        if cell is not None and not self.native:
            own = [DECOMPOSE[cell], DECOMPOSE[cell + "_backward"]]
            prims = [_on_tensors(k) for k in prims]
        self.mm, self.add, self.mul, self.copy = prims
        self.cell, self.back = own

    def steps(self, t: Tensor) -> list[Any]:
        """``t[i]`` for every ``i``: a (T, ...) buffer's step operands."""
        return _step_views(t) if self.native else list(t.unbind(0))

    def one(self, t: Tensor, shape: tuple[int, ...] | None = None) -> Any:
        """``t`` (broadcast to ``shape``) as a step operand."""
        if self.native:
            return view_of(t) if shape is None else expand_to(t, shape)
        return t if shape is None else t.expand(*shape)


def _ends(hs: Tensor, reverse: bool) -> tuple[int, int]:
    """Where the first state goes and where the last one is, in a (T + 1, ...)
    buffer of states: step i's own state is at i + 1 (reversed: at i)."""
    n = hs._shape[0] - 1
    return (n, 0) if reverse else (0, n)


def _outputs(hs: Tensor, reverse: bool) -> tuple[Tensor, Tensor]:
    """Copies of every step's state and the last one: writing to an output in
    place must leave backward's states alone."""
    n = hs._shape[0] - 1
    return (hs[:n] if reverse else hs[1:]).clone(), hs[_ends(hs, reverse)[1]].clone()


def _prev(hs: Tensor, reverse: bool) -> Tensor:
    """The states each step started from, in time order."""
    n = hs._shape[0] - 1
    return hs[1:] if reverse else hs[:n]


class _SimpleRNNSeq(Function):
    """``h_t = act(gi_t + h_{t-1} @ W_hh.T)`` over a whole sequence. Inputs: gi
    (T, B, H) the input projections (with both biases), h0 (B, H), w_hh.
    A step is a matmul, an add and the activation; backward's per-step factor
    (``1 - h*h``, or ``h > 0``) is computed for all steps before its loop."""

    @staticmethod
    def forward(ctx: Any, gi: Tensor, h0: Tensor, w_hh: Tensor, relu: bool, reverse: bool
                ) -> tuple[Tensor, Tensor]:
        n_steps, batch, hid = gi._shape
        dev, dt = gi._device, gi._dtype
        run = _Loop(gi, None)
        k_act = _kernels(dev, "maximum" if relu else "tanh")[0]
        hs = empty((n_steps + 1, batch, hid), dt, dev)
        v_hs, v_x = run.steps(hs), run.steps(gi)
        run.copy(v_hs[_ends(hs, reverse)[0]], view_of(h0))
        w_c = w_hh.T.contiguous()  # (a transposed operand: a slower matmul each step)
        w_t = view_of(w_c)
        for t in _steps(reverse, n_steps):
            prev, out = (t + 1, t) if reverse else (t, t + 1)
            h = v_hs[out]
            run.mm(h, v_hs[prev], w_t)
            run.add(h, h, v_x[t])
            if relu:
                k_act(h, h, 0.0)
            else:
                k_act(h, h)
        out, last = _outputs(hs, reverse)
        ctx.save_for_backward(hs, w_hh, last)
        return out, last

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, g_out: Tensor, g_hn: Tensor) -> Any:
        relu, reverse = ctx.args[3:]
        hs, w_hh, _ = ctx.saved_tensors
        n_steps, batch, hid = hs._shape[0] - 1, hs._shape[1], hs._shape[2]
        run = _Loop(hs, None)
        own = hs[:n_steps] if reverse else hs[1:]
        f = (own > 0).to(hs._dtype) if relu else 1 - own * own
        d = empty((n_steps, batch, hid), hs._dtype, hs._device)
        dh_t = g_hn.clone()
        dh = view_of(dh_t)
        v_g, v_f, v_d = run.steps(g_out), run.steps(f), run.steps(d)
        w = view_of(w_hh)
        for t in _steps(not reverse, n_steps):
            run.add(dh, dh, v_g[t])
            run.mul(v_d[t], dh, v_f[t])
            run.mm(dh, v_d[t], w)
        dw, _ = _seq_weight_grads(ctx, 2, d, _prev(hs, reverse), False)
        return d, dh_t, dw, None, None


class _GRUSeq(Function):
    """PyTorch's GRU over a whole sequence, gates r, z, n:
    ``r, z = sigmoid(gi_rz + gh_rz)``, ``n = tanh(gi_n + r * gh_n)``,
    ``h = n + z * (h_prev - n)`` where ``gh = h_prev @ W_hh.T + b_hh``: a step
    is that matmul, the bias add and ``gru_cell``. Needs one dtype for all
    inputs and a non-empty input (``_GRUSeqOps`` handles the rest)."""

    @staticmethod
    def forward(ctx: Any, gi: Tensor, h0: Tensor, w_hh: Tensor, b_hh: Tensor | None,
                reverse: bool) -> tuple[Tensor, Tensor]:
        n_steps, batch, hid = gi._shape[0], h0._shape[0], h0._shape[-1]
        dev, dt = gi._device, gi._dtype
        run = _Loop(gi, "gru_cell")
        hs = empty((n_steps + 1, batch, hid), dt, dev)
        gh = empty((n_steps, batch, 3 * hid), dt, dev)
        act = empty((n_steps, 3, batch, hid), dt, dev)
        v_hs, v_gh, v_act, v_gi = run.steps(hs), run.steps(gh), run.steps(act), run.steps(gi)
        run.copy(v_hs[_ends(hs, reverse)[0]], view_of(h0))
        w_c = w_hh.T.contiguous()  # (a transposed operand: a slower matmul each step)
        w_t = view_of(w_c)
        b = None if b_hh is None else run.one(b_hh, (batch, 3 * hid))
        for t in _steps(reverse, n_steps):
            prev, out = (t + 1, t) if reverse else (t, t + 1)
            g = v_gh[t]
            run.mm(g, v_hs[prev], w_t)
            if b is not None:
                run.add(g, g, b)
            run.cell(v_hs[out], v_act[t], v_gi[t], g, v_hs[prev])
        out, last = _outputs(hs, reverse)
        # w_hh and h_n too: their version checks, and what a double backward
        # would depend on (once_differentiable refuses one)
        ctx.save_for_backward(hs, gh, act, w_hh, last)
        return out, last

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, g_out: Tensor, g_hn: Tensor) -> Any:
        b_hh, reverse = ctx.args[3:]
        hs, gh, act, w_hh, _ = ctx.saved_tensors
        n_steps, batch, hid = hs._shape[0] - 1, hs._shape[1], hs._shape[2]
        dev, dt = hs._device, hs._dtype
        run = _Loop(hs, "gru_cell")
        dgi = empty((n_steps, batch, 3 * hid), dt, dev)
        dgh = empty((n_steps, batch, 3 * hid), dt, dev)
        dh_t = g_hn.clone()
        dhz_t, mm_t = empty((batch, hid), dt, dev), empty((batch, hid), dt, dev)
        dh, dhz, tmp = run.one(dh_t), run.one(dhz_t), run.one(mm_t)
        v_g, v_dgi, v_dgh = run.steps(g_out), run.steps(dgi), run.steps(dgh)
        v_act, v_gh, v_hs = run.steps(act), run.steps(gh), run.steps(hs)
        w = view_of(w_hh)
        for t in _steps(not reverse, n_steps):
            prev = t + 1 if reverse else t
            run.add(dh, dh, v_g[t])
            run.back(v_dgi[t], v_dgh[t], dhz, dh, v_act[t], v_gh[t], v_hs[prev])
            run.mm(tmp, v_dgh[t], w)
            run.add(dh, dhz, tmp)
        dw, db = _seq_weight_grads(ctx, 2, dgh, _prev(hs, reverse), b_hh is not None)
        return dgi, dh_t, dw, db, None


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
    projection), the gates being ``gi + h_prev @ W_hh.T`` (``gi`` with both
    biases): a step is that matmul and ``lstm_cell`` (and the projection's matmul)."""

    @staticmethod
    def forward(ctx: Any, gi: Tensor, h0: Tensor, c0: Tensor, w_hh: Tensor, w_hr: Tensor | None,
                reverse: bool) -> tuple[Tensor, Tensor, Tensor]:
        n_steps, batch, hid, real = gi._shape[0], c0._shape[0], c0._shape[-1], h0._shape[-1]
        dev, dt = gi._device, gi._dtype
        run = _Loop(gi, "lstm_cell")
        hs = empty((n_steps + 1, batch, real), dt, dev)
        cs = empty((n_steps + 1, batch, hid), dt, dev)
        act = empty((n_steps, 4, batch, hid), dt, dev)
        ms = None if w_hr is None else empty((n_steps, batch, hid), dt, dev)
        gh = empty((batch, 4 * hid), dt, dev)
        v_hs, v_cs, v_act, v_x = run.steps(hs), run.steps(cs), run.steps(act), run.steps(gi)
        v_m = v_hs if ms is None else run.steps(ms)
        first = _ends(hs, reverse)[0]
        run.copy(v_hs[first], view_of(h0))
        run.copy(v_cs[first], view_of(c0))
        w_c = w_hh.T.contiguous()  # (a transposed operand: a slower matmul each step)
        wr_c = None if w_hr is None else w_hr.T.contiguous()
        v_gh, w_t, wr_t = run.one(gh), view_of(w_c), None if wr_c is None else view_of(wr_c)
        for t in _steps(reverse, n_steps):
            prev, out = (t + 1, t) if reverse else (t, t + 1)
            run.mm(v_gh, v_hs[prev], w_t)
            m = v_m[out] if ms is None else v_m[t]
            run.cell(m, v_cs[out], v_act[t], v_x[t], v_gh, v_cs[prev])
            if wr_t is not None:
                run.mm(v_hs[out], m, wr_t)
        out, h_last = _outputs(hs, reverse)
        c_last = cs[_ends(cs, reverse)[1]].clone()
        ctx.save_for_backward(hs, cs, act, ms, w_hh, w_hr, h_last, c_last)
        return out, h_last, c_last

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, g_out: Tensor, g_hn: Tensor, g_cn: Tensor) -> Any:
        reverse = ctx.args[5]
        hs, cs, act, ms, w_hh, w_hr, _, _ = ctx.saved_tensors
        n_steps, batch, hid, real = act._shape[0], act._shape[2], cs._shape[-1], hs._shape[-1]
        dev, dt = act._device, act._dtype
        run = _Loop(act, "lstm_cell")
        dgates = empty((n_steps, batch, 4 * hid), dt, dev)
        # dh: the gradient reaching a step's h (its output's plus the later step's)
        dhs = empty((n_steps, batch, real), dt, dev) if w_hr is not None else None
        dh_next = g_hn.clone()
        dcs = [g_cn.clone(), empty((batch, hid), dt, dev)]  # dc, in turns
        dh_t, dm_t = empty((batch, real), dt, dev), empty((batch, hid), dt, dev)
        v_dh = run.steps(dhs) if dhs is not None else None
        dh, dm, dnext = run.one(dh_t), run.one(dm_t), run.one(dh_next)
        v_dc = [run.one(t) for t in dcs]
        v_g, v_dg, v_act, v_cs = run.steps(g_out), run.steps(dgates), run.steps(act), run.steps(cs)
        w, wr = view_of(w_hh), None if w_hr is None else view_of(w_hr)
        k = 0
        for t in _steps(not reverse, n_steps):
            prev, out = (t + 1, t) if reverse else (t, t + 1)
            d = dh if v_dh is None else v_dh[t]
            run.add(d, dnext, v_g[t])
            if wr is not None:
                run.mm(dm, d, wr)
                d = dm
            run.back(v_dg[t], v_dc[1 - k], d, v_dc[k], v_act[t], v_cs[out], v_cs[prev])
            k = 1 - k
            run.mm(dnext, v_dg[t], w)
        dw, _ = _seq_weight_grads(ctx, 3, dgates, _prev(hs, reverse), False)
        dwr = None
        if dhs is not None and ctx.next_functions[4] is not None:
            dwr = matmul(dhs.reshape(-1, real).T, ms.reshape(-1, hid))  # type: ignore[union-attr]
        return dgates, dh_next, dcs[k], dw, dwr, None


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
