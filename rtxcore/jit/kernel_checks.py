"""Each kernel node of a graph file checked against the kernel contract of
``rtxcore.dispatch.ops``: its arity, refs and scalars, and the shapes and
dtypes of its operands (operands shaped as the output, reductions' axes,
matmul's dims, convolution geometry, ...), one ``k_<op>`` method an op.
"""

from __future__ import annotations

from typing import Any

from ..dispatch import ops as OPS
from ..dispatch.types import contiguous_strides
from .fields import DTYPES, _Bad, _fail, _int, _is_scalar, _scalar_fits
from .ir import Ref

# kernels writing more than one output (rtxcore.jit.trace.OUTPUTS) and those
# reading what they write (READS_OUT): their first args are the written regions
N_OUTPUTS = {"max_pool2d_tiled": 2, "sort": 2, "layer_norm": 3, "batch_norm": 4,
             "batch_norm_backward": 2, "conv2d": 2, "lstm_cell": 3, "lstm_cell_backward": 2, "gru_cell": 2, "gru_cell_backward": 3}
READS_OUT = frozenset({"scatter_add", "index_put"})
APPROXIMATE = ("none", "tanh")  # gelu's one string argument
_FAMILY = {name: s.family for name, s in {**OPS.PRIMITIVES, **OPS.COMPOSITES}.items()}


def _domain(op: str) -> tuple[str, ...]:
    return OPS.DOMAINS[OPS.spec(op).dtypes]


def _bool_result(op: str) -> bool:
    return OPS.spec(op).result == "bool"


UNARY_OPS = frozenset(n for n, f in _FAMILY.items() if f == "unary")
BINARY_OPS = frozenset(n for n, f in _FAMILY.items() if f in ("binary", "compare"))
# what a fused step may be (rtxcore.jit.passes.ELEMENTWISE: primitives only)
ELEMENTWISE = frozenset(OPS.UNARY) | frozenset(OPS.BINARY) | frozenset(OPS.COMPARE) | \
    {"where", "cast", "copy"}
# integer division: the core refuses a zero divisor before the kernel runs (a
# host read, so a traced one has a Python-number divisor); a file's must be too
INT_DIVISION = frozenset({"floor_divide", "remainder"})


class _Kernel:
    """The checks of one kernel node: ``check`` runs its op's (``k_<op>``)."""

    def __init__(self, nodes: Any, where: str, op: str, args: list[Any],
                 outs: list[int]) -> None:
        self.n, self.where, self.op, self.args, self.outs = nodes, where, op, args, outs

    def fail(self, msg: str) -> _Bad:
        return _Bad(f"{self.where}: {msg}")

    def ref(self, k: int, what: str | None = None, optional: bool = False) -> int | None:
        a = self.args[k]
        if optional and a is None:
            return None
        if not isinstance(a, Ref):
            raise _fail(self.where, f"args[{k}]" + (f" ({what})" if what else ""),
                        "a ref to a value" + (" or null" if optional else ""), a)
        return a.id

    def int_arg(self, k: int, what: str, lo: int, hi: int) -> int:
        return _int(self.args[k], self.where, f"args[{k}] ({what})", lo, hi)

    def ints(self, k: int, what: str, n: int | None, lo: int, hi: int) -> list[int]:
        a = self.args[k]
        rank = self.n.limits.rank
        if not isinstance(a, tuple) or (n is not None and len(a) != n) or len(a) > rank:
            raise _fail(self.where, f"args[{k}] ({what})",
                        f"a tuple of {n if n is not None else 'at most ' + str(rank)} ints",
                        a)
        for x in a:
            _int(x, self.where, f"args[{k}] ({what}) items", lo, hi)
        return list(a)

    def arity(self, n: int) -> None:
        if len(self.args) != n:
            raise self.fail(f"{self.op} takes {n} arguments after its output"
                            f"{'s' if len(self.outs) > 1 else ''}, got {len(self.args)}")

    def shape(self, vid: int) -> list[int]:
        return self.n.shape(vid)

    def dtype(self, vid: int) -> str:
        return self.n.dtype(vid)

    def same_shape(self, vid: int, shape: list[int], what: str) -> None:
        if self.shape(vid) != list(shape):
            raise self.fail(f"{what} (value {vid}) must have shape {list(shape)}, got "
                            f"{self.shape(vid)}")

    def dtype_is(self, vid: int, dts: Any, what: str) -> None:
        dts = (dts,) if isinstance(dts, str) else tuple(dts)
        if self.dtype(vid) not in dts:
            raise self.fail(f"{what} (value {vid}) must be {' or '.join(dts)}, got "
                            f"{self.dtype(vid)}")

    def scalar(self, k: int, dt: str, what: str) -> None:
        v = self.args[k]
        if not _is_scalar(v) or not _scalar_fits(v, dt):
            raise _fail(self.where, f"args[{k}] ({what})", f"a {dt} operand: a ref or a "
                        "Python scalar of that dtype", v)

    def like(self, vid: int, shape: list[int], dt: str, what: str) -> None:
        """``vid`` of ``shape`` and dtype ``dt``."""
        self.same_shape(vid, shape, what)
        self.dtype_is(vid, dt, what)

    def out_dtype(self, out: int, *operands: tuple[int, str], domain: str = "") -> None:
        """The output of a dtype in the op's domain (``domain``'s, when given), and
        each ``(operand, what)`` of the output's dtype."""
        dt = self.dtype(out)
        self.dtype_is(out, _domain(domain or self.op), "the output")
        for r, what in operands:
            self.dtype_is(r, dt, what)

    def check(self) -> None:
        op = self.op
        n_out = N_OUTPUTS.get(op, 1)
        if len(self.outs) != n_out:
            raise self.fail(f"{op} writes {n_out} region{'s' if n_out > 1 else ''}, "
                            f"got {len(self.outs)}")
        if op in READS_OUT:  # the regions it accumulates into come first, as refs
            for j, r in enumerate(self.outs):
                if len(self.args) <= j or self.ref(j, "the region it reads") != r:
                    raise self.fail(f"args[{j}] must be a ref to the region it writes ({r})")
            self.args = self.args[len(self.outs):]
        if op in UNARY_OPS or op in ("copy", "cast"):
            return self.unary()
        if op in BINARY_OPS:
            return self.binary()
        check = getattr(self, "k_" + op, None)
        if check is None:  # an op added to rtxcore.dispatch.ops without a check here
            raise self.fail(f"this rtxcore can't check a graph's {op} nodes: it doesn't load it")
        check()

    # -- elementwise
    def unary(self) -> None:
        self.arity(1)
        out, op = self.outs[0], self.op
        x = self.ref(0, "x")
        self.same_shape(x, self.shape(out), "x")
        if op == "cast":
            return
        if op == "copy" or not _bool_result(op):
            self.dtype_is(out, self.dtype(x), "the output")
        else:
            self.dtype_is(out, "bool", "the output")
        self.dtype_is(x, _domain(op) if op != "copy" else DTYPES, "x")

    def operands(self, ks: tuple[int, ...], names: str) -> None:
        """Each of args ``ks``: a ref or a Python scalar (an elementwise operand)."""
        for k, name in zip(ks, names):
            a = self.args[k]
            if not _is_scalar(a) and not isinstance(a, Ref):
                raise _fail(self.where, f"args[{k}] ({name})", "a ref to a value or a Python "
                            "scalar", a)

    def binary(self) -> None:
        self.arity(2)
        self.operands((0, 1), "xy")
        out, op = self.outs[0], self.op
        shape = self.shape(out)
        refs = [k for k in (0, 1) if not _is_scalar(self.args[k])]
        if not refs:
            raise self.fail(f"{op} needs at least one ref operand, got two scalars")
        xs = [self.ref(k, "xy"[k]) for k in refs]
        for k, x in zip(refs, xs):
            self.same_shape(x, shape, "xy"[k])
        dt = self.dtype(xs[0])
        for k, x in zip(refs, xs):
            self.dtype_is(x, dt, "xy"[k])
        self.dtype_is(xs[0], _domain(op), "the operands")
        self.dtype_is(out, "bool" if _bool_result(op) else dt, "the output")
        for k in (0, 1):
            if k not in refs:
                self.scalar(k, dt, "xy"[k])
        if op in INT_DIVISION and DTYPES[dt].kind in "iu" and \
                (1 in refs or self.args[1] == 0):
            raise _fail(self.where, "args[1] (y)", f"a non-zero int: the divisor of an integer "
                        f"{op} (a tensor of divisors can't be checked for zeros)", self.args[1])

    def k_where(self) -> None:
        self.arity(3)
        self.operands((1, 2), "xy")
        out = self.outs[0]
        shape, dt = self.shape(out), self.dtype(out)
        cond = self.ref(0, "cond")
        self.same_shape(cond, shape, "cond")
        self.dtype_is(cond, "bool", "cond")
        for k in (1, 2):
            if _is_scalar(self.args[k]):
                self.scalar(k, dt, "xy"[k - 1])
            else:
                x = self.ref(k, "xy"[k - 1])
                self.same_shape(x, shape, "xy"[k - 1])
                self.dtype_is(x, dt, "xy"[k - 1])

    # -- memory
    def k_full(self) -> None:
        self.arity(1)
        self.scalar(0, self.dtype(self.outs[0]), "value")

    def k_arange(self) -> None:
        self.arity(2)
        out = self.outs[0]
        if len(self.shape(out)) != 1:
            raise self.fail(f"arange's output must be 1-D, got shape {self.shape(out)}")
        for k in (0, 1):
            v = self.args[k]
            if type(v) not in (bool, int, float) or (type(v) is int and abs(v) > 2**63):
                raise _fail(self.where, f"args[{k}]", "a number", v)

    def _random(self) -> None:
        self.arity(4)
        self.dtype_is(self.outs[0], _domain(self.op), "the output")
        for k in (0, 1):
            v = self.args[k]
            if type(v) not in (int, float) or (type(v) is int and abs(v) > 2**63):
                raise _fail(self.where, f"args[{k}]", "a number", v)
        self.int_arg(2, "seed", 0, 2**63 - 1)
        self.int_arg(3, "offset", 0, 2**63 - 1)

    k_uniform = k_normal = _random

    # -- reductions and scans
    def _reduce(self) -> None:
        self.arity(2)
        out = self.outs[0]
        x = self.ref(0, "x")
        shape = self.shape(x)
        axes = self.ints(1, "axes", None, 0, max(len(shape) - 1, 0))
        if axes != sorted(set(axes)) or any(a >= len(shape) for a in axes):
            raise _fail(self.where, "args[1] (axes)", f"sorted distinct axes of a rank "
                        f"{len(shape)} operand", self.args[1])
        self.same_shape(out, [1 if d in axes else s for d, s in enumerate(shape)], "the output")
        self.dtype_is(x, _domain(self.op), "x")
        self.dtype_is(out, self.dtype(x), "the output")

    k_sum = k_prod = k_max = k_min = _reduce

    def _axis(self, k: int, shape: list[int]) -> int:
        if not shape:
            raise self.fail(f"{self.op} needs an operand of rank >= 1")
        return self.int_arg(k, "axis", 0, len(shape) - 1)

    def _arg_reduce(self) -> None:
        self.arity(2)
        out = self.outs[0]
        x = self.ref(0, "x")
        shape = self.shape(x)
        axis = self._axis(1, shape)
        self.same_shape(out, [1 if d == axis else s for d, s in enumerate(shape)], "the output")
        self.dtype_is(out, "int64", "the output")
        self.dtype_is(x, _domain(self.op), "x")

    k_argmax = k_argmin = _arg_reduce

    def _scan(self) -> None:
        self.arity(2)
        out = self.outs[0]
        x = self.ref(0, "x")
        self.same_shape(x, self.shape(out), "x")
        self._axis(1, self.shape(x))
        self.dtype_is(x, _domain(self.op), "x")
        self.dtype_is(out, self.dtype(x), "the output")

    k_cumsum = k_softmax = k_log_softmax = _scan

    def _scan_backward(self) -> None:
        self.arity(3)
        out = self.outs[0]
        shape = self.shape(out)
        self.dtype_is(out, _domain(self.op), "the output")
        for k, what in enumerate(("g", "y")):
            self.like(self.ref(k, what), shape, self.dtype(out), what)
        self._axis(2, shape)

    k_softmax_backward = k_log_softmax_backward = _scan_backward

    # -- matmul
    def k_matmul(self) -> None:
        self.arity(2)
        out = self.outs[0]
        a, b = self.ref(0, "a"), self.ref(1, "b")
        sa, sb, so = self.shape(a), self.shape(b), self.shape(out)
        if len(sa) < 2 or len(sa) != len(sb) or len(so) != len(sa) or sa[:-2] != sb[:-2] or \
                sa[-1] != sb[-2] or so != sa[:-2] + [sa[-2], sb[-1]]:
            raise self.fail(f"matmul's shapes must be a (*B, n, k), b (*B, k, m), out "
                            f"(*B, n, m), got a {sa}, b {sb}, out {so}")
        self.out_dtype(out, (a, "a"), (b, "b"))

    # -- indexing
    def k_gather(self) -> None:
        self.arity(3)
        out = self.outs[0]
        x, idx = self.ref(0, "x"), self.ref(2, "index")
        sx, so = self.shape(x), self.shape(out)
        dim = self._axis(1, sx)
        self.same_shape(idx, so, "index")
        self._fits_but_along(so, sx, dim, f"gather's output {so} must have x's rank and fit x "
                                          f"{sx} but along dim {dim}")
        self._index_and(idx, x, "x")

    def k_scatter_add(self) -> None:
        self.arity(3)
        out = self.outs[0]
        idx, src = self.ref(1, "index"), self.ref(2, "src")
        so, si = self.shape(out), self.shape(idx)
        dim = self._axis(0, so)
        self.same_shape(src, si, "src")
        self._fits_but_along(si, so, dim, f"scatter_add's index {si} must have out's rank and "
                                          f"fit out {so} but along dim {dim}")
        self._index_and(idx, src, "src")

    def _fits_but_along(self, inner: list[int], outer: list[int], dim: int, msg: str) -> None:
        """``inner`` has ``outer``'s rank and fits in it but along ``dim``."""
        if len(inner) != len(outer) or \
                any(i > s for d, (i, s) in enumerate(zip(inner, outer)) if d != dim):
            raise self.fail(msg)

    def _index_and(self, idx: int, data: int, what: str) -> None:
        """An int64 index, and ``data`` of the output's dtype."""
        self.dtype_is(idx, "int64", "index")
        self.dtype_is(data, self.dtype(self.outs[0]), what)

    def _indices(self, k: int, rank: int) -> list[int]:
        a = self.args[k]
        if not isinstance(a, tuple) or not 1 <= len(a) <= rank or \
                not all(isinstance(r, Ref) for r in a):
            raise _fail(self.where, f"args[{k}] (indices)", f"a tuple of 1 to {rank} refs", a)
        ids = [r.id for r in a]
        for r in ids:
            self.same_shape(r, self.shape(ids[0]), "every index")
            self.dtype_is(r, "int64", "every index")
        return ids

    def k_index(self) -> None:
        self.arity(2)
        out = self.outs[0]
        x = self.ref(0, "x")
        ids = self._indices(1, len(self.shape(x)))
        want = self.shape(ids[0]) + self.shape(x)[len(ids):]
        self.same_shape(out, want, "the output")
        self.dtype_is(x, self.dtype(out), "x")

    def k_index_put(self) -> None:
        self.arity(2)
        out = self.outs[0]
        ids = self._indices(0, len(self.shape(out)))
        vals = self.ref(1, "values")
        target = self.shape(ids[0]) + self.shape(out)[len(ids):]
        sv = self.shape(vals)
        if len(sv) > len(target) or any(v not in (1, t) for v, t in
                                        zip(reversed(sv), reversed(target))):
            raise self.fail(f"index_put's values {sv} must broadcast to the indexed shape "
                            f"{target}")
        self.dtype_is(vals, self.dtype(out), "values")

    # -- composites
    def k_gelu(self) -> None:
        self.arity(2)
        out = self.outs[0]
        x = self.ref(0, "x")
        self.same_shape(x, self.shape(out), "x")
        self.out_dtype(out, (x, "x"))
        self._approximate(1)

    def k_gelu_backward(self) -> None:
        self.arity(4)
        out = self.outs[0]
        self.dtype_is(out, _domain("gelu"), "the output")
        for k, what in enumerate(("g", "x", "y")):
            self.like(self.ref(k, what), self.shape(out), self.dtype(out), what)
        self._approximate(3)

    def _approximate(self, k: int) -> None:
        if self.args[k] not in APPROXIMATE or type(self.args[k]) is not str:
            raise _fail(self.where, f"args[{k}] (approximate)", "'none' or 'tanh'", self.args[k])

    def k_layer_norm(self) -> None:
        self.arity(4)
        out, mean, rstd = self.outs
        x = self.ref(0, "x")
        sx = self.shape(x)
        m, n = self._rows(x)
        self.same_shape(out, sx, "the output")
        self.same_shape(mean, [m, 1], "mean")
        self.same_shape(rstd, [m, 1], "rstd")
        dt = self.dtype(x)
        for r, what in ((x, "x"), (out, "the output"), (mean, "mean"), (rstd, "rstd")):
            self.dtype_is(r, _domain("layer_norm") if r == x else dt, what)
        for k, what in ((1, "weight"), (2, "bias")):
            r = self.ref(k, what, optional=True)
            if r is not None:
                self.like(r, [n], dt, what)
        if type(self.args[3]) not in (int, float):
            raise _fail(self.where, "args[3] (eps)", "a number", self.args[3])

    def k_layer_norm_backward(self) -> None:
        self.arity(5)
        out = self.outs[0]
        g, x = self.ref(0, "g"), self.ref(1, "x")
        sx = self.shape(x)
        m, n = self._rows(x)
        if self.shape(out) not in ([m, n], [m + 2, n]):
            raise self.fail(f"layer_norm_backward's output (value {out}) must have shape "
                            f"{[m, n]} or {[m + 2, n]}, got {self.shape(out)}")
        self.same_shape(g, sx, "g")
        dt = self.dtype(x)
        self.dtype_is(x, _domain("layer_norm_backward"), "x")
        self.dtype_is(out, dt, "the output")
        self.dtype_is(g, dt, "g")
        for k, what in ((2, "mean"), (3, "rstd")):
            self.like(self.ref(k, what), [m, 1], dt, what)
        w = self.ref(4, "weight", optional=True)
        if w is not None:
            self.like(w, [n], dt, "weight")

    def _channels(self, x: int, what: str = "x") -> list[int]:
        """(N, C, S) of a contiguous 3-D ``x`` (a batch norm's input)."""
        sx = self.shape(x)
        if len(sx) != 3:
            raise self.fail(f"{self.op}'s {what} must be 3-D (N, C, S), got {sx}")
        want = list(contiguous_strides(tuple(sx)))
        if list(self.n.values[x].get("strides", want)) != want:
            raise self.fail(f"{self.op}'s {what} (value {x}) must be contiguous")
        return sx

    def k_batch_norm(self) -> None:
        self.arity(4)
        x = self.ref(0, "x")
        sx = self._channels(x)
        self.dtype_is(x, _domain("batch_norm"), "x")
        dt = self.dtype(x)
        out = self.outs[0]
        self.like(out, sx, dt, "the output")
        for r, what in zip(self.outs[1:], ("mean", "var", "rstd")):
            self.like(r, [sx[1]], dt, what)
        for k, what in ((1, "weight"), (2, "bias")):
            r = self.ref(k, what, optional=True)
            if r is not None:
                self.like(r, [sx[1]], dt, what)
        if type(self.args[3]) not in (int, float):
            raise _fail(self.where, "args[3] (eps)", "a number", self.args[3])

    def k_batch_norm_backward(self) -> None:
        self.arity(5)
        dx, sums = self.outs
        g, x = self.ref(0, "g"), self.ref(1, "x")
        sx = self._channels(x)
        self.dtype_is(x, _domain("batch_norm_backward"), "x")
        dt = self.dtype(x)
        self.like(g, sx, dt, "g")
        self._channels(g, "g")
        self.like(dx, sx, dt, "dx")
        self.like(sums, [2, sx[1]], dt, "sums")
        for k, what in ((2, "mean"), (3, "rstd")):
            self.like(self.ref(k, what), [sx[1]], dt, what)
        w = self.ref(4, "weight", optional=True)
        if w is not None:
            self.like(w, [sx[1]], dt, "weight")

    def _cell(self, kinds: str, gates: int) -> None:
        """An rnn cell kernel's regions and operands (``rtxcore.dispatch.ops``), by
        kind: ``g`` (B, gates*H), ``a`` (gates, B, H), ``s`` (B, H), ``o`` (B, H) or null."""
        sig = OPS.spec(self.op).signature
        names = sig[sig.index("(") + 1:sig.index(")")].split(", ")
        n_out = len(self.outs)
        self.arity(len(kinds) - n_out)
        refs = list(self.outs) + [self.ref(k, names[n_out + k], optional=kind == "o")
                                  for k, kind in enumerate(kinds[n_out:])]
        a = refs[kinds.index("a")]
        sa = self.shape(a)
        if len(sa) != 3 or sa[0] != gates:
            raise self.fail(f"{self.op}'s act (value {a}) must be ({gates}, B, H), got {sa}")
        self.dtype_is(a, _domain(self.op), "act")
        want = {"g": [sa[1], gates * sa[2]], "a": sa, "s": sa[1:], "o": sa[1:]}
        for r, kind, name in zip(refs, kinds, names):
            if r is not None:
                self.like(r, want[kind], self.dtype(a), name)

    def k_lstm_cell(self) -> None:
        self._cell("ssaggs", 4)

    def k_lstm_cell_backward(self) -> None:
        self._cell("gssoass", 4)

    def k_gru_cell(self) -> None:
        self._cell("saggs", 3)

    def k_gru_cell_backward(self) -> None:
        self._cell("ggssags", 3)

    def _rows(self, x: int) -> tuple[int, int]:
        """(M, N) of a contiguous 2-D ``x`` (a layer norm's rows)."""
        sx = self.shape(x)
        if len(sx) != 2:
            raise self.fail(f"{self.op}'s x must be 2-D (M, N), got {sx}")
        m, n = sx
        if list(self.n.values[x].get("strides", [n, 1])) != list(contiguous_strides((m, n))):
            raise self.fail(f"{self.op}'s x (value {x}) must be contiguous")
        return m, n

    def k_max_pool2d_tiled(self) -> None:
        self.arity(3)
        x = self.ref(0, "x")
        sx = self.shape(x)
        if len(sx) != 4:
            raise self.fail(f"max_pool2d_tiled's x must be 4-D (N, C, H, W), got {sx}")
        kh = self.int_arg(1, "kh", 1, max(sx[2], 1))
        kw = self.int_arg(2, "kw", 1, max(sx[3], 1))
        self._values_indices(x, [sx[0], sx[1], sx[2] // kh, sx[3] // kw])

    def _values_indices(self, x: int, shape: list[int]) -> None:
        """The outputs (values, indices) of ``shape``: values of ``x``'s dtype
        (in the op's domain), int64 indices."""
        values, indices = self.outs
        self.same_shape(values, shape, "values")
        self.same_shape(indices, shape, "indices")
        self.dtype_is(x, _domain(self.op), "x")
        self.dtype_is(values, self.dtype(x), "values")
        self.dtype_is(indices, "int64", "indices")

    def k_max_pool2d_tiled_backward(self) -> None:
        self.arity(2)
        out = self.outs[0]
        g, idx = self.ref(0, "g"), self.ref(1, "indices")
        so, sg = self.shape(out), self.shape(g)
        if len(so) != 4 or len(sg) != 4 or sg[:2] != so[:2] or sg[2] > so[2] or sg[3] > so[3]:
            raise self.fail(f"max_pool2d_tiled_backward's shapes must be out (N, C, H, W), "
                            f"g (N, C, OH <= H, OW <= W), got out {so}, g {sg}")
        self.same_shape(idx, sg, "indices")
        self.out_dtype(out, (g, "g"))
        self.dtype_is(idx, "int64", "indices")

    def _conv_params(self, k: int) -> tuple[list[int], list[int], list[int]]:
        stride = self.ints(k, "stride", 2, 1, 2**31)
        padding = self.ints(k + 1, "padding", 4, 0, 2**31)
        dilation = self.ints(k + 2, "dilation", 2, 1, 2**31)
        return stride, padding, dilation

    def _conv_out(self, sx: list[int], sw: list[int], stride: list[int], padding: list[int],
                  dilation: list[int]) -> list[int]:
        """(N, OC, OH, OW) of a conv of x ``sx`` by weight ``sw``."""
        if len(sx) != 4 or len(sw) != 4 or sw[1] != sx[1]:
            raise self.fail(f"{self.op}'s x must be (N, C, H, W) and weight (OC, C, kh, kw), "
                            f"got x {sx}, weight {sw}")
        dims = []
        for d, (size, kern) in enumerate(zip(sx[2:], sw[2:])):
            span = size + padding[2 * d] + padding[2 * d + 1] - dilation[d] * (kern - 1) - 1
            if span < 0:
                raise self.fail(f"{self.op}'s kernel {sw[2:]} is larger than the padded input")
            dims.append(span // stride[d] + 1)
        return [sx[0], sw[0], *dims]

    def k_conv2d(self) -> None:
        self.arity(6)
        out, cols = self.outs
        x, w = self.ref(0, "x"), self.ref(1, "weight")
        bias = self.ref(2, "bias", optional=True)
        sx, sw = self.shape(x), self.shape(w)
        so = self._conv_out(sx, sw, *self._conv_params(3))
        self.same_shape(out, so, "the output")
        self.same_shape(cols, [sx[1] * sw[2] * sw[3], sx[0] * so[2] * so[3]], "cols")
        self.out_dtype(out, (x, "x"), (w, "weight"), (cols, "cols"))
        if bias is not None:
            self.like(bias, [sw[0]], self.dtype(out), "bias")

    def k_conv2d_input_grad(self) -> None:
        self.arity(5)
        dx = self.outs[0]
        g, w = self.ref(0, "g"), self.ref(1, "weight")
        so = self._conv_out(self.shape(dx), self.shape(w), *self._conv_params(2))
        self.same_shape(g, so, "g")
        self.out_dtype(dx, (g, "g"), (w, "weight"))

    def k_conv2d_weight_grad(self) -> None:
        self.arity(2)
        dw = self.outs[0]
        g, cols = self.ref(0, "g"), self.ref(1, "cols")
        sw, sg = self.shape(dw), self.shape(g)
        if len(sw) != 4 or len(sg) != 4 or sg[1] != sw[0]:
            raise self.fail(f"conv2d_weight_grad's shapes must be dweight (OC, C, kh, kw), "
                            f"g (N, OC, OH, OW), got {sw}, {sg}")
        self.same_shape(cols, [sw[1] * sw[2] * sw[3], sg[0] * sg[2] * sg[3]], "cols")
        self.out_dtype(dw, (g, "g"), (cols, "cols"))

    def k_conv2d_weight_grad_x(self) -> None:
        self.arity(5)
        dw = self.outs[0]
        g, x = self.ref(0, "g"), self.ref(1, "x")
        sw = self.shape(dw)
        so = self._conv_out(self.shape(x), sw, *self._conv_params(2))
        self.same_shape(g, so, "g")
        self.out_dtype(dw, (g, "g"), (x, "x"))
        # the im2col matrix a backend may form for it (the cols form's graph holds
        # it as a value): counted with the graph's buffers against their limit
        self.n.bytes += sw[1] * sw[2] * sw[3] * so[0] * so[2] * so[3] * \
            DTYPES[self.dtype(x)].itemsize

    def k_sort(self) -> None:
        self.arity(3)
        x = self.ref(0, "x")
        sx = self.shape(x)
        self._axis(1, sx)
        self._values_indices(x, sx)
        if type(self.args[2]) is not bool:
            raise _fail(self.where, "args[2] (descending)", "a bool", self.args[2])
