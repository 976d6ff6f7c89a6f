"""Row-wise composite kernels on OpenCL: ``softmax``, ``log_softmax``, their
backwards, ``layer_norm`` and its backward (``rtxcore.dispatch.ops`` states them).

The core builds each from a max, a sum or two and several elementwise kernels,
six to twelve launches with tensor-sized temporaries; on PoCL, where a launch
costs ~10 us and each pass runs on the cores the host uses, a transformer's
normalisations were a third of its step. Here one work item owns one row (one
slice along the axis, any strides, the other dims coalesced into rows) and
makes its passes over it in registers and cache: the row's max, its sum, its
outputs. That is the fastest shape on a CPU device for the rows models have
(tens to a few thousand elements; the rows are many); a row's result depends on
that row alone, in a fixed order.

The steps are the core's formulas in their order (softmax: ``exp(x - max)``
over its sum; log_softmax: ``(x - max) - log(sum)``; the backwards
``y * (g - sum(g * y))`` and ``g - exp(y) * sum(g)``; layer_norm's biased
variance of ``x - mean``, ``(x - mean) * rstd`` then weight and bias; its
backward's closed form, and the parameters' column sums one work item a
column). float16 loads and stores half and computes in float.
"""

from __future__ import annotations

from math import prod
from typing import Any

from rtxcore.dispatch import View

from . import codegen as C
from . import launch as L


def _rows(views: list[View], axis: int) -> tuple[list[int], list[list[int]], list[int], int]:
    """(outer dims, each view's outer strides, each view's stride along ``axis``,
    the axis length): every view of one shape seen as rows along ``axis``."""
    shape = list(views[0].shape)
    axis %= len(shape)
    outer = tuple(s for d, s in enumerate(shape) if d != axis) or (1,)
    strides = [tuple(st for d, st in enumerate(v.strides) if d != axis) or (0,) for v in views]
    dims, sts = L.coalesce(outer, strides)
    return dims, sts, [v.strides[axis] for v in views], shape[axis]


def _source(title: str, dt: str, rank: int, names: list[str], outs: set[str],
            body: str, extra: list[tuple[str, str]] = ()) -> tuple[str, list[str]]:
    params, kinds = [], []
    for n in names:
        q = "" if n in outs else "const "
        params += [f"__global {q}{C.CTYPE[dt][0]} *{n}", f"long {n}_o", f"long {n}a"]
        params += [f"long {n}s{d}" for d in range(rank)]
        kinds += ["buf", "long", "long"] + ["long"] * rank
    params += [f"long n{d}" for d in range(1, rank)] + ["long N"]
    kinds += ["long"] * rank
    for decl, kind in extra:
        params.append(decl)
        kinds.append(kind)
    # (the body in a block of its own: its names may be the index math's)
    full = C.index_math(rank, names) + "\n    {\n    " + body + "\n    }"
    return C.kernel_source(f"{title}, {dt}", {dt}, params, full), kinds


def _ld(dt: str, n: str, j: str = "j") -> str:
    return f"((CT){C.load(dt, n, f'p_{n} + {j} * {n}a')})"


def _st(dt: str, n: str, value: str, j: str = "j") -> str:
    return C.store(dt, n, f"p_{n} + {j} * {n}a", value)


def _ct(dt: str) -> str:
    return f"#undef CT\n#define CT {C.CTYPE[dt][1]}\n"


def _softmax_body(dt: str, log: bool) -> str:
    x = _ld(dt, "px")
    head = _ct(dt) + f"""CT m = -INFINITY;
    for (long j = 0; j < N; j++) {{ const CT v = {x}; m = (ISNAN(v) || v > m) ? v : m; }}
    CT s = 0;
"""
    if log:
        return head + f"""    for (long j = 0; j < N; j++) s += exp({x} - m);
    const CT lse = log(s);
    for (long j = 0; j < N; j++) {{ {_st(dt, "po", f"({x} - m) - lse")} }}"""
    # (exp once an element: stored, summed, then scaled)
    return head + f"""    for (long j = 0; j < N; j++) {{ const CT e = exp({x} - m); s += e; {_st(dt, "po", "e")} }}
    for (long j = 0; j < N; j++) {{ {_st(dt, "po", f"{_ld(dt, 'po')} / s")} }}"""


def _softmax_backward_body(dt: str, log: bool) -> str:
    g, y = _ld(dt, "pg"), _ld(dt, "py")
    if log:
        return _ct(dt) + f"""CT s = 0;
    for (long j = 0; j < N; j++) s += {g};
    for (long j = 0; j < N; j++) {{ {_st(dt, "po", f"{g} - exp({y}) * s")} }}"""
    return _ct(dt) + f"""CT s = 0;
    for (long j = 0; j < N; j++) s += {g} * {y};
    for (long j = 0; j < N; j++) {{ {_st(dt, "po", f"{y} * ({g} - s)")} }}"""


def _launch(key: tuple, make: Any, views: list[View], axis: int, extra: list[Any] = ()) -> None:
    dims, sts, ax, n = _rows(views, axis)
    rows = prod(dims)
    if rows == 0 or n == 0:
        return
    dev = views[0].buffer.dev
    k = L.kernel(dev, key + (len(dims),), lambda: make(len(dims)))
    args: list[Any] = []
    for v, st, a in zip(views, sts, ax):
        args += [v.buffer.mem, v.offset, a, *st]
    L.enqueue(dev, k, rows, args + dims[1:] + [n] + list(extra))


def _scan(op: str, log: bool, backward: bool) -> Any:
    names = ["po", "pg", "py"] if backward else ["po", "px"]

    def kernel(out: View, *ops: Any) -> None:
        *views, axis = ops
        dt = out.dtype.name
        body = _softmax_backward_body(dt, log) if backward else _softmax_body(dt, log)
        _launch((op, dt), lambda rank: _source(op, dt, rank, names, {"po"}, body),
                [out, *views], axis)

    kernel.__name__ = op
    return kernel


# -- layer_norm ---------------------------------------------------------------------------


def _layer_norm_body(dt: str, w: bool, b: bool) -> str:
    x = _ld(dt, "px")
    y = "(xc * r)" + (f" * {_ld(dt, 'pw', 'j')}" if w else "") + \
        (f" + {_ld(dt, 'pb', 'j')}" if b else "")
    return _ct(dt) + f"""CT s = 0;
    for (long j = 0; j < N; j++) s += {x};
    const CT mu = s / (CT)N;
    CT q = 0;
    for (long j = 0; j < N; j++) {{ const CT d = {x} - mu; q += d * d; }}
    const CT r = (CT)1 / sqrt(q / (CT)N + (CT)eps);
    {_st(dt, "pm", "mu", "0")}
    {_st(dt, "pr", "r", "0")}
    for (long j = 0; j < N; j++) {{ const CT xc = {x} - mu; {_st(dt, "po", y)} }}"""


def _layer_norm_backward_body(dt: str, w: bool) -> str:
    x, g = _ld(dt, "px"), _ld(dt, "pg")
    gw = f"({g} * {_ld(dt, 'pw', 'j')})" if w else g
    return _ct(dt) + f"""const CT mu = {_ld(dt, "pm", "0")}, r = {_ld(dt, "pr", "0")};
    CT a = 0, c = 0;
    for (long j = 0; j < N; j++) {{ const CT q = {gw}; a += q; c += q * ({x} - mu); }}
    a = a / (CT)N;
    c = c / (CT)N * r * r;
    for (long j = 0; j < N; j++) {{
        const CT q = {gw};
        {_st(dt, "po", f"((q - ({x} - mu) * c) - a) * r")}
    }}"""


def _layer_norm_params_source(dt: str) -> tuple[str, list[str]]:
    """Column j of x, g (M, N) rows: out[0, j] = sum of g * xhat, out[1, j] = sum of g."""
    params, kinds = [], []
    for n, const in (("po", False), ("pg", True), ("px", True), ("pm", True), ("pr", True)):
        p, k = C.ptr_params(n, dt, 2, const)
        params += p
        kinds += k
    params += ["long M"]
    kinds += ["long"]

    def ld(n: str, row: str, col: str) -> str:
        return f"((CT){C.load(dt, n, f'{n}_o + {row} * {n}s0 + {col} * {n}s1')})"

    body = _ct(dt) + f"""CT sw = 0, sb = 0;
    for (long m = 0; m < M; m++) {{
        const CT g = {ld("pg", "m", "i")};
        sw += g * (({ld("px", "m", "i")} - {ld("pm", "m", "0")}) * {ld("pr", "m", "0")});
        sb += g;
    }}
    {C.store(dt, "po", "po_o + i * pos1", "sw")}
    {C.store(dt, "po", "po_o + pos0 + i * pos1", "sb")}"""
    return C.kernel_source(f"layer_norm_backward's parameter sums, {dt}", {dt}, params,
                           body), kinds


def layer_norm(out: View, mean: View, rstd: View, x: View, weight: View | None,
               bias: View | None, eps: float) -> None:
    dt = x.dtype.name
    w, b = weight is not None, bias is not None
    names = ["po", "pm", "pr", "px"] + (["pw"] if w else []) + (["pb"] if b else [])
    m, n = x.shape
    # (mean, rstd: one element a row, the "axis" of stride 0; weight, bias: the
    # same (N,) for every row, seen with a row stride of 0)
    dev = x.buffer.dev
    if m == 0 or n == 0:
        return
    k = L.kernel(dev, ("layer_norm", dt, w, b), lambda: _source(
        "layer_norm", dt, 1, names, {"po", "pm", "pr"}, _layer_norm_body(dt, w, b),
        [(f"{C.CTYPE[dt][1]} eps", "float64" if dt == "float64" else "float32")]))
    args: list[Any] = [out.buffer.mem, out.offset, out.strides[1], out.strides[0],
                       mean.buffer.mem, mean.offset, 0, mean.strides[0],
                       rstd.buffer.mem, rstd.offset, 0, rstd.strides[0],
                       x.buffer.mem, x.offset, x.strides[1], x.strides[0]]
    for p in (weight, bias):
        if p is not None:
            args += [p.buffer.mem, p.offset, p.strides[0], 0]
    L.enqueue(dev, k, m, args + [n, eps])


def layer_norm_backward(out: View, g: View, x: View, mean: View, rstd: View,
                        weight: View | None) -> None:
    dt = x.dtype.name
    w = weight is not None
    m, n = x.shape
    dev = x.buffer.dev
    if m == 0 or n == 0:
        return
    names = ["po", "pg", "px", "pm", "pr"] + (["pw"] if w else [])
    k = L.kernel(dev, ("layer_norm_backward", dt, w), lambda: _source(
        "layer_norm_backward", dt, 1, names, {"po"}, _layer_norm_backward_body(dt, w)))
    args: list[Any] = [out.buffer.mem, out.offset, out.strides[1], out.strides[0],
                       g.buffer.mem, g.offset, g.strides[1], g.strides[0],
                       x.buffer.mem, x.offset, x.strides[1], x.strides[0],
                       mean.buffer.mem, mean.offset, 0, mean.strides[0],
                       rstd.buffer.mem, rstd.offset, 0, rstd.strides[0]]
    if w:
        args += [weight.buffer.mem, weight.offset, weight.strides[0], 0]
    L.enqueue(dev, k, m, args + [n])
    if out.shape[0] > m:  # the parameters' sums into rows m, m + 1
        kp = L.kernel(dev, ("layer_norm_backward params", dt),
                      lambda: _layer_norm_params_source(dt))
        pargs: list[Any] = [out.buffer.mem, out.offset + m * out.strides[0], *out.strides]
        for v in (g, x, mean, rstd):
            pargs += [v.buffer.mem, v.offset, *v.strides]
        L.enqueue(dev, kp, n, pargs + [m])


KERNELS = {
    "softmax": _scan("softmax", False, False),
    "log_softmax": _scan("log_softmax", True, False),
    "softmax_backward": _scan("softmax_backward", False, True),
    "log_softmax_backward": _scan("log_softmax_backward", True, True),
    "layer_norm": layer_norm,
    "layer_norm_backward": layer_norm_backward,
}
