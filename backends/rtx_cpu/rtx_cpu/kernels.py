"""Every primitive (and a few composites) on NumPy. Most kernels are the
NumPy-API table shared with other array-module backends
(``rtxcore.dispatch.xp``); here are what is particular to the CPU: allocation
from the buffer pool, zero-copy transfers, random numbers and ``erf``. Views
arrive as ndarrays already broadcast and promoted; each kernel writes into ``out``."""

from __future__ import annotations

import threading
import warnings
from typing import Any, Callable

import numpy as np

from rtxcore.dispatch import xp

from . import fused, memory
from .conv_kernels import KERNELS as _CONV_KERNELS
from .window_kernels import max_pool2d_tiled, max_pool2d_tiled_backward

# PyTorch computes log(0) = -inf and 1/0 = inf silently; so do we. Only warnings
# raised from the kernels' module are ignored, and at no per-op cost (np.errstate
# costs about 1 us a call, more than a tiny add).
warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"rtxcore\.dispatch\.xp")
warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"rtx_cpu\.(kernels|fused)")


# -- memory: a buffer is any C-contiguous ndarray; views are ndarrays over it

def empty(shape: tuple[int, ...], dtype: Any, index: int) -> tuple[np.ndarray, np.ndarray]:
    a = np.empty(shape, dtype.numpy)
    if a.nbytes >= memory.POOL_MIN_BYTES:  # rare and slow anyway: the check stays cheap
        a = memory.empty(shape, dtype.numpy)
    return a, a


def from_host(arr: np.ndarray, dtype: Any, index: int) -> tuple[np.ndarray, np.ndarray]:
    return arr, arr  # shares the caller's array: the host is our device


def to_host(x: np.ndarray) -> np.ndarray:
    return x


def _rng(seed: int, offset: int) -> np.random.Generator:
    return np.random.Generator(np.random.Philox(key=seed, counter=offset))


def _draw_dtype(out: np.ndarray) -> Any:
    return np.float64 if out.dtype == np.float64 else np.float32


def uniform(out: np.ndarray, low: float, high: float, seed: int, offset: int) -> None:
    if out.dtype == np.float16:
        # 11 random bits, exact in float16: a float32 draw near 1 rounds up to 1.0
        # in float16, outside [0, 1) (PyTorch draws half the same way)
        bits = _rng(seed, offset).integers(0, 1 << 11, out.shape)
        u = bits.astype(np.float32) * np.float32(2.0 ** -11)
        np.copyto(out, u * np.float32(high - low) + np.float32(low), casting="unsafe")
        return
    u = _rng(seed, offset).random(out.shape, dtype=_draw_dtype(out))
    np.copyto(out, u * (high - low) + low, casting="unsafe")


def normal(out: np.ndarray, mean: float, std: float, seed: int, offset: int) -> None:
    z = _rng(seed, offset).standard_normal(out.shape, dtype=_draw_dtype(out))
    np.copyto(out, z * std + mean, casting="unsafe")


# -- erf, vectorised (NumPy has none; math.erf element by element costs ~0.1 s per
# million). float64: fdlibm's piecewise rational approximations (s_erf.c, < 1 ulp),
# each evaluated on its own elements only. float32 (and float16, through float32):
# one rational function of x**2 on x clipped to [-4, 4] (Eigen's and XLA's float
# erf; max error 4e-7, about 3 float32 ulps near 1), evaluated in place in blocks
# that stay in cache.

_ERX = 8.45062911510467529297e-01
# erf on |x| < 0.84375: x + x * P(x^2) / Q(x^2)
_PP = (1.28379167095512558561e-01, -3.25042107247001499370e-01, -2.84817495755985104766e-02,
       -5.77027029648944159157e-03, -2.37630166566501626084e-05)
_QQ = (1.0, 3.97917223959155352819e-01, 6.50222499887672944485e-02, 5.08130628187576562776e-03,
       1.32494738004321644526e-04, -3.96022827877536812320e-06)
# erf on 0.84375 <= |x| < 1.25: erx + P(s) / Q(s), s = |x| - 1
_PA = (-2.36211856075265944077e-03, 4.14856118683748331666e-01, -3.72207876035701323847e-01,
       3.18346619901161753674e-01, -1.10894694282396677476e-01, 3.54783043256182359371e-02,
       -2.16637559486879084300e-03)
_QA = (1.0, 1.06420880400844228286e-01, 5.40397917702171048937e-01, 7.18286544141962662868e-02,
       1.26171219808761642112e-01, 1.36370839120290507362e-02, 1.19844998467991074170e-02)
# erfc on 1.25 <= |x| < 1/0.35 and on 1/0.35 <= |x| < 6:
# exp(-x^2 - 0.5625 + R(1/x^2) / S(1/x^2)) / |x|
_RA = (-9.86494403484714822705e-03, -6.93858572707181764372e-01, -1.05586262253232909814e+01,
       -6.23753324503260060396e+01, -1.62396669462573470355e+02, -1.84605092906711035994e+02,
       -8.12874355063065934246e+01, -9.81432934416914548592e+00)
_SA = (1.0, 1.96512716674392571292e+01, 1.37657754143519042600e+02, 4.34565877475229228821e+02,
       6.45387271733267880336e+02, 4.29008140027567833386e+02, 1.08635005541779435134e+02,
       6.57024977031928170135e+00, -6.04244152148580987438e-02)
_RB = (-9.86494292470009928597e-03, -7.99283237680523006574e-01, -1.77579549177547519889e+01,
       -1.60636384855821916062e+02, -6.37566443368389627722e+02, -1.02509513161107724954e+03,
       -4.83519191608651397019e+02)
_SB = (1.0, 3.03380607434824582924e+01, 3.25792512996573918826e+02, 1.53672958608443695994e+03,
       3.19985821950859553908e+03, 2.55305040643316442583e+03, 4.74528541206955367215e+02,
       -2.24409524465858183362e+01)
_HIGH_WORD = np.uint64(0xFFFFFFFF00000000)


def _horner(z: np.ndarray, coeffs: tuple[float, ...]) -> np.ndarray:
    """sum(coeffs[i] * z**i), in place in one new array."""
    acc = z * coeffs[-1]
    acc += coeffs[-2]
    for c in coeffs[-3::-1]:
        acc *= z
        acc += c
    return acc


def _erf64(x: np.ndarray) -> np.ndarray:
    """fdlibm's erf on a float64 array (nan stays nan, +-inf gives +-1)."""
    ax = np.abs(x)
    out = np.array(np.sign(x))  # |x| >= 6 (and inf): +-1 in float64; nan: nan (an array, 0-d too)
    m = ax < 0.84375
    if m.any():
        v = x[m]
        z = v * v
        out[m] = v + v * (_horner(z, _PP) / _horner(z, _QQ))
    m = (ax >= 0.84375) & (ax < 1.25)
    if m.any():
        s = ax[m] - 1.0
        out[m] = np.copysign(_ERX + _horner(s, _PA) / _horner(s, _QA), x[m])
    for lo, hi, r, q in ((1.25, 1 / 0.35, _RA, _SA), (1 / 0.35, 6.0, _RB, _SB)):
        m = (ax >= lo) & (ax < hi)
        if m.any():
            a = ax[m]
            s = 1.0 / (a * a)
            # exp(-a^2) as exp(-z^2) * exp((z - a)(z + a)), z = a with its low word
            # cleared so that z^2 is exact (fdlibm's trick)
            z = (a.view(np.uint64) & _HIGH_WORD).view(np.float64)
            e = np.exp(-z * z - 0.5625) * np.exp((z - a) * (z + a) + _horner(s, r) / _horner(s, q))
            out[m] = np.copysign(1.0 - e / a, x[m])
    return out


_A32 = tuple(np.float32(c) for c in (
    -1.60960333262415e-02, -2.95459980854025e-03, -7.34990630326855e-04, -5.69250639462346e-05,
    -2.10102402082508e-06, 2.77068142495902e-08, -2.72614225801306e-10))
_B32 = tuple(np.float32(c) for c in (
    -1.42647390514189e-02, -7.37332916720468e-03, -1.68282697438203e-03, -2.13374055278905e-04,
    -1.45660718464996e-05))
_BLOCK = 1 << 16


def _erf32_block(x: np.ndarray, out: np.ndarray, z: np.ndarray, p: np.ndarray,
                 q: np.ndarray) -> None:
    """out = erf(x) for contiguous float32 1-D blocks; z, p, q: scratch of the same size."""
    np.clip(x, -4.0, 4.0, out=out)
    np.multiply(out, out, out=z)
    np.multiply(z, _A32[6], out=p)
    p += _A32[5]
    for c in _A32[4::-1]:
        p *= z
        p += c
    np.multiply(z, _B32[4], out=q)
    q += _B32[3]
    for c in _B32[2::-1]:
        q *= z
        q += c
    p /= q
    np.multiply(p, out, out=out)  # x last: tiny and subnormal x lose nothing


def _erf32(x: np.ndarray) -> np.ndarray:
    """erf of float32 ``x`` into a new C-contiguous float32 array."""
    xf = np.ascontiguousarray(x, np.float32).reshape(-1)
    out = np.empty(xf.size, np.float32)
    n = min(_BLOCK, xf.size)
    z, p, q = np.empty(n, np.float32), np.empty(n, np.float32), np.empty(n, np.float32)
    for i in range(0, xf.size, _BLOCK):
        j = min(i + _BLOCK, xf.size)
        _erf32_block(xf[i:j], out[i:j], z[:j - i], p[:j - i], q[:j - i])
    return out.reshape(x.shape)


def erf(out: np.ndarray, x: np.ndarray) -> None:
    if x.dtype == np.float64:
        np.copyto(out, _erf64(x))
    else:
        np.copyto(out, _erf32(x), casting="unsafe")


# -- gelu and its gradient, fused: erf (or tanh) and a few in-place passes, block
# by block so that the temporaries stay in cache

_SQRT1_2 = float(np.sqrt(0.5))
_INV_SQRT_2PI = float(1.0 / np.sqrt(2.0 * np.pi))
_SQRT_2_PI = float(np.sqrt(2.0 / np.pi))
_EW_BLOCK = 1 << 15


def _wide(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float32) if x.dtype == np.float16 else x


def _erf_block(x: np.ndarray) -> np.ndarray:
    """erf of a contiguous 1-D float32/float64 block, as a new array."""
    if x.dtype == np.float64:
        return _erf64(x)
    out = np.empty_like(x)
    _erf32_block(x, out, np.empty_like(x), np.empty_like(x), np.empty_like(x))
    return out


def _blockwise(fn: Any, out: np.ndarray, *xs: np.ndarray) -> None:
    """out = fn(*xs) computed on flat blocks of ``_EW_BLOCK`` elements (in the
    inputs' compute dtype: float16 works in float32)."""
    flat = [np.ascontiguousarray(_wide(x)).reshape(-1) for x in xs]
    direct = out.flags.c_contiguous and out.dtype == flat[0].dtype
    dst = out.reshape(-1) if direct else np.empty(out.size, flat[0].dtype)
    for i in range(0, dst.size, _EW_BLOCK):
        j = min(i + _EW_BLOCK, dst.size)
        dst[i:j] = fn(*(f[i:j] for f in flat))
    if not direct:
        np.copyto(out, dst.reshape(out.shape), casting="unsafe")


def _gelu_erf(x: np.ndarray) -> np.ndarray:
    y = _erf_block(x * _SQRT1_2)
    y += 1.0
    y *= x
    y *= 0.5
    return y


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    y = x * x
    y *= 0.044715
    y += 1.0
    y *= x
    y *= _SQRT_2_PI
    np.tanh(y, out=y)
    y += 1.0
    y *= x
    y *= 0.5
    return y


# The gradients read Phi(x) (or tanh's term) off y = gelu(x) instead of computing
# erf again: Phi(x) = y / x, where x is not tiny (there Phi(x) = 0.5 to float
# precision).
_TINY_X = 1e-30


def _cdf_from_y(y: np.ndarray, x: np.ndarray) -> np.ndarray:
    cdf = y / x  # (0 / 0 warnings are silenced for this module)
    small = np.abs(x) < _TINY_X
    if small.any():
        cdf[small] = 0.5
    return cdf


def _gelu_erf_grad(g: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    d = x * x  # Phi(x) + x * pdf(x)
    d *= -0.5
    np.exp(d, out=d)
    d *= x
    d *= _INV_SQRT_2PI
    d += _cdf_from_y(y, x)
    d *= g
    return d


def _gelu_tanh_grad(g: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    half = _cdf_from_y(y, x)  # 0.5 (1 + t), t = tanh(sqrt(2/pi) (x + 0.044715 x^3))
    d = x * x  # 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2)
    d *= 3 * 0.044715
    d += 1.0
    d *= _SQRT_2_PI
    d *= x
    d *= 2.0
    d *= half
    d *= 1.0 - half  # 0.5 (1 - t^2) = 2 * half * (1 - half)
    d += half
    d *= g
    return d


def gelu(out: np.ndarray, x: np.ndarray, approximate: str) -> None:
    _blockwise(_gelu_tanh if approximate == "tanh" else _gelu_erf, out, x)


def gelu_backward(out: np.ndarray, g: np.ndarray, x: np.ndarray, y: np.ndarray,
                  approximate: str) -> None:
    _blockwise(_gelu_tanh_grad if approximate == "tanh" else _gelu_erf_grad, out, g, x, y)


# -- layer_norm: blocks of whole rows (about _LN_BLOCK elements each), every step of a
# block before the next block starts, so that the block's x and output stay in cache
# between steps, and no step allocates (whole-array passes would each fault in a 16 MB
# temporary at 4096 x 1024); written straight into ``out`` where it is C-contiguous in
# the compute dtype.
# Each row's steps are its own (its sums are BLAS dots along the row, with ones for
# the mean and with itself for the squares), so a row's result is the same whatever
# block it is in and whichever thread runs it: a large input spreads contiguous runs
# of rows over ``fused``'s worker threads, bit for bit the one-thread result. The
# dots run 3x as fast as NumPy's pairwise sum or einsum, and are as accurate as the
# pairwise sum up to 8192 columns (rows of 1024 float32, mean 100, std 3: the mean
# 3.0e-6 std from float64's, pairwise 2.9e-6; of N(0, 1): the squares' sum 0.6e-7
# relative, einsum's 2.7e-7).
#
# A (B, N) ufunc with a broadcast operand runs at about half the speed of a
# same-shape one (measured at N = 1024, NumPy's default 8192-element buffers): weight
# and bias are tiled to whole rows of at least _LN_TILE elements and applied to the
# block seen as (k, t, N); x - mean and * rstd (a value per row) run with buffers
# smaller than a row (_LN_BUFSIZE), which gives them nearly the same-shape speed
# for rows of _LN_UNBUFFERED_MIN or more. Below that the default buffers are faster,
# and so are the sums and the tiled steps at any width: only those two steps run
# with the small buffers. Nothing is cast, so no result changes with the buffers.

_LN_BLOCK = 1 << 19  # elements: 2 MB of float32 for x's block, as much for out's (in L3).
# Blocks that fit in L2 lose more to the ~20 calls of a block (and, on two threads, to
# handing the GIL over at each) than they gain: at 4096 x 1024 on 1 / 2 threads,
# blocks of 128K elements take 4.0 / 4.1 ms, 256K 3.8 / 3.0, 512K 3.6 / 2.2, 1M 3.5 /
# 2.2, one block a thread 4.5 / 2.6 (2 cores shared with other processes)
_LN_TILE = 1 << 13  # elements of weight's and bias's tiles at least (32 KB of float32;
# a tile of 4096 runs no faster than the broadcast, one of 8192 in 0.6 of its time)
_LN_SMALL = 1 << 15  # elements: a smaller input is one block, without tiles
_LN_UNBUFFERED_MIN = 512  # columns: at 256, small buffers gain nothing; at 128, lose
_LN_BUFSIZE = 16  # elements (the smallest NumPy 1 accepts)
_LN_PARALLEL_MIN = 1 << 19  # elements: a smaller input runs on the calling thread alone
_rowdot = getattr(np, "vecdot", None)  # NumPy 2: a BLAS dot per row
# Wider rows are summed pairwise (NumPy 1: the mean always, the squares by einsum up
# to here): OpenBLAS splits a dot of over 10000 elements over its threads (another
# sum order for another rtxcore.set_num_threads), its error grows with the row where
# pairwise sums' hardly does, and einsum's sums depend on the rows beside them past
# its 8192-element buffer.
_LN_DOT_MAX = 8192


def _ln_affine(op: Any, o: np.ndarray, p: np.ndarray, tile: np.ndarray | None,
               a: np.ndarray | None = None) -> None:
    """o = op(a, p) (a: o itself unless given) for p of shape (N,): the rows in
    whole tiles against ``tile`` (p repeated over t rows), the rest against p."""
    a = o if a is None else a
    if tile is None or not a.flags.c_contiguous:  # (a strided a: no tiles, no copy)
        op(a, p, out=o)
        return
    t = tile.shape[0]
    k = o.shape[0] // t * t
    if k:
        o3 = o[:k].reshape(-1, t, o.shape[1])  # (o is C-contiguous)
        op(a[:k].reshape(o3.shape), tile, out=o3)
    if k < o.shape[0]:
        op(a[k:], p, out=o[k:])


def _ln_rows(o: np.ndarray, x: np.ndarray, mu: np.ndarray, r: np.ndarray,
             weight: np.ndarray | None, bias: np.ndarray | None, wt: np.ndarray | None,
             bt: np.ndarray | None, eps: float, ones: np.ndarray | None) -> None:
    """One block: o = (x - mean) * rstd (* weight + bias) of x's rows, the mean
    into mu, rstd into r (1-D, one per row); wt, bt: weight's and bias's tiles;
    ones: (1, N) ones where the rows are summed as dots."""
    n = x.shape[1]
    if ones is not None:
        _rowdot(x, ones, out=mu)
    else:
        np.add.reduce(x, axis=1, out=mu)
    np.divide(mu, n, out=mu)
    # (x - mean and * rstd with buffers smaller than a row: see above)
    old = np.setbufsize(_LN_BUFSIZE) if n >= _LN_UNBUFFERED_MIN else None
    try:
        np.subtract(x, mu[:, None], out=o)
        if ones is not None:
            _rowdot(o, o, out=r)
        elif n <= _LN_DOT_MAX:  # (NumPy 1)
            np.einsum("ij,ij->i", o, o, out=r)
        else:  # pairwise sums of the squares
            np.add.reduce(np.square(o), axis=1, out=r)
        r *= 1.0 / n
        r += eps
        np.sqrt(r, out=r)
        np.reciprocal(r, out=r)
        o *= r[:, None]
    finally:
        if old is not None:
            np.setbufsize(old)
    if weight is not None:
        _ln_affine(np.multiply, o, weight, wt)
    if bias is not None:
        _ln_affine(np.add, o, bias, bt)


def _ln_range(out: np.ndarray, mu: np.ndarray, r: np.ndarray, x: np.ndarray,
              weight: np.ndarray | None, bias: np.ndarray | None, wt: np.ndarray | None,
              bt: np.ndarray | None, eps: float, lo: int, hi: int, rows: int) -> None:
    """Rows lo:hi, ``rows`` at a time; through one scratch block, reused, where out
    cannot take the result directly or x is float16 (widened block by block)."""
    cdt = mu.dtype
    n = x.shape[1]
    ones = np.ones((1, n), cdt) if n <= _LN_DOT_MAX and _rowdot is not None else None
    direct = out.dtype == cdt and out.flags.c_contiguous
    if direct and x.dtype == cdt:
        for i in range(lo, hi, rows):
            j = min(i + rows, hi)
            _ln_rows(out[i:j], x[i:j], mu[i:j], r[i:j], weight, bias, wt, bt, eps, ones)
        return
    s = np.empty((min(rows, hi - lo), x.shape[1]), cdt)
    for i in range(lo, hi, rows):
        j = min(i + rows, hi)
        xb, ob = x[i:j], (out[i:j] if direct else s[:j - i])
        if xb.dtype != cdt:
            xb = s[:j - i]
            np.copyto(xb, x[i:j])
        _ln_rows(ob, xb, mu[i:j], r[i:j], weight, bias, wt, bt, eps, ones)
        if not direct:
            np.copyto(out[i:j], ob, casting="unsafe")


def _ln_param(p: np.ndarray | None, cdt: np.dtype) -> np.ndarray | None:
    """weight or bias in the compute dtype where that is exact (float16's): the
    same products and sums, without a cast in every ufunc call."""
    if p is None or p.dtype == cdt or not np.can_cast(p.dtype, cdt):
        return p
    return p.astype(cdt)


def _split(units: int, size: int, run: Callable[[int, int], None]) -> None:
    """``run(lo, hi)`` over ``range(units)`` in contiguous runs, one a thread of
    ``fused.threads()`` for inputs of ``_LN_PARALLEL_MIN`` elements or more (never
    from one of the pool's own threads: it would wait on its own pool)."""
    parts = min(fused.threads(), units) if size >= _LN_PARALLEL_MIN else 1
    if parts <= 1 or threading.current_thread().name.startswith("rtx-cpu-fused"):
        run(0, units)
        return
    step = -(-units // parts)
    futures = [fused.pool().submit(run, lo, min(lo + step, units))
               for lo in range(step, units, step)]
    try:
        run(0, step)
    finally:
        for f in futures:
            f.result()


def layer_norm(out: np.ndarray, mean: np.ndarray, rstd: np.ndarray, x: np.ndarray,
               weight: np.ndarray | None, bias: np.ndarray | None, eps: float) -> None:
    """out = (x - mean) * rstd (* weight + bias) per row of x (M, N); mean, rstd
    (M, 1). Computed in x's dtype (float16 in float32), block by block (see above)."""
    m, n = x.shape
    cdt = np.dtype(np.float32) if x.dtype == np.float16 else x.dtype  # as _wide
    mu, r = mean[:, 0], rstd[:, 0]
    stats = mu.dtype == cdt and r.dtype == cdt
    if not stats:
        mu, r = np.empty(m, cdt), np.empty(m, cdt)
    weight, bias = _ln_param(weight, cdt), _ln_param(bias, cdt)
    if m * n <= _LN_SMALL:  # one block: no tiles, no threads
        _ln_range(out, mu, r, x, weight, bias, None, None, eps, 0, m, max(m, 1))
    else:
        _ln_blocks(out, mu, r, x, weight, bias, eps)
    if not stats:
        np.copyto(mean[:, 0], mu, casting="unsafe")
        np.copyto(rstd[:, 0], r, casting="unsafe")


def _ln_blocks(out: np.ndarray, mu: np.ndarray, r: np.ndarray, x: np.ndarray,
               weight: np.ndarray | None, bias: np.ndarray | None, eps: float) -> None:
    """layer_norm's blocks, with tiles; over threads, a contiguous run of rows each."""
    m, n = x.shape
    rows = max(1, _LN_BLOCK // n)
    t = min(rows, -(-_LN_TILE // n))  # rows per tile; a block is whole tiles
    wt = bt = None
    if t >= 2:
        rows -= rows % t
        wt = None if weight is None else np.tile(weight, (t, 1))
        bt = None if bias is None else np.tile(bias, (t, 1))
    # rows split into contiguous runs, one a thread (a run's last block may be short)
    _split(m, m * n, lambda lo, hi: _ln_range(out, mu, r, x, weight, bias, wt, bt, eps, lo,
                                              hi, rows))


# -- layer_norm_backward: the forward's blocks of whole rows (and its tiles of weight,
# its small buffers for the per-row steps, its row sums), every step of a block
# before the next. Per block, with xc = x - mean and gw = g * weight: the rows'
# sums of gw and of gw * xc (dots), then dx = rstd * (gw - mean(gw) - xc * (rstd^2 *
# mean(gw * xc))) straight into out (the closed form, xhat * mean(gw * xhat) with
# the rstd taken out of xhat: one pass fewer); for the parameters, the block's
# column sums of g * xc * rstd (einsum) and of g into its own row of a (blocks, N)
# array, summed in block order at the end. The blocks are fixed by the shape alone
# (never by the thread count) and a thread takes a contiguous run of whole blocks,
# so every result, the parameters' sums included, is the same bit for bit on any
# number of threads. 4096 x 1024 float32 with weight: 7.2 ms on one thread, 4.4 ms
# on two (the core's whole-array closed form: about 22 ms). Blocks of the forward's
# _LN_BLOCK measured best here too (on two threads 128K elements: 5.7 ms, 256K 5.0,
# 512K 4.4, 1M 5.3).


def _lnb_range(dx: np.ndarray, pw: np.ndarray | None, pb: np.ndarray | None, g: np.ndarray,
               x: np.ndarray, mu: np.ndarray, r: np.ndarray, weight: np.ndarray | None,
               wt: np.ndarray | None, k0: int, k1: int, rows: int) -> None:
    """Blocks k0:k1 (of ``rows`` rows) of layer_norm_backward; pw, pb: the
    blocks' column sums of g * xhat and of g (rows k0:k1 written), or None."""
    cdt = mu.dtype
    m, n = x.shape
    b_max = min(rows, m - k0 * rows)
    h = np.empty((b_max, n), cdt)  # x - mean, then g * (x - mean)
    gs = np.empty((b_max, n), cdt) if g.dtype != cdt else None  # g widened (float16)
    q = np.empty((b_max, n), cdt) if weight is not None else None  # g * weight
    xs = np.empty((b_max, n), cdt) if x.dtype != cdt else None  # x widened
    direct = dx.dtype == cdt and dx.flags.c_contiguous
    o = None if direct else np.empty((b_max, n), cdt)
    a, c = np.empty(b_max, cdt), np.empty(b_max, cdt)
    dots = n <= _LN_DOT_MAX and _rowdot is not None
    ones = np.ones((1, n), cdt) if dots else None
    small = n >= _LN_UNBUFFERED_MIN  # (the per-row steps with small buffers: see above)
    for k in range(k0, k1):
        i = k * rows
        j = min(i + rows, m)
        bn = j - i
        xb, gb, hb, ab, cb, rk = x[i:j], g[i:j], h[:bn], a[:bn], c[:bn], r[i:j]
        ob = dx[i:j] if direct else o[:bn]
        if xs is not None:
            np.copyto(xs[:bn], xb)
            xb = xs[:bn]
        if gs is not None:
            np.copyto(gs[:bn], gb)
            gb = gs[:bn]
        qb = gb
        if weight is not None:
            qb = q[:bn]
            _ln_affine(np.multiply, qb, weight, wt, gb)
        old = np.setbufsize(_LN_BUFSIZE) if small else None
        try:
            np.subtract(xb, mu[i:j, None], out=hb)
        finally:
            if old is not None:
                np.setbufsize(old)
        if dots:
            _rowdot(qb, ones, out=ab)
            _rowdot(qb, hb, out=cb)
        else:
            np.add.reduce(qb, axis=1, out=ab)
            if n <= _LN_DOT_MAX:  # (NumPy 1)
                np.einsum("ij,ij->i", qb, hb, out=cb)
            else:  # pairwise sums of the products
                np.add.reduce(np.multiply(qb, hb, out=ob), axis=1, out=cb)
        ab *= 1.0 / n
        cb *= 1.0 / n
        cb *= rk
        cb *= rk
        old = np.setbufsize(_LN_BUFSIZE) if small else None
        try:
            np.multiply(hb, cb[:, None], out=ob)
            np.subtract(qb, ob, out=ob)
            ob -= ab[:, None]
            ob *= rk[:, None]
        finally:
            if old is not None:
                np.setbufsize(old)
        if not direct:
            np.copyto(dx[i:j], ob, casting="unsafe")
        if pw is not None:
            np.multiply(gb, hb, out=hb)
            np.einsum("ij,i->j", hb, rk, out=pw[k])
            np.add.reduce(gb, axis=0, out=pb[k])


def layer_norm_backward(out: np.ndarray, g: np.ndarray, x: np.ndarray, mean: np.ndarray,
                        rstd: np.ndarray, weight: np.ndarray | None) -> None:
    """The gradient of layer_norm's x into out[:M] for output gradient g (M, N);
    where out has two rows more, the sums over rows of g * xhat and of g (weight's
    and bias's) into them. Computed in x's dtype (float16 in float32), block by
    block (see above)."""
    m, n = x.shape
    cdt = np.dtype(np.float32) if x.dtype == np.float16 else x.dtype  # as _wide
    mu, r = mean[:, 0], rstd[:, 0]
    if mu.dtype != cdt:
        mu, r = mu.astype(cdt), r.astype(cdt)
    weight = _ln_param(weight, cdt)
    params = out.shape[0] > m
    rows, wt = max(m, 1), None
    if m * n > _LN_SMALL:  # (else one block: no tiles, no threads)
        rows = max(1, _LN_BLOCK // n)
        t = min(rows, -(-_LN_TILE // n))  # rows per tile; a block is whole tiles
        if t >= 2:
            rows -= rows % t
            wt = None if weight is None else np.tile(weight, (t, 1))
    nb = -(-m // rows)
    pw = np.empty((nb, n), cdt) if params else None
    pb = np.empty((nb, n), cdt) if params else None
    dx = out[:m]
    # blocks split into contiguous runs, one a thread
    _split(nb, m * n, lambda lo, hi: _lnb_range(dx, pw, pb, g, x, mu, r, weight, wt, lo, hi,
                                                rows))
    if params:  # the blocks' sums, in block order
        for p, row in ((pw, out[m]), (pb, out[m + 1])):
            if row.dtype == cdt:
                np.add.reduce(p, axis=0, out=row)
            else:
                np.copyto(row, np.add.reduce(p, axis=0), casting="unsafe")


# -- scatter_add: np.add.at is an element-by-element loop (~20 ns an element). For
# floats, rows gathered along ``dim`` (the backward of embedding and index_select:
# the index is constant off ``dim``) with few targets are one one-hot matmul; any
# other float scatter is one np.bincount over flat target positions (summed in
# float64). Integers and bool keep np.add.at (exact, wraps as the dtype does).
# float16 never sums in float16 (which stops at 2048 when adding ones): every
# path accumulates in float32 or wider and rounds each element once, the
# contract's rule and PyTorch's scatter_add.

_ONEHOT_ROWS = 256  # a matmul costs `targets` multiply-adds an element: few targets only
_ONEHOT_MAX = 1 << 22  # elements of the (targets x sources) one-hot matrix
_SMALL_SCATTER = 512


def _scatter_add_wide(out: np.ndarray, dim: int, index: np.ndarray, src: np.ndarray) -> None:
    """scatter_add for float16 where add.at would sum in float16: the sums are
    taken in float64 over the touched positions only, added to out's values and
    rounded once."""
    if index.size == 0:
        return
    grid = [np.arange(n).reshape([n if d == e else 1 for e in range(index.ndim)])
            for d, n in enumerate(index.shape)]
    grid[dim] = index
    flat = np.ravel_multi_index(tuple(np.broadcast_arrays(*grid)), out.shape).reshape(-1)
    at, slot = np.unique(flat, return_inverse=True)
    sums = np.bincount(slot.reshape(-1), weights=np.asarray(src, np.float64).reshape(-1),
                       minlength=at.size)
    pos = np.unravel_index(at, out.shape)
    out[pos] = out[pos].astype(np.float64) + sums


def scatter_add(out: np.ndarray, dim: int, index: np.ndarray, src: np.ndarray) -> None:
    if out.dtype.kind != "f" or index.size < _SMALL_SCATTER:  # add.at: exact, cheap when small
        if out.dtype == np.float16:
            _scatter_add_wide(out, dim, index, src)
        else:
            _xp_scatter_add(out, dim, index, src)
        return
    nd = index.ndim
    v, n = out.shape[dim], index.shape[dim]
    rows = all(index.strides[d] == 0 or index.shape[d] == 1 for d in range(nd) if d != dim)
    if rows and v <= _ONEHOT_ROWS and v * n <= _ONEHOT_MAX and index.size > n:
        wide = np.float32 if out.dtype == np.float16 else out.dtype  # BLAS, float32 sums
        onehot = np.zeros((v, n), wide)
        if dim == 0 and index.shape[1:] == out.shape[1:] and src.shape == index.shape:
            # the common case (embedding's backward) without the moveaxis views
            onehot[index[(slice(None),) + (0,) * (nd - 1)], np.arange(n)] = 1
            part = np.matmul(onehot, src.reshape(n, -1).astype(wide, copy=False))
            np.add(out, part.reshape(out.shape), out=out, casting="unsafe")
            return
        idx = np.moveaxis(index, dim, 0)[(slice(None),) + (0,) * (nd - 1)]
        onehot[idx, np.arange(n)] = 1
        s = np.moveaxis(src, dim, 0).astype(wide, copy=False)
        part = np.matmul(onehot, s.reshape(n, -1)).reshape((v,) + s.shape[1:])
        tgt = np.moveaxis(out[tuple(slice(0, k) for k in index.shape[:dim]) + (slice(None),)
                              + tuple(slice(0, k) for k in index.shape[dim + 1:])], dim, 0)
        np.add(tgt, part, out=tgt, casting="unsafe")
        return
    if out.size > 8 * index.size + (1 << 16):  # few sources into a big target: bincount's
        if out.dtype == np.float16:            # out-sized float64 array would dominate
            _scatter_add_wide(out, dim, index, src)
        else:
            _xp_scatter_add(out, dim, index, src)
        return
    # flat position in out (C order over index's shape, whose dims are <= out's)
    cstride = np.cumprod((out.shape[1:] + (1,))[::-1])[::-1]
    flat = np.zeros(index.shape, np.int64)
    for d in range(nd):
        if d == dim:
            flat += index * int(cstride[d])
        else:
            shape = [1] * nd
            shape[d] = index.shape[d]
            flat += np.arange(index.shape[d], dtype=np.int64).reshape(shape) * int(cstride[d])
    sums = np.bincount(flat.reshape(-1), weights=np.asarray(src, np.float64).reshape(-1),
                       minlength=out.size)
    if out.flags.c_contiguous:
        np.add(out.reshape(-1), sums, out=out.reshape(-1), casting="unsafe")
    else:
        np.add(out, sums.reshape(out.shape), out=out, casting="unsafe")


KERNELS = xp.kernels(np)
_xp_scatter_add = KERNELS["scatter_add"]
KERNELS.update({
    "empty": empty, "from_host": from_host, "to_host": to_host,
    "uniform": uniform, "normal": normal, "erf": erf, "scatter_add": scatter_add,
    "gelu": gelu, "gelu_backward": gelu_backward, "layer_norm": layer_norm,
    "layer_norm_backward": layer_norm_backward,
    "max_pool2d_tiled": max_pool2d_tiled, "max_pool2d_tiled_backward": max_pool2d_tiled_backward,
    **_CONV_KERNELS,
})
