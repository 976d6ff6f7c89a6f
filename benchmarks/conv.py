"""The cpu backend's conv2d kernels against PyTorch, per layer shape of the conv
models in ``benchmarks/models.py``: forward, input gradient, weight gradient.

    python benchmarks/conv.py                    # 1 thread (the default here)
    python benchmarks/conv.py --threads 2        # both cores
    python benchmarks/conv.py --rounds 40 --layers sr2,d2
    python benchmarks/conv.py --clock cpu        # process CPU time (a busy machine, 1 thread)

Each layer is called as the core calls the kernels (``rtx_cpu.conv_kernels``
on NumPy arrays, the output and im2col buffers preallocated, float32):
``conv2d(out, cols, x, w, bias, ...)``, ``conv2d_input_grad(dx, g, w, ...)``,
``conv2d_weight_grad(dw, g, cols)``. PyTorch's side is
``torch.nn.functional.conv2d`` and ``torch.ops.aten.convolution_backward`` with
one gradient asked for at a time. The ``im2col`` column is the kernels as they
were before the layout work (im2col into (C*kh*kw, N*OH*OW), one matmul, a
transposing copy; the input gradient as W^T @ g and ``kh * kw`` strided adds),
kept here as the NumPy reference; the ``numpy`` column is today's kernels
without their C loops (as where there is no C compiler). One round runs each contender once per cell,
in an order that rotates from round to round; cells show the median ms and the
ratio to PyTorch. The machine is often shared: read ratios, and rerun.

Layers (the ones that reach the kernels; DCGAN's last 4x4 conv takes the
core's dense path):

- ``sr1``..``sr4``: superres (ESPCN) on 16x1x32x32: 1-64 5x5, 64-64, 64-32, 32-9 3x3,
  stride 1, padding 'same' (``sr1``'s input gradient is not used by the model);
- ``d1``..``d3``: DCGAN's discriminator on 32x1x32x32: 1-32, 32-64, 64-128, 4x4
  stride 2 padding 1;
- ``g1``..``g4``: DCGAN's generator, as the conv each ConvTranspose2d is the
  transpose of (its forward is that conv's ``dx``, its backward the conv's
  ``fwd`` and ``dw``): 128-32 4x4 on 4x4 (nz 32 -> 128 at 1x1 -> 4x4), then
  64-128, 32-64, 1-32 4x4 stride 2 padding 1;
- ``c1``, ``c2``: the digits CNN on 64x1x8x8: 1-16 and 16-32 3x3 padding 1.

Which C kernel runs where (``rtx_cpu.cconv``, float32 on AVX-512): the direct
convolution for stride 1 and output rows of 16 or more (sr*); the implicit GEMM
for the other forwards with 16 output channels and positions or more (d2, d3,
g2-g4's fwd, c2), and for the other input gradients with 16 input channels (d2,
d3's dx, g2, g3's dx); else the C im2col / col2im around BLAS.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any, Callable


def _threads_from_argv(argv: list[str]) -> int:
    """``--threads N`` must act before NumPy and PyTorch load their thread pools."""
    for i, a in enumerate(argv):
        val = a.split("=", 1)[1] if a.startswith("--threads=") else \
            argv[i + 1] if a == "--threads" and i + 1 < len(argv) else None
        if val is not None and val.isdigit():
            return int(val)
    return 1


THREADS = _threads_from_argv(sys.argv[1:]) if __name__ == "__main__" else 1
if __name__ == "__main__":
    for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[_var] = str(THREADS)

import numpy as np  # noqa: E402
from numpy.lib.stride_tricks import as_strided  # noqa: E402

import rtxcore  # noqa: E402
from rtx_cpu import cconv  # noqa: E402
from rtx_cpu import conv_kernels as K  # noqa: E402


def _numpy_only(f: Callable[[], Any]) -> Callable[[], Any]:
    """f with cconv's C loops unavailable: the kernels' NumPy forms."""
    def run() -> Any:
        funcs = cconv._load()
        cconv._funcs = {}
        try:
            return f()
        finally:
            cconv._funcs = funcs
    return run

# name: (N, C, H, W, OC, k, stride, padding, dilation)
LAYERS: dict[str, tuple[int, int, int, int, int, int, int, int, int]] = {
    "sr1": (16, 1, 32, 32, 64, 5, 1, 2, 1),
    "sr2": (16, 64, 32, 32, 64, 3, 1, 1, 1),
    "sr3": (16, 64, 32, 32, 32, 3, 1, 1, 1),
    "sr4": (16, 32, 32, 32, 9, 3, 1, 1, 1),
    "d1": (32, 1, 32, 32, 32, 4, 2, 1, 1),
    "d2": (32, 32, 16, 16, 64, 4, 2, 1, 1),
    "d3": (32, 64, 8, 8, 128, 4, 2, 1, 1),
    "g1": (32, 128, 4, 4, 32, 4, 1, 0, 1),
    "g2": (32, 64, 8, 8, 128, 4, 2, 1, 1),
    "g3": (32, 32, 16, 16, 64, 4, 2, 1, 1),
    "g4": (32, 1, 32, 32, 32, 4, 2, 1, 1),
    "c1": (64, 1, 8, 8, 16, 3, 1, 1, 1),
    "c2": (64, 16, 4, 4, 32, 3, 1, 1, 1),
}


# -- the reference: the kernels before the layout work ---------------------------------


def _ref_padded(x: np.ndarray, pads: tuple[int, int, int, int]) -> np.ndarray:
    if not any(pads):
        return x
    n, c, h, w = x.shape
    pt, pb, pl, pr = pads
    xp = np.zeros((n, c, h + pt + pb, w + pl + pr), x.dtype)
    xp[:, :, pt:pt + h, pl:pl + w] = x
    return xp


def ref_conv2d(out: np.ndarray, cols: np.ndarray, x: np.ndarray, weight: np.ndarray,
               bias: np.ndarray | None, stride: tuple[int, int],
               padding: tuple[int, int, int, int], dilation: tuple[int, int]) -> None:
    n, c = x.shape[:2]
    oc, _, kh, kw = weight.shape
    oh, ow = out.shape[2:]
    (sh, sw), (dh, dw) = stride, dilation
    xp = _ref_padded(x, padding)
    s = xp.strides
    windows = as_strided(xp, (c, kh, kw, n, oh, ow),
                         (s[1], s[2] * dh, s[3] * dw, s[0], s[2] * sh, s[3] * sw))
    np.copyto(cols.reshape(c, kh, kw, n, oh, ow), windows)
    y = (weight.reshape(oc, c * kh * kw) @ cols).reshape(oc, n, oh, ow).transpose(1, 0, 2, 3)
    if bias is None:
        np.copyto(out, y)
    else:
        np.add(y, bias.reshape(oc, 1, 1), out=out)


def _ref_rows(g: np.ndarray) -> np.ndarray:
    n, oc, oh, ow = g.shape
    return np.ascontiguousarray(g.transpose(1, 0, 2, 3)).reshape(oc, n * oh * ow)


def ref_conv2d_input_grad(dx: np.ndarray, g: np.ndarray, weight: np.ndarray,
                          stride: tuple[int, int], padding: tuple[int, int, int, int],
                          dilation: tuple[int, int]) -> None:
    n, c, h, w = dx.shape
    oc, _, kh, kw = weight.shape
    oh, ow = g.shape[2:]
    (sh, sw), (dh, dw) = stride, dilation
    pt, pb, pl, pr = padding
    d6 = (weight.reshape(oc, c * kh * kw).T @ _ref_rows(g)).reshape(c, kh, kw, n, oh, ow)
    dxp = np.zeros((n, c, h + pt + pb, w + pl + pr), dx.dtype)
    hspan, wspan = sh * (oh - 1) + 1, sw * (ow - 1) + 1
    for i in range(kh):
        for j in range(kw):
            dst = dxp[:, :, i * dh:i * dh + hspan:sh, j * dw:j * dw + wspan:sw]
            np.add(dst, d6[:, i, j].transpose(1, 0, 2, 3), out=dst)
    np.copyto(dx, dxp[:, :, pt:pt + h, pl:pl + w])


def ref_conv2d_weight_grad(dweight: np.ndarray, g: np.ndarray, cols: np.ndarray) -> None:
    np.copyto(dweight, (_ref_rows(g) @ cols.T).reshape(dweight.shape))


# -- the cells ---------------------------------------------------------------------------


def _cells(name: str, torch: Any) -> dict[str, dict[str, Callable[[], Any]]]:
    """{pass: {contender: a call}} for one layer, every call checked against
    PyTorch's (or the reference's) result once."""
    n, c, h, w, oc, k, s, p, d = LAYERS[name]
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, c, h, w), dtype=np.float32)
    wt = (rng.standard_normal((oc, c, k, k)) / np.sqrt(c * k * k)).astype(np.float32)
    bias = rng.standard_normal(oc, dtype=np.float32)
    stride, pads, dil = (s, s), (p, p, p, p), (d, d)
    oh = (h + 2 * p - d * (k - 1) - 1) // s + 1
    ow = (w + 2 * p - d * (k - 1) - 1) // s + 1
    g = rng.standard_normal((n, oc, oh, ow), dtype=np.float32)
    out = np.empty((n, oc, oh, ow), np.float32)
    cols = np.empty((c * k * k, n * oh * ow), np.float32)
    dx = np.empty_like(x)
    dwt = np.empty_like(wt)
    ref_cols = np.empty_like(cols)
    K.conv2d(out, cols, x, wt, bias, stride, pads, dil)  # cols for the weight gradient
    ref_conv2d(out, ref_cols, x, wt, bias, stride, pads, dil)
    kw = dict(stride=stride, padding=pads, dilation=dil)
    cells: dict[str, dict[str, Callable[[], Any]]] = {
        "fwd": {"rtxcore": lambda: K.conv2d(out, cols, x, wt, bias, stride, pads, dil),
                "im2col": lambda: ref_conv2d(out, ref_cols, x, wt, bias, stride, pads, dil)},
        "dx": {"rtxcore": lambda: K.conv2d_input_grad(dx, g, wt, stride, pads, dil),
               "im2col": lambda: ref_conv2d_input_grad(dx, g, wt, stride, pads, dil)},
        "dw": {"rtxcore": lambda: K.conv2d_weight_grad(dwt, g, cols),
               "im2col": lambda: ref_conv2d_weight_grad(dwt, g, ref_cols)},
    }
    for calls in cells.values():
        calls["numpy"] = _numpy_only(calls["rtxcore"])
    want: dict[str, np.ndarray] = {}
    if torch is not None:
        tx, tw, tb, tg = (torch.from_numpy(a) for a in (x, wt, bias, g))
        conv = torch.nn.functional.conv2d
        cb = torch.ops.aten.convolution_backward
        args = ([s, s], [p, p], [d, d], False, [0, 0], 1)
        cells["fwd"]["torch"] = lambda: conv(tx, tw, tb, s, p, d)
        cells["dx"]["torch"] = lambda: cb(tg, tx, tw, None, *args, [True, False, False])
        cells["dw"]["torch"] = lambda: cb(tg, tx, tw, None, *args, [False, True, False])
        want = {"fwd": cells["fwd"]["torch"]().numpy(),
                "dx": cells["dx"]["torch"]()[0].numpy(),
                "dw": cells["dw"]["torch"]()[1].numpy()}
    got = {"fwd": out, "dx": dx, "dw": dwt}
    for pas, calls in cells.items():
        for who in ("im2col", "numpy", "rtxcore"):
            calls[who]()
            res = got[pas].copy()
            if pas not in want:
                want[pas] = res
            err = np.abs(res - want[pas]).max() / max(np.abs(want[pas]).max(), 1e-30)
            if err > 1e-4:
                raise SystemExit(f"{name} {pas} {who}: relative error {err:.2e}")
    return cells


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=1, help="BLAS/OpenMP/torch threads (1)")
    ap.add_argument("--rounds", type=int, default=25)
    ap.add_argument("--layers", default=",".join(LAYERS))
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="wall (perf_counter) or this process's CPU time (1 thread only)")
    ap.add_argument("--no-torch", action="store_true")
    args = ap.parse_args()
    rtxcore.set_num_threads(args.threads)  # (the kernels' split of a batch)
    torch = None
    if not args.no_torch:
        try:
            import torch
            torch.set_num_threads(args.threads)
        except ImportError:
            torch = None
    clock = time.perf_counter if args.clock == "wall" else time.process_time
    names = [s for s in args.layers.split(",") if s]
    who_all = ["rtxcore", "numpy", "im2col"] + (["torch"] if torch is not None else [])
    print(f"conv2d kernels, float32, {args.threads} thread(s), median of {args.rounds} rounds "
          f"({args.clock} clock), ms" + ("; ratio = / torch" if torch is not None else ""))
    head = f"{'layer':6} {'pass':4} " + " ".join(f"{w:>9}" for w in who_all)
    if torch is not None:
        head += f" {'rtx/torch':>9} {'i2c/torch':>9}"
    print(head)
    tot = {w: 0.0 for w in who_all}
    for name in names:
        cells = _cells(name, torch)
        for pas, calls in cells.items():
            times: dict[str, list[float]] = {w: [] for w in calls}
            order = list(calls)
            for _ in range(2):
                for f in calls.values():
                    f()
            for r in range(args.rounds):
                for who in order[r % len(order):] + order[:r % len(order)]:
                    t0 = clock()
                    calls[who]()
                    times[who].append(clock() - t0)
            med = {w: statistics.median(v) * 1e3 for w, v in times.items()}
            for w in med:
                tot[w] += med[w]
            row = f"{name:6} {pas:4} " + " ".join(f"{med[w]:9.3f}" for w in who_all)
            if torch is not None:
                t = med["torch"]
                row += f" {med['rtxcore'] / t:8.2f}x {med['im2col'] / t:8.2f}x"
            print(row, flush=True)
    row = f"{'total':11} " + " ".join(f"{tot[w]:9.3f}" for w in who_all)
    if torch is not None:
        row += f" {tot['rtxcore'] / tot['torch']:8.2f}x {tot['im2col'] / tot['torch']:8.2f}x"
    print(row)


if __name__ == "__main__":
    main()
