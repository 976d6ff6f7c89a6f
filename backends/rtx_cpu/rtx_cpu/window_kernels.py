"""Pooling kernels for small windows.

NumPy's inner loop runs over the last axis, so a reduction over a 2x2 window
(or a broadcast into one) is a loop of length 2 per window. These kernels
first gather each window position across every window into one contiguous row
(one ``take`` with a cached index), so every pass after that is a long
contiguous elementwise loop.
"""

from __future__ import annotations

import numpy as np

from . import ckernels

_CACHE_MAX = 32
_tile_index: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray]] = {}


def _tiles(m: int, h: int, w: int, kh: int, kw: int) -> tuple[np.ndarray, np.ndarray]:
    """(kh*kw, m*OH*OW) flat positions in an (m, h, w) array: row ``i*kw + j``
    holds element (i, j) of every kh x kw tile, tiles in (m, OH, OW) order; and
    each tile's corner as a flat index into its own h*w plane."""
    key = (m, h, w, kh, kw)
    hit = _tile_index.get(key)
    if hit is None:
        oh, ow = h // kh, w // kw
        corner = ((np.arange(oh) * (kh * w))[:, None] + np.arange(ow) * kw).reshape(-1)
        plane = np.tile(corner, m)
        start = plane + np.arange(m, dtype=np.int64).repeat(oh * ow) * (h * w)
        hit = (np.stack([start + (i * w + j) for i in range(kh) for j in range(kw)]), plane)
        if len(_tile_index) >= _CACHE_MAX:
            _tile_index.clear()
        _tile_index[key] = hit
    return hit


def max_pool2d_tiled(values: np.ndarray, indices: np.ndarray, x: np.ndarray, kh: int,
                     kw: int) -> None:
    """values/indices (N, C, OH, OW) = the max of each kh x kw tile of x (N, C, H, W)
    (OH = H // kh, OW = W // kw) and the flat index into H*W of its first maximum
    (the first NaN where there is one). One C loop where it can (``ckernels``)."""
    if ckernels.max_pool2d_tiled(values, indices, x, kh, kw):
        return
    n, c, h, w = x.shape
    m = n * c
    kk = kh * kw
    tiles, corner = _tiles(m, h, w, kh, kw)
    rows = np.ascontiguousarray(x).reshape(-1).take(tiles)  # (kk, m*OH*OW)
    best = rows.max(axis=0)
    nan = best.dtype.kind in "fc" and bool(np.isnan(best).any())
    # the first matching row: count the rows before the first match (in int8 when it fits)
    found = np.equal(rows[0], best)
    if nan:
        found |= np.isnan(rows[0])
    first = np.zeros(best.shape, np.int8 if kk <= 127 else np.int64)
    missed = np.empty(best.shape, bool)
    hit = np.empty(best.shape, bool)
    for p in range(1, kk):
        np.logical_not(found, out=missed)
        first += missed
        np.equal(rows[p], best, out=hit)
        if nan:
            hit |= np.isnan(rows[p])
        found |= hit
    # (i, j) of the tile -> its offset in the flat H*W plane, plus the tile's corner
    offsets = np.array([i * w + j for i in range(kh) for j in range(kw)], np.int64)
    flat = offsets.take(first)
    np.copyto(values, best.reshape(values.shape), casting="unsafe")
    np.add(flat.reshape(indices.shape), corner.reshape(indices.shape), out=indices,
           casting="unsafe")


def max_pool2d_tiled_backward(out: np.ndarray, g: np.ndarray, indices: np.ndarray) -> None:
    """out (N, C, H, W) = zeros with each g (N, C, OH, OW) at its index into H*W
    (the tiles do not overlap: no index repeats within a plane). One C loop where
    it can (``ckernels``)."""
    if ckernels.max_pool2d_tiled_backward(out, g, indices):
        return
    n, c, h, w = out.shape
    m = n * c
    flat = np.zeros(m * h * w, out.dtype)
    pos = indices.reshape(m, -1) + (np.arange(m, dtype=np.int64) * (h * w))[:, None]
    flat[pos.reshape(-1)] = g.reshape(-1)
    np.copyto(out, flat.reshape(out.shape))
