"""Test arrays for the conformance rows: seeded values of each dtype with its
special values, laid out on a device in each layout a kernel must handle (see
``layouts``), and compared with their references within per-dtype tolerances.
"""

from __future__ import annotations

import math
import zlib
from typing import Any

import numpy as np

from ..dispatch import ops as OPS

LAYOUTS = ("contiguous", "transposed", "sliced", "offset", "broadcast", "empty", "scalar")
SHAPE = (4, 6)
# per-element tolerance: |got - want| <= RTOL * max(1, |want|)
RTOL = {"float16": 2e-3, "float32": 2e-5, "float64": 1e-12}
# transcendental kernels are allowed a few ulps more (OpenCL's limits are 3-4 ulp)
LOOSE = {"float16": 4e-3, "float32": 1e-4, "float64": 1e-9}
_LOOSE_OPS = {"exp", "log", "sin", "cos", "tanh", "expm1", "log1p", "log2", "tan",
              "sigmoid", "erf", "pow", "softmax", "log_softmax", "gelu", "gelu_backward",
              "layer_norm", "layer_norm_backward", "batch_norm", "batch_norm_backward", "lstm_cell", "lstm_cell_backward", "gru_cell",
              "gru_cell_backward", "softmax_backward", "log_softmax_backward"}

# sums over many products: the core's own conv2d rounds each of its kh*kw col2im
# adds in float16, a kernel may accumulate in float32 and round once (as PyTorch's)
SUMS = {"float16": 1e-2, "float32": 1e-4, "float64": 1e-9}
_SUM_OPS = {"conv2d", "conv2d_input_grad", "conv2d_weight_grad", "conv2d_weight_grad_x"}

NA = object()  # the layout does not apply to this case (said by the case, never guessed)


def _rc() -> Any:
    import rtxcore

    return rtxcore


def stable_seed(name: str) -> int:
    """A seed from a name, the same in every process (``hash`` is salted)."""
    return zlib.crc32(name.encode())


def claimed_dtypes(device: str, op: str) -> list[Any]:
    """The dtypes ``device`` claims for ``op``: its dtypes, narrowed by the
    backend's per-op limits and by the dtypes the core ever sends that kernel."""
    from ..ops.core import ready_device

    dev = ready_device(device)
    names = {d.name for d in dev._dtypes}
    limit = dev._limits.get(op)  # (normalised when the device was bound)
    if limit is not None:
        names &= limit
    s = OPS.PRIMITIVES.get(op) or OPS.COMPOSITES.get(op)
    if s is not None:
        names &= set(OPS.kernel_dtypes(s))
    return [dtype_named(n) for n in OPS.DOMAINS["all"] if n in names]


def dtype_named(name: str) -> Any:
    from ..dtype import BY_NAME

    return BY_NAME[name]


def special_values(dtype: Any) -> list[Any]:
    """±0, nan, ±inf, exact halves, the dtype's extremes (float max and tiny,
    int min and max)."""
    if dtype.name == "bool":
        return [False, True]
    if dtype.kind == "f":
        fi = np.finfo(dtype.numpy)
        return [0.0, -0.0, math.nan, math.inf, -math.inf, 0.5, 2.5, -1.5,
                float(fi.max), -float(fi.max), float(fi.tiny), -float(fi.tiny)]
    ii = np.iinfo(dtype.numpy)
    return [0, 1, int(ii.max), int(ii.min)] + ([] if dtype.kind == "u" else [-1])


def values(dtype: Any, seed: int | str, shape: tuple[int, ...] = SHAPE, positive: bool = False,
           special: bool = False, exclude: tuple[Any, ...] = ()) -> np.ndarray:
    """Seeded test values of ``dtype``: floats in (-3, 3) (or (0.1, 3)), small
    integers, random bools; with ``special``, the special values at seeded places
    (first those in ``exclude`` left out, compared by value)."""
    rng = np.random.default_rng(stable_seed(seed) if isinstance(seed, str) else seed)
    if dtype.name == "bool":
        return rng.random(shape) < 0.5
    if dtype.kind == "f":
        lo = 0.1 if positive else -3.0
        a = rng.uniform(lo, 3.0, shape).astype(dtype.numpy)
    else:
        lo = 1 if positive else (0 if dtype.kind == "u" else -5)
        a = rng.integers(lo, 6, shape).astype(dtype.numpy)
    if special and a.size:
        sv = [v for v in special_values(dtype)
              if not any(v == e or (v != v and e != e) for e in exclude)]
        flat = a.reshape(-1)
        for pos, v in zip(rng.permutation(flat.size), sv):
            flat[pos] = v
    return a


def logical(a: np.ndarray, layout: str) -> np.ndarray:
    """The values a tensor laid out by :func:`laid_out` holds."""
    if layout == "broadcast":
        return np.broadcast_to(a[:1], a.shape).copy()
    if layout == "empty":
        return a[:0]
    if layout == "scalar":
        return a[0, 0].copy() if a.ndim == 2 else a.reshape(-1)[0].copy()
    return a


def laid_out(device: str, a: np.ndarray, layout: str, dtype: Any) -> Any:
    """``a`` (2-D) on ``device`` in ``layout``: a tensor whose values are those
    of ``a`` (or its first row, first element, no rows) with that layout. Only
    ``from_host`` runs on the device: the rest are views."""
    rc = _rc()
    if layout == "contiguous":
        return rc.tensor(a, dtype=dtype, device=device)
    if layout == "transposed":
        return rc.tensor(np.ascontiguousarray(a.T), dtype=dtype, device=device).t()
    if layout == "sliced":
        wide = np.zeros((a.shape[0], a.shape[1] * 2), a.dtype)
        wide[:, ::2] = a
        return rc.tensor(wide, dtype=dtype, device=device)[:, ::2]
    if layout == "offset":
        tall = np.zeros((a.shape[0] + 1, a.shape[1]), a.dtype)
        tall[1:] = a
        return rc.tensor(tall, dtype=dtype, device=device)[1:]
    if layout == "broadcast":
        return rc.tensor(a[:1], dtype=dtype, device=device).expand(*a.shape)
    if layout == "empty":
        return rc.tensor(a[:0], dtype=dtype, device=device)
    if layout == "scalar":
        return rc.tensor(a[0, 0], dtype=dtype, device=device)
    raise ValueError(f"unknown layout {layout!r}")


def _np(dtype: Any) -> Any:
    return np.bool_ if dtype.name == "bool" else dtype.numpy


def _scalar(v: Any, dtype: Any) -> Any:
    """A Python scalar already converted to ``dtype`` (the kernel convention)."""
    if dtype.name == "bool":
        return bool(v)
    return float(v) if dtype.kind == "f" else int(v)


# -- comparing ---------------------------------------------------------------------------------


def host_values(r: Any) -> Any:
    """A case's result(s) as NumPy arrays (metadata and statistics as they are)."""
    if isinstance(r, tuple) and r and isinstance(r[0], str):
        return r  # metadata or statistics: compared as they are
    if isinstance(r, (tuple, list)):
        return tuple(host_values(e) for e in r)
    return r.cpu().numpy()


def _plain(v: Any) -> Any:
    """A NumPy scalar as the Python number it holds (so a message reads -2.5)."""
    return v.item() if isinstance(v, np.generic) else v


def inputs_at(inputs: list[tuple[str, Any]] | None, shape: tuple[int, ...],
              i: tuple[int, ...]) -> str:
    """``"; from x=-1.5, y=2.0"``: each input's value at result index ``i`` (an
    input of the result's shape, or broadcast to it, or a number); "" if none."""
    shown = []
    for name, v in inputs or []:
        if isinstance(v, (bool, int, float, np.number, np.bool_)):
            shown.append(f"{name}={_plain(v)!r}")
            continue
        a = np.asarray(v)
        try:
            shown.append(f"{name}={_plain(np.broadcast_to(a, shape)[i])!r}")
        except ValueError:  # (not elementwise: a reduction's or gather's input)
            if a.size <= 8:
                shown.append(f"{name}={a.tolist()!r}")
    return f"; from {', '.join(shown)}" if shown else ""


def compare(got: Any, want: Any, loose: bool = False,
            tols: dict[str, float] | None = None,
            inputs: list[tuple[str, Any]] | None = None) -> tuple[bool, float, str]:
    """(ok, worst difference relative to max(1, |want|), what differs); ``tols``
    (per dtype name) overrides the tolerance; ``inputs`` (name, host value) are
    shown at the first difference."""
    if isinstance(want, tuple) and want and isinstance(want[0], str):
        if want[0] == "stats":
            ok = got[1] and got[2]
            return ok, 0.0, "" if ok else f"random numbers: same seed repeats={got[1]}, statistics ok={got[2]}"
        return got == want, 0.0, "" if got == want else f"got {got}, want {want}"
    if isinstance(want, tuple):
        if not isinstance(got, tuple) or len(got) != len(want):
            return False, float("inf"), "different number of results"
        worst, ok, what = 0.0, True, ""
        for g, w in zip(got, want):
            o, d, m = compare(g, w, loose, tols, inputs)
            worst = max(worst, d)
            if not o and ok:
                ok, what = False, m
        return ok, worst, what
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape or got.dtype != want.dtype:
        return False, float("inf"), f"got {got.dtype}{list(got.shape)}, want {want.dtype}{list(want.shape)}"
    if want.size == 0:
        return True, 0.0, ""
    if want.dtype.kind == "f":
        g, w = got.astype(np.float64), want.astype(np.float64)
        nan_g, nan_w = np.isnan(g), np.isnan(w)
        fin = ~nan_w & ~nan_g
        inf_bad = fin & (np.isinf(g) | np.isinf(w)) & (g != w)
        finite = fin & ~np.isinf(g) & ~np.isinf(w)
        rel = np.zeros(w.shape)
        with np.errstate(over="ignore"):  # (float64 extremes differ by more than max)
            rel[finite] = np.abs(g[finite] - w[finite]) / np.maximum(1.0, np.abs(w[finite]))
        err = float(rel.max(initial=0.0))
        tol = (tols or (LOOSE if loose else RTOL)).get(want.dtype.name, 2e-5)
        bad = (nan_g != nan_w) | inf_bad | (rel > tol)
        if not bad.any():
            return True, err, ""
        i = tuple(int(v) for v in np.argwhere(bad)[0])
        what = f"worst difference {err:.3g} > {tol:.2g}" if (rel > tol).any() else "nan/inf in different places"
        return False, (float("inf") if not (rel > tol).any() else err), (
            f"{what}: {int(bad.sum())} of {w.size} differ; first at {i}: got {_plain(g[i])!r}, "
            f"want {_plain(w[i])!r}{inputs_at(inputs, w.shape, i)}")
    diff = got.astype(np.int64) != want.astype(np.int64) if want.dtype.kind in "biu" else got != want
    if not diff.any():
        return True, 0.0, ""
    i = tuple(int(v) for v in np.argwhere(diff)[0])
    return False, float("inf"), (f"{int(diff.sum())} of {want.size} differ (exact expected); first "
                                 f"at {i}: got {_plain(got[i])!r}, want {_plain(want[i])!r}"
                                 f"{inputs_at(inputs, want.shape, i)}")
