"""Backward rules against finite differences: ``gradcheck`` (first derivatives) and
``gradgradcheck`` (Hessian-vector products) over every differentiable op, on
every device, with contiguous and non-contiguous (strided, permuted) inputs.

One table of cases drives both: each case is an op applied to small float64
inputs whose values keep clear of the op's non-differentiable points (zeros of
abs, integers of floor, ties of max, ...). What happens exactly at those points
(PyTorch's conventions: relu'(0) = 0, ties split evenly, ...) is tested
separately against hand-computed gradients."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import pytest

import rtxcore as rc
from rtxcore import autograd
from rtxcore.autograd import GradcheckError, gradcheck, gradgradcheck

F64 = rc.float64


# -- input values -------------------------------------------------------------------------


def normal(rng, shape):
    return rng.standard_normal(shape)


def positive(rng, shape):
    return rng.uniform(0.5, 2.0, shape)


def away_from_zero(rng, shape):
    return rng.choice([-1.0, 1.0], shape) * rng.uniform(0.3, 2.0, shape)


def fractional(rng, shape):
    """Clear of the integers and of the halves: floor/ceil/round/trunc are flat there."""
    return rng.integers(-3, 3, shape) + rng.uniform(0.15, 0.35, shape)


def small(rng, shape):
    return rng.uniform(-1.0, 1.0, shape)


def distinct(rng, shape):
    """No two values (nor two absolute values) within 0.1 of each other: no ties for
    max, sort, topk, norm(inf)."""
    n = int(np.prod(shape))
    mags = (rng.permutation(n) + rng.uniform(0.2, 0.8, n)) * 0.4
    return (rng.choice([-1.0, 1.0], n) * mags).reshape(shape)


def off_bounds(lo, hi):
    """Values at least 0.1 away from clamp's bounds."""
    def make(rng, shape):
        x = rng.uniform(-1.5, 1.5, shape)
        for b in (lo, hi):
            if b is not None:
                x = np.where(np.abs(x - b) < 0.1, x + 0.25, x)
        return x
    return make


def with_zero(rng, shape):
    x = rng.uniform(0.5, 1.5, shape) * rng.choice([-1.0, 1.0], shape)
    x.reshape(-1)[1] = 0.0
    return x


@dataclass
class Joint:
    """Values for all the inputs at once (when they must relate to each other)."""
    make: Callable[[Any, list[tuple[int, ...]]], list[np.ndarray]]


def fractional_quotient(rng, shapes):
    # x / y = k + u with u in [0.15, 0.85]: clear of floor's jumps
    y = away_from_zero(rng, shapes[1])
    q = rng.integers(-3, 3, shapes[0]) + rng.uniform(0.15, 0.85, shapes[0])
    return [q * y, y]


# -- layouts -----------------------------------------------------------------------------


def contiguous_input(arr: np.ndarray, device) -> rc.Tensor:
    return rc.tensor(arr, dtype=F64, device=device).requires_grad_()


def strided_input(arr: np.ndarray, device) -> rc.Tensor:
    """The same values in a non-contiguous layout: a step-2 slice of a base with the
    dims reversed, permuted back. The result is a leaf (detached) with those strides."""
    if arr.ndim == 0:
        return contiguous_input(arr, device)
    rev = arr.shape[::-1]
    base = rc.zeros(rev[:-1] + (2 * rev[-1],), dtype=F64, device=device)
    view = base[..., ::2].permute(tuple(range(arr.ndim - 1, -1, -1)))
    view.copy_(rc.tensor(arr, dtype=F64, device=device))
    x = view.detach().requires_grad_()
    assert tuple(x.shape) == arr.shape and x.is_leaf
    if arr.size > 1:
        assert not x.is_contiguous()
    return x


LAYOUTS = {"contig": contiguous_input, "noncontig": strided_input}


# -- the cases ---------------------------------------------------------------------------


@dataclass
class Case:
    name: str
    fn: Callable[..., Any]
    shapes: list[tuple[int, ...]]
    make: Any = normal  # one maker for all inputs, a list of one per input, or a Joint
    kw: dict[str, Any] = field(default_factory=dict)  # gradcheck tolerances

    def inputs(self, device, layout: str, seed: int) -> tuple[rc.Tensor, ...]:
        rng = np.random.default_rng(seed)
        if isinstance(self.make, Joint):
            arrs = self.make.make(rng, self.shapes)
        else:
            makers = self.make if isinstance(self.make, (list, tuple)) else [self.make] * len(self.shapes)
            arrs = [m(rng, s) for m, s in zip(makers, self.shapes)]
        return tuple(LAYOUTS[layout](np.asarray(a, dtype=np.float64), device) for a in arrs)


def idx(like: rc.Tensor, data) -> rc.Tensor:
    """An int64 index tensor on ``like``'s device."""
    return rc.tensor(np.asarray(data, dtype=np.int64), device=like.device)


def mask(like: rc.Tensor, data) -> rc.Tensor:
    return rc.tensor(np.asarray(data, dtype=bool), device=like.device)


M34 = [[True, False, True, True], [False, False, True, False], [True, True, False, True]]

S34 = [(3, 4)]
S2 = [(3, 4), (3, 4)]

CASES = [
    # -- unary elementwise
    Case("neg", lambda a: -a, S34),
    Case("abs", lambda a: a.abs(), S34, away_from_zero),
    Case("sign", lambda a: a.sign(), S34, away_from_zero),
    Case("exp", lambda a: a.exp(), S34),
    Case("expm1", lambda a: a.expm1(), S34),
    Case("log", lambda a: a.log(), S34, positive),
    Case("log1p", lambda a: a.log1p(), S34, positive),
    Case("log2", lambda a: a.log2(), S34, positive),
    Case("log10", lambda a: a.log10(), S34, positive),
    Case("sqrt", lambda a: a.sqrt(), S34, positive),
    Case("rsqrt", lambda a: a.rsqrt(), S34, positive),
    Case("sin", lambda a: a.sin(), S34),
    Case("cos", lambda a: a.cos(), S34),
    Case("tan", lambda a: a.tan(), S34, small),
    Case("tanh", lambda a: a.tanh(), S34),
    Case("sigmoid", lambda a: a.sigmoid(), S34),
    Case("relu", lambda a: a.relu(), S34, away_from_zero),
    Case("erf", lambda a: a.erf(), [(2, 3)], lambda r, s: r.uniform(-2.5, 2.5, s)),
    Case("gelu", lambda a: rc.gelu(a), [(2, 3)]),
    Case("gelu_tanh", lambda a: rc.gelu(a, approximate="tanh"), S34),
    Case("silu", lambda a: rc.silu(a), S34),
    Case("softplus", lambda a: rc.softplus(a), S34),
    Case("softplus_beta", lambda a: rc.softplus(a, beta=2.0, threshold=3.0), S34,
         lambda r, s: r.uniform(-2.0, 1.2, s)),
    Case("square", lambda a: a.square(), S34),
    Case("reciprocal", lambda a: a.reciprocal(), S34, away_from_zero),
    Case("floor", lambda a: a.floor(), S34, fractional),
    Case("ceil", lambda a: a.ceil(), S34, fractional),
    Case("round", lambda a: a.round(), S34, fractional),
    Case("trunc", lambda a: a.trunc(), S34, fractional),
    Case("clamp", lambda a: a.clamp(-0.5, 0.5), S34, off_bounds(-0.5, 0.5)),
    Case("clamp_min", lambda a: a.clamp(min=0.2), S34, off_bounds(0.2, None)),
    Case("clamp_max", lambda a: rc.clamp(a, max=-0.3), S34, off_bounds(None, -0.3)),
    Case("nan_to_num", lambda a: a.nan_to_num(), S34),
    Case("lerp_scalar", lambda a, b: rc.lerp(a, b, 0.3), S2),
    Case("lerp_scalar_hi", lambda a, b: a.lerp(b, 0.8), S2),
    Case("lerp_tensor", lambda a, b, w: rc.lerp(a, b, w), [(3, 4), (3, 4), (3, 4)],
         [normal, normal, lambda r, s: r.uniform(-0.2, 1.2, s)]),
    # -- binary, with broadcasting
    Case("add", lambda a, b: a + b, S2),
    Case("add_bcast", lambda a, b: a + b, [(3, 1), (1, 4)]),
    Case("add_alpha", lambda a, b: rc.add(a, b, alpha=2.5), [(4,), (3, 4)]),
    Case("add_scalar", lambda a: 2.0 + a, S34),
    Case("sub", lambda a, b: a - b, [(3, 4), (4,)]),
    Case("sub_alpha", lambda a, b: a.sub(b, alpha=-1.5), [(3, 1), (1, 4)]),
    Case("rsub_scalar", lambda a: 1.0 - a, S34),
    Case("mul", lambda a, b: a * b, S2),
    Case("mul_bcast", lambda a, b: a * b, [(3, 1), (1, 4)]),
    Case("div", lambda a, b: a / b, [(3, 4), (4,)], [normal, away_from_zero]),
    Case("div_bcast", lambda a, b: a / b, [(3, 1), (1, 4)], [normal, away_from_zero]),
    Case("rdiv_scalar", lambda a: 2.0 / a, S34, away_from_zero),
    Case("div_floor", lambda a, b: a.div(b, rounding_mode="floor"), S2,
         Joint(fractional_quotient)),
    Case("div_trunc", lambda a, b: rc.div(a, b, rounding_mode="trunc"), S2,
         Joint(fractional_quotient)),
    Case("floor_divide", lambda a, b: a // b, S2, Joint(fractional_quotient)),
    Case("pow", lambda a, b: a ** b, S2, [positive, normal]),
    Case("pow_bcast", lambda a, b: a.pow(b), [(3, 1), (1, 4)], [positive, normal]),
    Case("pow_scalar3", lambda a: a ** 3, S34),
    Case("pow_scalar2", lambda a: a ** 2, S34),
    Case("pow_scalar_frac", lambda a: a ** 2.5, S34, positive),
    Case("pow_scalar_neg", lambda a: rc.pow(a, -1.5), S34, positive),
    Case("pow_scalar_base", lambda a: 2 ** a, S34),
    Case("pow_scalar_base_fn", lambda a: rc.pow(0.7, a), S34),
    Case("maximum", lambda a, b: rc.maximum(a, b), S2, distinct),
    Case("maximum_bcast", lambda a, b: a.maximum(b), [(3, 1), (1, 4)],
         Joint(lambda r, s: [distinct(r, (3, 1)), distinct(r, (1, 4)) + 0.05])),
    Case("minimum", lambda a, b: rc.minimum(a, b), [(4,), (3, 4)],
         Joint(lambda r, s: [distinct(r, (4,)) + 0.05, distinct(r, (3, 4))])),
    Case("max_binary", lambda a, b: rc.max(a, b), S2, distinct),
    Case("remainder", lambda a, b: a % b, S2, Joint(fractional_quotient)),
    Case("remainder_fn", lambda a, b: rc.remainder(a, b), S2, Joint(fractional_quotient)),
    Case("where", lambda a, b: rc.where(mask(a, M34), a, b), S2),
    Case("where_bcast", lambda a, b: rc.where(mask(a, [[True], [False], [True]]), a, b),
         [(3, 1), (1, 4)]),
    Case("where_bcast_row", lambda a, b: rc.where(mask(a, M34[0]), a, b), [(4,), (3, 4)]),
    Case("where_scalar_other", lambda a: rc.where(mask(a, M34), a, 0.5), S34),
    Case("where_scalar_input", lambda b: rc.where(mask(b, M34), 1.5, b), S34),
    Case("where_method", lambda a, b: a.where(mask(a, M34), b), S2),
    # -- reductions
    Case("sum", lambda a: a.sum(), S34),
    Case("sum_dim", lambda a: a.sum(1), S34),
    Case("sum_dims_keepdim", lambda a: rc.sum(a, (0, 2), keepdim=True), [(2, 3, 2)]),
    Case("mean", lambda a: a.mean(), S34),
    Case("mean_dim", lambda a: a.mean(-1, keepdim=True), S34),
    Case("prod", lambda a: a.prod(), S34, lambda r, s: r.uniform(0.5, 1.5, s) * r.choice([-1, 1], s)),
    Case("prod_zero", lambda a: a.prod(), S34, with_zero),
    Case("prod_dim", lambda a: a.prod(1), S34, with_zero),
    Case("prod_dim_keepdim", lambda a: rc.prod(a, 0, keepdim=True), S34, with_zero),
    Case("amax", lambda a: a.amax(), S34, distinct),
    Case("amax_dim", lambda a: a.amax(1), S34, distinct),
    Case("amin", lambda a: rc.amin(a), S34, distinct),
    Case("amin_dims", lambda a: a.amin((0, 1), keepdim=True), [(2, 3, 2)], distinct),
    Case("max", lambda a: a.max(), S34, distinct),
    Case("max_dim", lambda a: a.max(1), S34, distinct),
    Case("max_dim_keepdim", lambda a: a.max(0, keepdim=True).values, S34, distinct),
    Case("min", lambda a: rc.min(a), S34, distinct),
    Case("min_dim", lambda a: a.min(-1).values, S34, distinct),
    Case("var", lambda a: a.var(), S34),
    Case("var_dim", lambda a: a.var(1), S34),
    Case("var_keepdim_c0", lambda a: a.var(0, keepdim=True, correction=0), S34),
    Case("std", lambda a: a.std(), S34),
    Case("std_dim_keepdim", lambda a: a.std(1, keepdim=True), S34),
    Case("std_c0", lambda a: rc.std(a, 0, correction=0), S34),
    Case("var_mean", lambda a: rc.var_mean(a, 1), S34),
    Case("var_mean_all", lambda a: rc.var_mean(a, correction=0), S34),
    Case("norm", lambda a: a.norm(), S34),
    Case("norm_p2_dim", lambda a: a.norm(2, 1), S34),
    Case("norm_p1", lambda a: a.norm(p=1), S34, away_from_zero),
    Case("norm_pinf", lambda a: a.norm(p=math.inf), S34, distinct),
    Case("norm_pinf_dim", lambda a: rc.norm(a, "inf", 0), S34, distinct),
    Case("norm_p3", lambda a: a.norm(p=3), S34),
    Case("norm_p3_dim", lambda a: a.norm(p=3, dim=1, keepdim=True), S34, away_from_zero),
    Case("logsumexp", lambda a: a.logsumexp(1), S34),
    Case("logsumexp_keepdim", lambda a: rc.logsumexp(a, (0, 1), keepdim=True), S34),
    Case("softmax", lambda a: a.softmax(1), S34),
    Case("softmax_dim0", lambda a: rc.softmax(a, 0), S34),
    Case("log_softmax", lambda a: a.log_softmax(-1), S34),
    Case("log_softmax_dim0", lambda a: rc.log_softmax(a, 0), S34),
    Case("cumsum", lambda a: a.cumsum(1), S34),
    Case("cumsum_dim0", lambda a: rc.cumsum(a, 0), S34),
    Case("cumprod", lambda a: a.cumprod(1), S34),
    Case("cumprod_zero", lambda a: rc.cumprod(a, 1), S34, with_zero),
    # -- views and copies
    Case("view", lambda a: a.view(3, 2, 2), S34),
    Case("reshape", lambda a: a.reshape(2, 6), S34),
    Case("reshape_infer", lambda a: rc.reshape(a, (-1,)), S34),
    Case("permute", lambda a: a.permute(2, 0, 1), [(2, 3, 2)]),
    Case("transpose", lambda a: a.transpose(0, 2), [(2, 3, 2)]),
    Case("t", lambda a: a.t(), S34),
    Case("T", lambda a: a.T, S34),
    Case("mT", lambda a: a.mT, [(2, 3, 2)]),
    Case("expand", lambda a: a.expand(3, 4), [(3, 1)]),
    Case("expand_new_dims", lambda a: a.expand(2, 3, 4), [(1, 4)]),
    Case("broadcast_to", lambda a: rc.broadcast_to(a, (3, 4)), [(4,)]),
    Case("squeeze", lambda a: a.squeeze(1), [(3, 1, 2)]),
    Case("squeeze_all", lambda a: rc.squeeze(a), [(3, 1, 2)]),
    Case("unsqueeze", lambda a: a.unsqueeze(1), S34),
    Case("flatten", lambda a: a.flatten(), [(2, 3, 2)]),
    Case("flatten_range", lambda a: rc.flatten(a, 1, 2), [(2, 3, 2)]),
    Case("unflatten", lambda a: a.unflatten(1, (2, 2)), S34),
    Case("movedim", lambda a: a.movedim(0, -1), [(2, 3, 2)]),
    Case("narrow", lambda a: a.narrow(1, 1, 2), S34),
    Case("select", lambda a: a.select(1, 2), S34),
    Case("unbind", lambda a: a.unbind(1), S34),
    Case("split", lambda a: a.split(2, dim=1), S34),
    Case("split_sizes", lambda a: rc.split(a, [1, 3], 1), S34),
    Case("chunk", lambda a: a.chunk(2, 0), [(4, 3)]),
    Case("diagonal", lambda a: a.diagonal(), S34),
    Case("diagonal_offset", lambda a: rc.diagonal(a, -1), S34),
    Case("diagonal_3d", lambda a: a.diagonal(1, 0, 2), [(2, 3, 2)]),
    Case("unfold", lambda a: a.unfold(1, 2, 1), S34),
    Case("repeat", lambda a: a.repeat(2, 1), [(2, 3)]),
    Case("repeat_new_dim", lambda a: a.repeat(2, 1, 2), [(2, 3)]),
    Case("tile", lambda a: a.tile((2,)), [(2, 3)]),
    Case("flip", lambda a: a.flip(0), S34),
    Case("flip_both", lambda a: rc.flip(a, (0, 1)), S34),
    Case("roll", lambda a: a.roll(1, 1), S34),
    Case("roll_flat", lambda a: rc.roll(a, 5), S34),
    Case("tril", lambda a: a.tril(), S34),
    Case("triu", lambda a: rc.triu(a, 1), S34),
    Case("contiguous", lambda a: a.contiguous(), S34),
    Case("clone", lambda a: a.clone(), S34),
    Case("to_float32_and_back", lambda a: a.to(rc.float32).to(rc.float64), S34,
         kw=dict(eps=1e-3, atol=1e-4, rtol=1e-3)),
    Case("float_double", lambda a: (a.float() * 2).double(), S34,
         kw=dict(eps=1e-3, atol=1e-4, rtol=1e-3)),
    Case("to_same", lambda a: a.to(rc.float64) * 1.0, S34),
    # -- indexing
    Case("getitem_int", lambda a: a[1], S34),
    Case("getitem_slice_step", lambda a: a[::2], S34),
    Case("getitem_slice_2d", lambda a: a[1:, 1::2], S34),
    Case("getitem_none_ellipsis", lambda a: a[None, ..., 1], [(2, 3, 2)]),
    Case("getitem_list_repeats", lambda a: a[[0, 2, 0]], S34),
    Case("getitem_list_dim1", lambda a: a[:, [3, 1, 1]], S34),
    Case("getitem_bool_mask", lambda a: a[mask(a, M34)], S34),
    Case("getitem_tensor_2d", lambda a: a[idx(a, [[0, 2], [1, 2]]), idx(a, [[3, 0], [1, 3]])], S34),
    Case("getitem_tensor_repeats", lambda a: a[idx(a, [1, 1, 0]), idx(a, [2, 2, 0])], S34),
    Case("index_select", lambda a: a.index_select(1, idx(a, [0, 2, 2])), S34),
    Case("index_select_dim0", lambda a: rc.index_select(a, 0, idx(a, [2, 0])), S34),
    Case("gather", lambda a: a.gather(1, idx(a, [[0, 3], [1, 1], [2, 0]])), S34),
    Case("take_along_dim", lambda a: rc.take_along_dim(a, idx(a, [[1, 0, 2, 2]]), 0), S34),
    Case("scatter", lambda a, s: a.scatter(1, idx(a, [[0, 2], [2, 1]]), s), [(2, 3), (2, 2)]),
    Case("scatter_src_larger", lambda a, s: rc.scatter(a, 0, idx(a, [[2, 0, 1]]), s), [(3, 3), (2, 3)]),
    Case("scatter_value", lambda a: a.scatter(1, idx(a, [[0], [2]]), value=0.5), [(2, 3)]),
    Case("scatter_add", lambda a, s: a.scatter_add(1, idx(a, [[0, 0], [2, 2], [3, 1]]), s), [(3, 4), (3, 2)]),
    Case("scatter_reduce_add", lambda a, s: a.scatter(0, idx(a, [[0, 0, 2, 0]]), s, reduce="add"),
         [(3, 4), (1, 4)]),
    Case("masked_fill", lambda a: a.masked_fill(mask(a, M34), 0.5), S34),
    Case("masked_fill_bcast", lambda a: rc.masked_fill(a, mask(a, M34[1]), -1.0), S34),
    Case("masked_select", lambda a: a.masked_select(mask(a, M34)), S34),
    Case("masked_select_bcast", lambda a: rc.masked_select(a, mask(a, M34[0])), S34),
    Case("sort", lambda a: a.sort(1).values, S34, distinct),
    Case("sort_descending_dim0", lambda a: rc.sort(a, 0, descending=True).values, S34, distinct),
    Case("topk", lambda a: a.topk(2, 1).values, S34, distinct),
    Case("topk_smallest", lambda a: rc.topk(a, 2, 0, largest=False).values, S34, distinct),
    # -- setitem: x = a * 1; x[key] = v
    Case("setitem_int", lambda a, v: _set(a, 1, v), [(3, 4), (4,)]),
    Case("setitem_slice_bcast", lambda a, v: _set(a, (slice(1, None), slice(None, None, 2)), v),
         [(3, 4), (2,)]),
    Case("setitem_rows_bcast", lambda a, v: _set(a, slice(0, 2), v), [(3, 4), (1, 4)]),
    Case("setitem_list", lambda a, v: _set(a, [2, 0], v), [(3, 4), (2, 4)]),
    Case("setitem_tensor_2d", lambda a, v: _set(a, (idx(a, [0, 2, 1]), idx(a, [1, 3, 1])), v),
         [(3, 4), (3,)]),
    Case("setitem_mask_scalar_v", lambda a, v: _set(a, mask(a, [M34[0][:3], M34[1][:3]]), v), [(2, 3), ()]),
    Case("setitem_a_only", lambda a: _set(a, (slice(None), 0), 0.25), S34),
    Case("setitem_v_only", lambda v: _set(None, 1, v, like=v), [(4,)]),
    # -- joining
    Case("cat", lambda a, b: rc.cat([a, b], 1), [(3, 2), (3, 4)]),
    Case("cat_dim0", lambda a, b: rc.cat((a, b)), [(1, 4), (2, 4)]),
    Case("stack", lambda a, b: rc.stack([a, b], 1), [(3, 2), (3, 2)]),
    Case("hstack", lambda a, b: rc.hstack([a, b]), [(3, 2), (3, 1)]),
    Case("hstack_1d", lambda a, b: rc.hstack([a, b]), [(3,), (4,)]),
    Case("vstack", lambda a, b: rc.vstack([a, b]), [(4,), (2, 4)]),
    # -- linear algebra
    Case("matmul_1d_1d", lambda a, b: a @ b, [(4,), (4,)]),
    Case("matmul_1d_2d", lambda a, b: a @ b, [(3,), (3, 4)]),
    Case("matmul_2d_1d", lambda a, b: rc.matmul(a, b), [(3, 4), (4,)]),
    Case("matmul_2d_2d", lambda a, b: a @ b, [(2, 3), (3, 4)]),
    Case("matmul_3d_3d", lambda a, b: a @ b, [(2, 2, 3), (2, 3, 2)]),
    Case("matmul_bcast_3d_2d", lambda a, b: a @ b, [(2, 3, 4), (4, 5)]),
    Case("matmul_bcast_batch", lambda a, b: a @ b, [(1, 3, 4), (2, 4, 5)]),
    Case("matmul_1d_3d", lambda a, b: a @ b, [(3,), (2, 3, 2)]),
    Case("mm", lambda a, b: rc.mm(a, b), [(2, 3), (3, 2)]),
    Case("bmm", lambda a, b: rc.bmm(a, b), [(2, 2, 3), (2, 3, 2)]),
    Case("mv", lambda a, b: rc.mv(a, b), [(3, 4), (4,)]),
    Case("dot", lambda a, b: rc.dot(a, b), [(4,), (4,)]),
    Case("outer", lambda a, b: rc.outer(a, b), [(3,), (4,)]),
    Case("einsum_mm", lambda a, b: rc.einsum("ij,jk->ik", a, b), [(2, 3), (3, 2)]),
    Case("einsum_bmm", lambda a, b: rc.einsum("bij,bjk->bik", a, b), [(2, 2, 3), (2, 3, 2)]),
    Case("einsum_diag", lambda a: rc.einsum("ii->i", a), [(3, 3)]),
    Case("einsum_transpose", lambda a: rc.einsum("ij->ji", a), S34),
    # -- compositions: the same input through several ops
    Case("chain", lambda a, b: ((a * b).sin() + a.exp() / (b * b + 1.0)).sum(1).softmax(0), S2),
]


def _set(a, key, v, like=None):
    """``x = a * 1; x[key] = v``: records index_put on a non-leaf."""
    if a is None:
        x = rc.ones((3, 4), dtype=F64, device=like.device)
    else:
        x = a * 1
    x[key] = v
    return x


# gradgradcheck runs on every op whose backward depends on its input (second
# derivatives that can be wrong), and on one or two representatives of each rule
# family of the linear ops (views, selection, scatter, index_put, cat, matmul), whose
# backward is linear in the gradient: there it checks that the backward records.
GG = {
    # elementwise
    "abs", "exp", "expm1", "log", "log1p", "log2", "log10", "sqrt", "rsqrt", "sin", "cos", "tan",
    "tanh", "sigmoid", "relu", "erf", "gelu", "gelu_tanh", "silu", "softplus", "softplus_beta",
    "square", "reciprocal", "clamp", "lerp_tensor", "nan_to_num",
    "add_alpha", "sub_alpha", "mul", "mul_bcast", "div", "div_bcast", "rdiv_scalar", "pow",
    "pow_bcast", "pow_scalar3", "pow_scalar_frac", "pow_scalar_neg", "pow_scalar_base", "maximum",
    "minimum", "remainder", "where_bcast", "where_scalar_input",
    # reductions
    "sum_dims_keepdim", "mean_dim", "prod", "prod_zero", "prod_dim", "amax_dim", "amin", "max_dim",
    "var", "var_keepdim_c0", "std", "std_dim_keepdim", "var_mean", "norm", "norm_p2_dim", "norm_p1",
    "norm_p3", "norm_p3_dim", "norm_pinf", "logsumexp", "logsumexp_keepdim", "softmax",
    "log_softmax", "cumsum", "cumprod_zero",
    # views, indexing, joining, linear algebra
    "view", "permute", "expand", "unfold", "diagonal", "repeat", "split", "roll", "to_same",
    "getitem_slice_2d", "getitem_tensor_2d", "gather", "scatter_add", "masked_fill", "topk",
    "setitem_int", "setitem_slice_bcast", "index_select", "cat", "stack",
    "matmul_1d_1d", "matmul_1d_2d", "matmul_2d_1d", "matmul_bcast_batch", "einsum_bmm",
    "einsum_diag", "chain",
}
GG_CASES = [c for c in CASES if c.name in GG]


def test_gg_table():
    names = {c.name for c in CASES}
    assert GG <= names, GG - names

_SEEDS = {c.name: i for i, c in enumerate(CASES)}


def test_case_names_unique():
    assert len(_SEEDS) == len(CASES)


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_gradcheck(device, case, layout):
    inputs = case.inputs(device, layout, _SEEDS[case.name])
    assert gradcheck(case.fn, inputs, **case.kw)


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("case", GG_CASES, ids=lambda c: c.name)
def test_gradgradcheck(device, case, layout):
    inputs = case.inputs(device, layout, _SEEDS[case.name])
    assert gradgradcheck(case.fn, inputs, **case.kw)


def test_gradcheck_catches_a_wrong_rule(device):
    # the checker itself: a.detach() * a has the values of a * a but gradient a, not 2a
    x = contiguous_input(np.array([0.5, -1.0, 2.0]), device)
    assert gradcheck(lambda a: a * a, (x,))
    with pytest.raises(GradcheckError):
        gradcheck(lambda a: a.detach() * a, (x,))
    with pytest.raises(GradcheckError):
        gradgradcheck(lambda a: (a.detach() * a) * a, (x,))


# -- exact gradients at non-differentiable points (PyTorch's conventions) -------------------


def grad_of(fn, *arrays, device):
    """d sum(fn(*xs)) / d xs, as NumPy arrays."""
    xs = [rc.tensor(np.asarray(a, dtype=np.float64), device=device).requires_grad_() for a in arrays]
    out = fn(*xs)
    gs = autograd.grad(out.sum(), xs, allow_unused=True)
    return [np.zeros(np.shape(a)) if g is None else g.detach().cpu().numpy() for g, a in zip(gs, arrays)]


def test_relu_abs_sign_gradient_zero_at_zero(device):
    x = [0.0, 1.5, -2.0, 0.0]
    (g,) = grad_of(lambda a: a.relu(), x, device=device)
    np.testing.assert_array_equal(g, [0.0, 1.0, 0.0, 0.0])
    (g,) = grad_of(lambda a: a.abs(), x, device=device)
    np.testing.assert_array_equal(g, [0.0, 1.0, -1.0, 0.0])
    (g,) = grad_of(lambda a: a.sign(), x, device=device)
    np.testing.assert_array_equal(g, [0.0, 0.0, 0.0, 0.0])
    (g,) = grad_of(lambda a: a.norm(p=1), x, device=device)
    np.testing.assert_array_equal(g, [0.0, 1.0, -1.0, 0.0])


def test_rounding_gradients_are_zero(device):
    x = [-1.5, -0.5, 0.0, 0.5, 1.0, 2.7]
    for fn in (rc.floor, rc.ceil, rc.round, rc.trunc, lambda a: a // 0.5,
               lambda a: a.div(0.3, rounding_mode="trunc")):
        (g,) = grad_of(fn, x, device=device)
        np.testing.assert_array_equal(g, np.zeros(6))


def test_clamp_gradient_one_at_the_bounds(device):
    x = [-0.5, 0.5, 0.0, -1.0, 1.0, 0.49]
    (g,) = grad_of(lambda a: a.clamp(-0.5, 0.5), x, device=device)
    np.testing.assert_array_equal(g, [1.0, 1.0, 1.0, 0.0, 0.0, 1.0])
    (g,) = grad_of(lambda a: a.clamp(min=0.5), x, device=device)
    np.testing.assert_array_equal(g, [0.0, 1.0, 0.0, 0.0, 1.0, 0.0])
    (g,) = grad_of(lambda a: a.clamp(max=-0.5), x, device=device)
    np.testing.assert_array_equal(g, [1.0, 0.0, 0.0, 1.0, 0.0, 0.0])


def test_maximum_minimum_ties_split_evenly(device):
    x, y = [1.0, 2.0, 3.0, -1.0], [1.0, 0.0, 3.0, 4.0]
    gx, gy = grad_of(rc.maximum, x, y, device=device)
    np.testing.assert_array_equal(gx, [0.5, 1.0, 0.5, 0.0])
    np.testing.assert_array_equal(gy, [0.5, 0.0, 0.5, 1.0])
    gx, gy = grad_of(rc.minimum, x, y, device=device)
    np.testing.assert_array_equal(gx, [0.5, 0.0, 0.5, 1.0])
    np.testing.assert_array_equal(gy, [0.5, 1.0, 0.5, 0.0])


TIES = [[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, -1.0, 2.0], [5.0, 4.0, 4.0, 4.0]]


def test_amax_amin_and_full_max_spread_ties_evenly(device):
    (g,) = grad_of(lambda a: a.amax(), TIES, device=device)
    np.testing.assert_array_equal(g, np.where(np.array(TIES) == 5.0, 1.0, 0.0))
    (g,) = grad_of(lambda a: a.max(), [[1.0, 3.0], [3.0, 3.0]], device=device)
    np.testing.assert_array_equal(g, [[0.0, 1 / 3], [1 / 3, 1 / 3]])
    (g,) = grad_of(lambda a: a.amax(1), TIES, device=device)
    np.testing.assert_array_equal(g, [[0, 0.5, 0.5, 0], [1 / 3, 1 / 3, 0, 1 / 3], [1, 0, 0, 0]])
    (g,) = grad_of(lambda a: a.amin(1, keepdim=True), TIES, device=device)
    np.testing.assert_array_equal(g, [[0, 0, 0, 1], [0, 0, 1, 0], [0, 1 / 3, 1 / 3, 1 / 3]])
    (g,) = grad_of(lambda a: rc.amin(a, 0), TIES, device=device)
    np.testing.assert_array_equal(g, [[1, 0, 0, 1], [0, 1, 1, 0], [0, 0, 0, 0]])
    (g,) = grad_of(lambda a: a.min(), [[2.0, -1.0], [-1.0, 0.0]], device=device)
    np.testing.assert_array_equal(g, [[0.0, 0.5], [0.5, 0.0]])
    (g,) = grad_of(lambda a: a.norm(p=math.inf), [[2.0, -3.0], [3.0, 0.0]], device=device)
    np.testing.assert_array_equal(g, [[0.0, -0.5], [0.5, 0.0]])


@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("keepdim", [False, True])
def test_max_min_dim_gradient_goes_to_the_returned_index(device, op, keepdim):
    x = rc.tensor(TIES, dtype=F64, device=device).requires_grad_()
    res = getattr(x, op)(1, keepdim=keepdim)
    w = np.array([1.0, 2.0, -3.0]).reshape((3, 1) if keepdim else (3,))
    (g,) = autograd.grad((res.values * rc.tensor(w, device=device)).sum(), x)
    ind = res.indices.cpu().numpy().reshape(3)
    vals = np.array(TIES)
    best = vals.max(1) if op == "max" else vals.min(1)
    expected = np.zeros((3, 4))
    for r in range(3):
        assert vals[r, ind[r]] == best[r]  # the index is one of the tied positions
        expected[r, ind[r]] = w.reshape(3)[r]
    np.testing.assert_array_equal(g.cpu().numpy(), expected)


def test_sort_ties_gradient_follows_the_permutation(device):
    x = rc.tensor([3.0, 1.0, 3.0, 2.0], dtype=F64, device=device).requires_grad_()
    res = x.sort(descending=True)
    w = rc.tensor([1.0, 10.0, 100.0, 1000.0], dtype=F64, device=device)
    (g,) = autograd.grad((res.values * w).sum(), x)
    expected = np.zeros(4)
    expected[res.indices.cpu().numpy()] = [1.0, 10.0, 100.0, 1000.0]
    np.testing.assert_array_equal(g.cpu().numpy(), expected)
    assert sorted(res.indices.cpu().numpy().tolist()) == [0, 1, 2, 3]


def test_prod_gradients_with_zeros(device):
    (g,) = grad_of(lambda a: a.prod(), [2.0, 0.0, 3.0, 4.0], device=device)
    np.testing.assert_array_equal(g, [0.0, 24.0, 0.0, 0.0])
    (g,) = grad_of(lambda a: a.prod(), [2.0, 0.0, 3.0, 0.0], device=device)
    np.testing.assert_array_equal(g, [0.0, 0.0, 0.0, 0.0])
    (g,) = grad_of(lambda a: a.prod(1), [[2.0, 0.0, 3.0], [1.0, 2.0, 3.0]], device=device)
    np.testing.assert_array_equal(g, [[0.0, 6.0, 0.0], [6.0, 3.0, 2.0]])


def test_pow_special_points(device):
    # 0 ** y for y > 0 has d/dy 0, not nan; x ** 0 has d/dx 0 even at x = 0
    gx, gy = grad_of(lambda a, b: a ** b, [0.0, 2.0], [2.0, 0.0], device=device)
    np.testing.assert_array_equal(gx, [0.0, 0.0])
    np.testing.assert_allclose(gy, [0.0, math.log(2.0)])
    (g,) = grad_of(lambda a: a ** 0, [0.0, 3.0], device=device)
    np.testing.assert_array_equal(g, [0.0, 0.0])


# -- integer and bool operands ---------------------------------------------------------------


def test_integer_and_bool_operands_are_not_differentiated(device):
    x = rc.randn((3, 4), dtype=F64, device=device, requires_grad=True)
    index = idx(x, [[0, 3], [1, 1], [2, 0]])
    m = mask(x, M34)
    with pytest.raises(RuntimeError):
        index.requires_grad_()
    with pytest.raises(RuntimeError):
        m.requires_grad_()

    def fn(a, i, b):
        return a.gather(1, i).sum() + rc.where(b, a, a * a).sum() + a[b].sum() + a.masked_fill(b, 2.0).sum()

    # index and mask go into gradcheck as inputs that need no grad
    assert gradcheck(fn, (x, index, m))
    assert gradgradcheck(fn, (x, index, m))
    out = fn(x, index, m)
    out.backward()
    assert not index.requires_grad and not m.requires_grad
    assert index.grad is None and m.grad is None
    xv, mv = x.detach().cpu().numpy(), np.array(M34)
    expected = np.zeros((3, 4))
    for r, cols in enumerate([[0, 3], [1, 1], [2, 0]]):
        for c in cols:
            expected[r, c] += 1
    expected += np.where(mv, 1.0, 2 * xv) + mv + np.where(mv, 0.0, 1.0)
    np.testing.assert_allclose(x.grad.cpu().numpy(), expected, rtol=1e-12, atol=1e-12)
    # comparisons and integer results of float inputs are outside the graph
    assert not (x > 0).requires_grad
    assert not x.argmax().requires_grad
    assert not x.max(1).indices.requires_grad
    assert not x.sort(1).indices.requires_grad
    # ints mixed with floats: only the float side gets a gradient
    k = rc.tensor([[1, 2, 3, 4]] * 3, device=device)
    (g,) = autograd.grad((x * k).sum(), x)
    np.testing.assert_array_equal(g.cpu().numpy(), np.tile([1.0, 2.0, 3.0, 4.0], (3, 1)))


# -- Hessian-vector products -------------------------------------------------------------------


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_hessian_vector_product(device, layout):
    rng = np.random.default_rng(7)
    x0 = rng.standard_normal(6).reshape(2, 3)
    v0 = rng.standard_normal(6).reshape(2, 3)

    def f(x):
        return (x ** 3).sum() + (x.sin() * x).sum()

    def gradient(xa):
        x = LAYOUTS[layout](xa, device)
        return autograd.grad(f(x), x)[0].detach().cpu().numpy()

    x = LAYOUTS[layout](x0, device)
    v = rc.tensor(v0, dtype=F64, device=device)
    g = autograd.grad(f(x), x, create_graph=True)[0]
    assert g.requires_grad
    hv = autograd.grad(g, x, v)[0].detach().cpu().numpy()
    # the Hessian is diagonal: 6x + 2cos x - x sin x
    np.testing.assert_allclose(hv, (6 * x0 + 2 * np.cos(x0) - x0 * np.sin(x0)) * v0, rtol=1e-10, atol=1e-12)
    eps = 1e-5
    fd = (gradient(x0 + eps * v0) - gradient(x0 - eps * v0)) / (2 * eps)
    np.testing.assert_allclose(hv, fd, rtol=1e-6, atol=1e-7)
