"""One kernel called alone on a device: its inputs (``Arr``) copied there and
laid out with views, its outputs allocated with ``empty`` and read back with
``to_host`` (``Call``, ``run_call``); a batch input broadcast over a stride-0
dimension (``_Batch``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .arrays import _rc, dtype_named, laid_out, logical


class Arr:
    """A kernel input: ``a`` laid out on the device (``layout``) as ``dtype``."""

    def __init__(self, a: np.ndarray, layout: str = "contiguous", dtype: Any = None) -> None:
        self.a, self.layout = np.asarray(a), layout
        self.dtype = dtype

    @property
    def value(self) -> np.ndarray:
        return logical(self.a, self.layout) if self.a.ndim == 2 else self.a


class Call:
    """One kernel call: outputs (shape, dtype) to allocate -- or ``inplace``, an
    input index whose view is also the output -- the inputs, and the expected
    results (NumPy arrays, one per output)."""

    def __init__(self, label: str, outs: list[tuple[tuple[int, ...], Any]], args: list[Any],
                 want: Any, inplace: int | None = None, loose: bool = False,
                 target_only: bool = False) -> None:
        self.label, self.outs, self.args, self.want = label, outs, args, want
        self.inplace, self.loose = inplace, loose
        self.target_only = target_only  # the kernel takes the target once (scatter_add)


class _Batch(Arr):
    """``a`` expanded to a batch of 2 with a stride-0 batch dimension."""

    def __init__(self, a: np.ndarray, dtype: Any) -> None:
        super().__init__(a, "contiguous", dtype)


def _dev_arg(device: str, a: Any, keep: list[Any]) -> Any:
    from ..ops.core import view_of

    rc = _rc()
    if isinstance(a, _Batch):  # a batch of 2, its stride 0
        t = rc.tensor(a.a, dtype=a.dtype, device=device)
        keep.append(t)
        return view_of(t.expand(2, *a.a.shape))
    if isinstance(a, Arr):
        dt = a.dtype or dtype_named("bool" if a.a.dtype == np.bool_ else a.a.dtype.name)
        t = laid_out(device, a.a, a.layout, dt) if a.a.ndim == 2 else rc.tensor(a.a, dtype=dt, device=device)
        keep.append(t)
        return view_of(t)
    if isinstance(a, tuple):
        return tuple(_dev_arg(device, e, keep) for e in a)
    return a


def run_call(device: str, op: str, call: Call) -> tuple[np.ndarray, ...]:
    """Run ``op``'s kernel on ``device`` for ``call``; the outputs, on the host."""
    from ..ops import core

    dev = core.ready_device(device)
    k = core.kernel(dev, op)  # (the CPU fallback's when allowed; else it raises, naming op)
    keep: list[Any] = []
    args = [_dev_arg(device, a, keep) for a in call.args]
    with np.errstate(all="ignore"):  # (special values overflow on purpose)
        if call.inplace is not None:
            target = keep[sum(isinstance(a, Arr) for a in call.args[:call.inplace])]
            k(*args) if call.target_only else k(args[call.inplace], *args)
            return (target.cpu().numpy(),)
        outs = [core.empty(tuple(shape), dtype_named(dt) if isinstance(dt, str) else dt, dev)
                for shape, dt in call.outs]
        k(*[core.view_of(o) for o in outs], *args)
        got = tuple(o.cpu().numpy() for o in outs)
        form = getattr(k, "functional", None)
        if form is not None and len(outs) == 1:  # a functional kernel: both forms checked
            _same_as_functional(op, form, outs[0], args, got[0])
    return got


def _same_as_functional(op: str, form: Any, out: Any, args: list[Any], want: np.ndarray) -> None:
    """The functional form (dispatch.functional) gives what the out= form wrote."""
    from ..dispatch.backend import Out
    from ..ops.alloc import adopted

    dev = out._device
    r = adopted(dev, form(Out(out._shape, out._dtype), *args), out._shape, out._dtype)
    got = r.cpu().numpy()
    same = got.shape == want.shape and got.dtype == want.dtype and bool(
        np.array_equal(got, want, equal_nan=want.dtype.kind == "f"))
    if not same:
        raise AssertionError(f"{op}'s functional form gives {got.ravel()[:4]} ({got.dtype}"
                             f"{list(got.shape)}) where its out= form wrote {want.ravel()[:4]} "
                             f"({want.dtype}{list(want.shape)})")
