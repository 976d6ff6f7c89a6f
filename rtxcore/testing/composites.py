"""The composites a backend supplies that have no NumPy reference: the device's
kernel, through the op's front-end, against the core's own decomposition on
cpu (the cpu backend's kernel for the op set aside).
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator

from .arrays import _SUM_OPS, SUMS, _rc, compare, host_values, values


@contextlib.contextmanager
def decomposed_on_cpu(op: str) -> Iterator[None]:
    """The cpu device without its kernel for composite ``op``: the core decomposes it."""
    from ..ops.core import ready_device

    dev = ready_device("cpu")
    k = dev.kernels.pop(op, None)
    try:
        yield
    finally:
        if k is not None:
            dev.kernels[op] = k


def _put(x: Any, idx: Any, value: Any) -> Any:
    x[idx] = value
    return x


def _front(op: str) -> Callable[[str, Any], Any]:
    """The front-end call that reaches composite ``op``'s kernel, on device."""
    rc = _rc()

    def run(device: str, dtype: Any) -> Any:
        a = values(dtype, op, (4, 6))
        x = rc.tensor(a, dtype=dtype, device=device)
        if op == "gelu":
            return rc.nn.functional.gelu(x), rc.nn.functional.gelu(x, approximate="tanh")
        if op == "gelu_backward":
            from ..ops.elementwise import gelu, gelu_backward

            g = rc.tensor(values(dtype, "g", (4, 6)), dtype=dtype, device=device)
            return tuple(gelu_backward(g, x, ap, gelu(x, ap)) for ap in ("none", "tanh"))
        if op in ("softmax_backward", "log_softmax_backward"):
            # along the last dim and the first; a broadcast g (.sum()'s)
            fn = rc.softmax if op == "softmax_backward" else rc.log_softmax
            g = rc.tensor(values(dtype, "g", (4, 6)), dtype=dtype, device=device)
            xs = [rc.tensor(a, dtype=dtype, device=device, requires_grad=True) for _ in range(3)]
            fn(xs[0], -1).backward(g)
            fn(xs[1], 0).backward(g)
            (fn(xs[2], 1) * g).sum().backward()
            return tuple(t.grad for t in xs)
        if op == "layer_norm":
            w = rc.tensor(values(dtype, "w", (6,)), dtype=dtype, device=device)
            b = rc.tensor(values(dtype, "b", (6,)), dtype=dtype, device=device)
            return rc.nn.functional.layer_norm(x, (6,), w, b), rc.nn.functional.layer_norm(x, (6,))
        if op == "layer_norm_backward":
            # with weight and bias; without; with weight alone, for .sum()'s broadcast g
            f = rc.nn.functional
            g = rc.tensor(values(dtype, "g", (4, 6)), dtype=dtype, device=device)
            xs = [rc.tensor(a, dtype=dtype, device=device, requires_grad=True) for _ in range(3)]
            w, b = (rc.tensor(values(dtype, s, (6,)), dtype=dtype, device=device,
                              requires_grad=True) for s in ("w", "b"))
            f.layer_norm(xs[0], (6,), w, b).backward(g)
            f.layer_norm(xs[1], (6,)).backward(g)
            dw, db = w.grad, b.grad
            w.grad = None
            f.layer_norm(xs[2], (6,), w).sum().backward()
            return xs[0].grad, dw, db, xs[1].grad, xs[2].grad, w.grad
        if op in ("batch_norm", "batch_norm_backward"):
            # (N, C, H, W) with weight and bias, and (N, C) without; training mode
            f = rc.nn.functional
            x4 = rc.tensor(values(dtype, "x", (2, 3, 4, 5)), dtype=dtype, device=device,
                           requires_grad=True)
            x2 = rc.tensor(values(dtype, "x2", (4, 6)), dtype=dtype, device=device,
                           requires_grad=True)
            w, b = (rc.tensor(values(dtype, s, (3,)), dtype=dtype, device=device,
                              requires_grad=True) for s in ("w", "b"))
            y4 = f.batch_norm(x4, None, None, w, b, training=True)
            y2 = f.batch_norm(x2, None, None, training=True)
            if op == "batch_norm":
                return y4.detach(), y2.detach()
            y4.backward(rc.tensor(values(dtype, "g", (2, 3, 4, 5)), dtype=dtype, device=device))
            y2.backward(rc.tensor(values(dtype, "g2", (4, 6)), dtype=dtype, device=device))
            return x4.grad, w.grad, b.grad, x2.grad
        if op == "max_pool2d_tiled":
            x4 = rc.tensor(values(dtype, op, (2, 3, 4, 6)), dtype=dtype, device=device)
            return rc.nn.functional.max_pool2d(x4, 2)
        if op == "max_pool2d_tiled_backward":
            x4 = rc.tensor(values(dtype, op, (2, 3, 4, 6)), dtype=dtype, device=device, requires_grad=True)
            rc.nn.functional.max_pool2d(x4, 2).sum().backward()
            return x4.grad
        if op in ("conv2d", "conv2d_input_grad", "conv2d_weight_grad", "conv2d_weight_grad_x"):
            # three geometries: padded; strided and dilated; 'same' with a 3x2 kernel
            # (uneven padding: one column more on the right)
            f = rc.nn.functional
            x4 = rc.tensor(values(dtype, "x", (2, 3, 6, 7)), dtype=dtype, device=device,
                           requires_grad=True)
            w4 = rc.tensor(values(dtype, "w", (4, 3, 3, 2)), dtype=dtype, device=device,
                           requires_grad=True)
            b = rc.tensor(values(dtype, "b", (4,)), dtype=dtype, device=device)
            ys = (f.conv2d(x4, w4, b, padding=1),
                  f.conv2d(x4, w4, None, stride=(2, 1), padding=(0, 2), dilation=(1, 2)),
                  f.conv2d(x4, w4, b, padding="same"))
            if op == "conv2d":
                return tuple(y.detach() for y in ys)
            wrt = x4 if op == "conv2d_input_grad" else w4  # (both weight forms: w's gradient)
            return tuple(rc.autograd.grad(y, wrt, rc.tensor(values(dtype, f"g{i}", tuple(y.shape)),
                                                            dtype=dtype, device=device))[0]
                         for i, y in enumerate(ys))
        if op == "sort":
            s = x.sort(1, descending=True)
            s0 = x.sort(0, stable=True)
            return s.values, s.indices, s0.values, s0.indices
        if op == "index_put":
            return _put(x.clone(), rc.tensor([0, 2, 0], device=device), 7)
        if op in _RNN_CELLS:
            return _rnn_cell(op, device, dtype)
        raise KeyError(op)

    return run


_RNN_CELLS = ("lstm_cell", "lstm_cell_backward", "gru_cell", "gru_cell_backward")


def _rnn_cell(op: str, device: str, dtype: Any) -> Any:
    """An LSTMCell's or GRUCell's step (4 rows, input 3, hidden 6), and for a
    backward kernel every gradient of it."""
    rc = _rc()
    cell = (rc.nn.LSTMCell if op.startswith("lstm") else rc.nn.GRUCell)(3, 6, dtype=dtype,
                                                                          device=device)
    with rc.no_grad():
        for name, p in cell.named_parameters():
            p.copy_(rc.tensor(values(dtype, name, tuple(p.shape)) / 2, dtype=dtype))
    x, h, c = (rc.tensor(values(dtype, s, (4, k)), dtype=dtype, device=device,
                         requires_grad=True) for s, k in (("x", 3), ("h", 6), ("c", 6)))
    out = cell(x, (h, c)) if op.startswith("lstm") else (cell(x, h),)
    if not op.endswith("backward"):
        return tuple(o.detach() for o in out)
    sum((o * rc.tensor(values(dtype, f"g{i}", (4, 6)), dtype=dtype, device=device)).sum()
        for i, o in enumerate(out)).backward()
    return tuple(t.grad for t in (x, h) + ((c,) if op.startswith("lstm") else ())) + tuple(
        p.grad for p in cell.parameters())


def check_composite_front(device: str, op: str, dtype: Any) -> tuple[str, float, str]:
    """A composite without a NumPy reference: the device's kernel (through its
    front-end) against the core's decomposition on cpu."""
    run = _front(op)
    try:
        with decomposed_on_cpu(op):
            want = host_values(run("cpu", dtype))
    except Exception as exc:
        return "fail", float("inf"), f"the cpu reference raised {type(exc).__name__}: {exc}".splitlines()[0][:160]
    try:
        got = host_values(run(device, dtype))
    except Exception as exc:
        return "fail", float("inf"), f"{type(exc).__name__}: {exc}".splitlines()[0][:160]
    want = want if isinstance(want, tuple) else (want,)
    got = got if isinstance(got, tuple) else (got,)
    ok, worst, what = compare(got, want, loose=True, tols=SUMS if op in _SUM_OPS else None)
    return ("pass" if ok else "fail"), worst, what
