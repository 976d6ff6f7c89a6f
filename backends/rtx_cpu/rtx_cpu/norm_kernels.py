"""layer_norm and batch_norm, and their backwards: C loops (``ckernels``) where
they can run, else NumPy forms (layer_norm's in blocks of whole rows over the
backend's threads).

rtx_cpu's kernels for the ``layer_norm``, ``layer_norm_backward``, ``batch_norm``
and ``batch_norm_backward`` composites (``kernels.KERNELS`` lists them); the
threads are ``fused``'s pool.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from . import ckernels, fused


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


def split(units: int, size: int, run: Callable[[int, int], None],
          parallel_min: int | None = None) -> None:
    """``fused.split`` for an input of ``size`` elements: over the threads from
    ``parallel_min`` (default ``_LN_PARALLEL_MIN``) elements. The blocked
    kernels of ``softmax_kernels`` and ``erf_kernels`` share it."""
    least = _LN_PARALLEL_MIN if parallel_min is None else parallel_min
    fused.split(units, run, size >= least)


def layer_norm(out: np.ndarray, mean: np.ndarray, rstd: np.ndarray, x: np.ndarray,
               weight: np.ndarray | None, bias: np.ndarray | None, eps: float) -> None:
    """out = (x - mean) * rstd (* weight + bias) per row of x (M, N); mean, rstd
    (M, 1). One C loop per row where it can (``ckernels``); else computed in x's
    dtype (float16 in float32), block by block (see above)."""
    if ckernels.layer_norm(out, mean, rstd, x, weight, bias, eps):
        return
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
    split(m, m * n, lambda lo, hi: _ln_range(out, mu, r, x, weight, bias, wt, bt, eps, lo,
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
    block (see above), where the C loop of ``ckernels`` cannot run."""
    if ckernels.layer_norm_backward(out, g, x, mean, rstd, weight):
        return
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
    split(nb, m * n, lambda lo, hi: _lnb_range(dx, pw, pb, g, x, mu, r, weight, wt, lo, hi,
                                                rows))
    if params:  # the blocks' sums, in block order
        for p, row in ((pw, out[m]), (pb, out[m + 1])):
            if row.dtype == cdt:
                np.add.reduce(p, axis=0, out=row)
            else:
                np.copyto(row, np.add.reduce(p, axis=0), casting="unsafe")


# -- batch_norm (training: the batch's statistics) and its backward: one C loop
# over channels (``ckernels``) where it can, else these whole-array NumPy forms,
# computed in x's dtype (float16 in float32) and rounded once into each output.

def _wide(a: np.ndarray | None) -> np.ndarray | None:
    return a if a is None or a.dtype != np.float16 else a.astype(np.float32)


def batch_norm(out: np.ndarray, mean: np.ndarray, var: np.ndarray, rstd: np.ndarray,
               x: np.ndarray, weight: np.ndarray | None, bias: np.ndarray | None,
               eps: float) -> None:
    """Per channel of x (N, C, S) over N and S: mean, biased variance, rstd (C,)
    and out = (x - mean) * (rstd * weight) + bias."""
    if ckernels.batch_norm(out, mean, var, rstd, x, weight, bias, eps):
        return
    xw, w, b = _wide(x), _wide(weight), _wide(bias)
    count = x.shape[0] * x.shape[2]
    mu = np.add.reduce(xw, axis=(0, 2)) / xw.dtype.type(count)
    xc = xw - mu[:, None]
    v = np.add.reduce(xc * xc, axis=(0, 2)) / xw.dtype.type(count)
    r = np.reciprocal(np.sqrt(v + xw.dtype.type(eps)))
    sc = r if w is None else r * w
    xc *= sc[:, None]
    if b is not None:
        xc += b[:, None]
    for o, a in ((out, xc), (mean, mu), (var, v), (rstd, r)):
        np.copyto(o, a, casting="unsafe")


def batch_norm_backward(dx: np.ndarray, sums: np.ndarray, g: np.ndarray, x: np.ndarray,
                        mean: np.ndarray, rstd: np.ndarray, weight: np.ndarray | None) -> None:
    """sums (2, C) = the sums over N and S of g * xhat and of g; dx = (g - mean(g) - xhat * mean(g * xhat)) * rstd * weight, with xhat =
    (x - mean) * rstd and the means per channel."""
    if ckernels.batch_norm_backward(dx, sums, g, x, mean, rstd, weight):
        return
    gw, xw, mu, r, w = _wide(g), _wide(x), _wide(mean), _wide(rstd), _wide(weight)
    count = xw.dtype.type(x.shape[0] * x.shape[2])
    xhat = (xw - mu[:, None]) * r[:, None]
    a = np.add.reduce(gw, axis=(0, 2))
    gx = np.add.reduce(gw * xhat, axis=(0, 2))
    np.copyto(sums[0], gx, casting="unsafe")
    np.copyto(sums[1], a, casting="unsafe")
    sc = r if w is None else r * w
    xhat *= (gx / count)[:, None]
    d = gw - (a / count)[:, None]
    d -= xhat
    d *= sc[:, None]
    np.copyto(dx, d, casting="unsafe")
