"""OpenCL C every kernel shares: element types, expression tables, helpers, elementwise templates.

A kernel is specialised at compile time on the op, the dtypes and the layout —
the rank of the (coalesced) index space and, per operand, whether it is
contiguous (``c``), strided (``s``) or a scalar argument (``k``). Shapes,
strides and offsets are kernel arguments, so one program serves every shape of
that layout. Strides and offsets count elements; stride-0 dims are broadcasts.
The other families' templates live with their launches (``reductions.py``,
``indexing.py``, ``matmul.py``) and build on the helpers here (``header``,
``load``, ``store``, ``index_math``, ``ptr_params``, ``kernel_source``).

Every generator takes the kernel's name (``kname``), and its source can be joined with
others' into one program (``CT`` is redefined per kernel, shared definitions are
guarded): the kernels package builds a family of ops sharing one signature
(all binary ops on float32 operands of one layout, ...) with one compile, since
an OpenCL compiler's fixed cost per program (PoCL: ~0.1 s) dwarfs a small
kernel's own.

Element types: ``bool`` is stored as ``uchar`` (0/1), ``float16`` as ``half``
but loaded and stored with ``vload_half``/``vstore_half_rte`` and computed in
``float``; everything else is computed in its own type.
"""

from __future__ import annotations

from rtxcore.dispatch import cexpr as CX

# dtype name -> (storage type, compute type)
CTYPE = {
    "bool": ("uchar", "uchar"), "uint8": ("uchar", "uchar"), "int8": ("char", "char"),
    "int16": ("short", "short"), "int32": ("int", "int"), "int64": ("long", "long"),
    "float16": ("half", "float"), "float32": ("float", "float"), "float64": ("double", "double"),
}
FLOATS = ("float16", "float32", "float64")

# Elementwise ops: (expression for float dtypes, expression for integer/bool dtypes),
# the contract's C expressions (``rtxcore.dispatch.cexpr``: ``a``, ``b``, ``c`` the
# operands in the compute type ``CT``; None: not defined there), with OpenCL's own
# integer pow and two float composites with kernels of their own (ints: the core's
# exact integer composite). floor(a / b) is wrong next to multiples: 1.0 // 0.1
# would be 10 and 1.0 % 0.1 zero, 5 % inf NaN; these go through fmod, which is
# exact, with PyTorch's (and Python's) rounding and signs
UNARY = dict(CX.UNARY)
# float composites as OpenCL C's own functions (the core's decompositions launch
# ten to fifty kernels each: erf's, a GELU's, was most of a GPT step's time)
UNARY.update({"erf": ("erf(a)", None), "expm1": ("expm1(a)", None),
              "log1p": ("log1p(a)", None), "log2": ("log2(a)", None), "tan": ("tan(a)", None),
              "sigmoid": ("(CT)1 / ((CT)1 + exp(-a))", None),
              "ceil": ("ceil(a)", None), "trunc": ("trunc(a)", None),
              "round": ("rint(a)", None),  # (rint: to nearest, ties to even)
              "isnan": ("ISNAN(a)", None), "isinf": ("(fabs(a) == INFINITY)", None)})
BINARY = {**CX.BINARY, "pow": ("RTX_POW(a, b)", "ipow(a, b)"),
          "floor_divide": ("FLOORDIV(a, b)", None), "remainder": ("REMAINDER(a, b)", None)}
# the float composites' macros (type-generic, so any CT of the program can use them)
FLOAT_DIVMOD = """
#define MOD_FIX(a, b, m) ((m) != 0 && (((b) < 0) != ((m) < 0)))
#define REMAINDER(a, b) (MOD_FIX(a, b, fmod(a, b)) ? fmod(a, b) + (b) : fmod(a, b))
#define QUOT(a, b) (((a) - fmod(a, b)) / (b) - (MOD_FIX(a, b, fmod(a, b)) ? (CT)1 : (CT)0))
#define FLOORDIV(a, b) ((b) == 0 ? (a) / (b) : (QUOT(a, b) != 0 \\
    ? floor(QUOT(a, b)) + ((QUOT(a, b) - floor(QUOT(a, b)) > (CT)0.5) ? (CT)1 : (CT)0) \\
    : copysign((CT)0, (a) / (b))))
"""
FLOAT_ONLY = {"floor_divide", "remainder"}
# float pow: the small integer exponents as products and a division, as rtx_cpu
# and PyTorch compute them (the same bits as cpu's), the rest PoCL's pow -- a
# library call taking about 190 ns an element (x ** 3 in a tanh-GELU was 80% of
# a small GPT's device time). The exponent is a kernel argument or an operand:
# one compare chain, the same branch for every element when it is a number.
# Special values as pow's: (-0.0) ** 3 = -0.0, nan ** 0 = 1, (-0.0) ** -1 = -inf.
FLOAT_POW = """
#define RTX_POW(a, b) ((b) == 2 ? (a) * (a) : (b) == 3 ? ((a) * (a)) * (a) : \\
    (b) == 1 ? (a) : (b) == 0 ? (CT)1 : (b) == 4 ? ((a) * (a)) * ((a) * (a)) : \\
    (b) == -1 ? (CT)1 / (a) : (b) == -2 ? ((CT)1 / (a)) * ((CT)1 / (a)) : pow(a, b))
"""
TERNARY = dict(CX.TERNARY)


def expression(table: dict, op: str, dtype: str) -> str:
    if op in ("tanh", "erf") and dtype in ("float32", "float16"):  # (float16: in float)
        return f"rtx_{op}(a)"
    return CX.pick(table, op, dtype, dtype in FLOATS, "opencl")


# float tanh without PoCL's builtin (a polynomial per lane even on float8):
# below |x| = 0.625 a rational function x * P(x^2) / Q(x^2) (degrees 13 and 6,
# minimax coefficients as in Eigen's fast float tanh; x itself below 4e-4),
# above it 1 - 2 / (2^(2x log2 e) + 1) with the sign of x (exp2 vectorises;
# near saturation this keeps 1 + tanh(x) as accurate as the builtin does, which
# a GELU's tail needs). NaN stays NaN, +-inf gives +-1. Against float64 tanh on
# normal(0, 3) samples: at most 1.0e-7 off (the builtin: 6.5e-8), and about
# 1.5x as fast on float8. ``with_helpers`` puts it at the top of a program
# that calls it (once, whatever number of kernels the program holds).
TANH = """#define RTX_TANH_BODY(T) { \\
    const T x2 = a * a; \\
    T p = x2 * -2.76076847742355e-16f + 2.00018790482477e-13f; \\
    p = p * x2 + -8.60467152213735e-11f; p = p * x2 + 5.12229709037114e-08f; \\
    p = p * x2 + 1.48572235717979e-05f; p = p * x2 + 6.37261928875436e-04f; \\
    p = (p * x2 + 4.89352455891786e-03f) * a; \\
    T q = x2 * 1.19825839466702e-06f + 1.18534705686654e-04f; \\
    q = q * x2 + 2.26843463243900e-03f; q = q * x2 + 4.89352518554385e-03f; \\
    const T small = select(p / q, a, isless(fabs(a), (T)0.0004f) | ((a) != (a))); \\
    const T e = exp2((T)2.885390081777927f * fabs(a)); \\
    const T big = copysign((T)1.0f - (T)2.0f / (e + (T)1.0f), a); \\
    return select(small, big, isgreater(fabs(a), (T)0.625f)); }
__attribute__((overloadable)) float rtx_tanh(float a) RTX_TANH_BODY(float)
__attribute__((overloadable)) float8 rtx_tanh(float8 a) RTX_TANH_BODY(float8)
"""


# float erf without PoCL's builtin (a library call per element, about 20 ns): one
# rational function of x^2 on x clipped to [-4, 4], rtx_cpu's float erf (Eigen's
# and XLA's coefficients; at most 4e-7 off, about 3 float32 ulps near 1), x last
# so that tiny and subnormal x lose nothing; NaN stays NaN, +-inf gives +-1.
ERF = """#define RTX_ERF_BODY(T) { \\
    const T x = select(clamp(a, (T)-4.0f, (T)4.0f), a, a != a); \\
    const T z = x * x; \\
    T p = z * -2.72614225801306e-10f + 2.77068142495902e-08f; \\
    p = p * z + -2.10102402082508e-06f; p = p * z + -5.69250639462346e-05f; \\
    p = p * z + -7.34990630326855e-04f; p = p * z + -2.95459980854025e-03f; \\
    p = p * z + -1.60960333262415e-02f; \\
    T q = z * -1.45660718464996e-05f + -2.13374055278905e-04f; \\
    q = q * z + -1.68282697438203e-03f; q = q * z + -7.37332916720468e-03f; \\
    q = q * z + -1.42647390514189e-02f; \\
    return (p / q) * x; }
__attribute__((overloadable)) float rtx_erf(float a) RTX_ERF_BODY(float)
__attribute__((overloadable)) float8 rtx_erf(float8 a) RTX_ERF_BODY(float8)
"""

# The GELU and its gradient as one kernel each, the core's formulas in its order.
# The gradient computes Phi(x) (or tanh's term) again rather than reading it off
# y / x as rtx_cpu does: OpenCL's float division may be 2.5 ulps off, and at the
# tails that ratio is multiplied by ~x^3 (x = 88: 0.4% off through a division
# 88 / 88 != 1); recomputed, 1 - t^2 is exactly 0 where t is +-1.
_ERF_OF = {"float64": "erf", "float32": "rtx_erf", "float16": "rtx_erf"}
_TANH_OF = {"float64": "tanh", "float32": "rtx_tanh", "float16": "rtx_tanh"}


def gelu_expression(approximate: str, dtype: str) -> str:
    """``gelu`` of ``a`` (x), in the compute type ``CT``."""
    if approximate == "tanh":
        return (f"(({_TANH_OF[dtype]}((((a * a) * (CT)0.044715 + (CT)1) * a) * "
                "(CT)0.7978845608028654) + (CT)1) * a) * (CT)0.5")
    return f"(({_ERF_OF[dtype]}(a * (CT)0.7071067811865476) + (CT)1) * a) * (CT)0.5"


def gelu_backward_source(approximate: str, dtype: str) -> tuple[str, str]:
    """(prologue, expression) of ``gelu_backward``: ``a`` g, ``b`` x (``c``, y,
    is not read)."""
    ct = CTYPE[dtype][1]
    name = f"rtx_gelu_grad_{approximate}_{ct}"
    if approximate == "tanh":
        body = (f"const CT t = {_TANH_OF[dtype]}((((x * x) * (CT)0.044715 + (CT)1) * x) * "
                "(CT)0.7978845608028654);\n"
                "    return ((CT)0.5 * ((CT)1 + t) + (CT)0.5 * x * (((CT)1 - t) * ((CT)1 + t)) "
                "* (CT)0.7978845608028654 * ((x * x) * (CT)0.134145 + (CT)1)) * g;")
    else:
        body = ("return (exp((x * x) * (CT)-0.5) * x * (CT)0.3989422804014327 + (CT)0.5 * "
                f"((CT)1 + {_ERF_OF[dtype]}(x * (CT)0.7071067811865476))) * g;")
    prologue = f"static inline CT {name}(CT g, CT x) {{\n    {body}\n}}\n"
    return prologue, f"{name}(a, b)"


def with_helpers(source: str) -> str:
    """``source`` with the helper functions it calls defined first."""
    if "RTX_POW(" in source and "#define RTX_POW" not in source:
        source = FLOAT_POW + source
    if "rtx_erf(" in source:
        source = ERF + source
    return TANH + source if "rtx_tanh(" in source else source


def header(dtypes: set[str] | list[str]) -> str:
    # isnan() is a library call on PoCL (builtins aren't inlined): x != x is one compare
    lines = ["#define ISNAN(v) ((v) != (v))"]
    if "float64" in dtypes:
        lines.append("#pragma OPENCL EXTENSION cl_khr_fp64 : enable")
    return "\n".join(lines) + "\n"


def load(dtype: str, ptr: str, idx: str) -> str:
    if dtype == "float16":
        return f"vload_half({idx}, {ptr})"
    return f"{ptr}[{idx}]"


def store(dtype: str, ptr: str, idx: str, value: str) -> str:
    if dtype == "float16":
        return f"vstore_half_rte((float)({value}), {idx}, {ptr});"
    if dtype == "bool":
        return f"{ptr}[{idx}] = (uchar)(({value}) != 0);"
    return f"{ptr}[{idx}] = ({CTYPE[dtype][0]})({value});"


INT_POW = """
/* integer power as in C and PyTorch: negative exponents give 1 for 1, +-1 for -1, else 0 */
CT ipow(CT a, CT b) {
    if (b < 0) return a == 1 ? 1 : (a == (CT)-1 ? ((b & 1) ? (CT)-1 : 1) : 0);
    CT r = 1;
    while (b) { if (b & 1) r *= a; a *= a; b >>= 1; }
    return r;
}
"""


def index_math(rank: int, names: list[str], var: str = "i", rows: bool = False) -> str:
    """C statements that turn the linear id ``var`` into the element offset
    ``p_<name>`` of every strided operand, walking dims from the last. Dim d has
    size ``n<d>`` and operand X's stride there is ``<X>s<d>``. ``rows``: a 2-D
    launch instead, id 0 the index along the last dim and id 1 the row (all the
    dims before it), so that the division chain is the row's alone -- the same
    for a whole work-group along dim 0, which PoCL then computes once (a 6-D
    strided copy, im2col's, ran 25x as fast as with one linear id)."""
    if rows:
        last = rank - 1
        lines = ["long r = get_global_id(1), q;", "const long j = get_global_id(0);"]
        lines += [f"long p_{n} = {n}_o + j * {n}s{last};" for n in names]
        for d in range(last - 1, 0, -1):
            lines.append(f"q = r % n{d}; r /= n{d};")
            lines.append(" ".join(f"p_{n} += q * {n}s{d};" for n in names))
        lines.append(" ".join(f"p_{n} += r * {n}s0;" for n in names))
        return "\n    ".join(lines)
    lines = [f"long r = {var}, q;"]
    for n in names:
        lines.append(f"long p_{n} = {n}_o;")
    for d in range(rank - 1, 0, -1):
        lines.append(f"q = r % n{d}; r /= n{d};")
        lines.append(" ".join(f"p_{n} += q * {n}s{d};" for n in names))
    lines.append(" ".join(f"p_{n} += r * {n}s0;" for n in names))
    return "\n    ".join(lines)


def elementwise(op: str, expr: str, out: tuple[str, str], ins: list[tuple[str, str]],
                rank: int, prologue: str = "", ct: str | None = None,
                extra: tuple[tuple[str, str], ...] = (), kname: str = "k",
                rows: bool = False) -> tuple[str, list[str]]:
    """One kernel ``kname``: ``out = expr(a, b, c)`` at every element. ``rows``
    (strided, rank 2 or more): launched 2-D, (last dim, rows) (``index_math``).

    ``out`` is (dtype, layout) and each input (dtype, layout), with layout ``c``
    contiguous, ``s`` strided or ``k`` a scalar argument; inputs are called
    ``a``, ``b``, ``c`` in ``expr`` (their pointers ``pa``, ``pb``, ``pc``). ``CT``
    is the first input's compute type unless ``ct`` says otherwise. The linear id
    is ``i``. ``extra`` adds scalar parameters: (C declaration, argument kind). Returns the source and the argument kinds for
    ``set_scalar_arg_dtypes``: "buf", "long", or a dtype name for a scalar.
    """
    odt, olay = out
    params: list[str] = []
    kinds: list[str] = []
    strided: list[str] = []

    def operand(ptr: str, dt: str, lay: str, const: bool, scalar_name: str = "") -> None:
        if lay == "k":
            params.append(f"{CTYPE[dt][1]} {scalar_name}")
            kinds.append(dt)
            return
        q = "const " if const else ""
        params.append(f"__global {q}{CTYPE[dt][0]} *{ptr}")
        params.append(f"long {ptr}_o")
        kinds.extend(["buf", "long"])
        if lay == "s":
            params.extend(f"long {ptr}s{d}" for d in range(rank))
            kinds.extend(["long"] * rank)
            strided.append(ptr)

    operand("out", odt, olay, False)
    names = "abc"[: len(ins)]
    for name, (dt, lay) in zip(names, ins):
        operand("p" + name, dt, lay, True, name)
    params.extend(f"long n{d}" for d in range(1, rank))
    kinds.extend(["long"] * (rank - 1))
    for decl, kind in extra:
        params.append(decl)
        kinds.append(kind)

    rows = rows and rank >= 2 and bool(strided)
    body = [index_math(rank, strided, rows=rows)] if strided else []
    for name, (dt, lay) in zip(names, ins):
        if lay != "k":
            at = f"p_p{name}" if lay == "s" else f"p{name}_o + i"
            body.append(f"const {CTYPE[dt][1]} {name} = {load(dt, 'p' + name, at)};")
    oat = "p_out" if olay == "s" else "out_o + i"
    if ct is None:
        ct = CTYPE[ins[0][0]][1] if ins else CTYPE[odt][1]
    dts = {odt, *(dt for dt, _ in ins)}
    src = (
        header(dts)
        + f"#undef CT\n#define CT {ct}\n"
        + prologue
        + f"/* {op}: out = {expr} */\n"
        + f"__kernel void {kname}(" + ", ".join(params) + ")\n{\n"
        + ("    const long i = get_global_id(1) * n" + str(rank - 1) + " + get_global_id(0);\n    "
           if rows else "    const long i = get_global_id(0);\n    ")
        + "\n    ".join(body) + "\n"
        + "    " + store(odt, "out", oat, expr) + "\n"
        + "}\n"
    )
    return src, kinds


# float32 elementwise ops whose expressions read the same on vector types (no ?:,
# no comparisons): contiguous launches of these run WIDTH elements a work-item.
# Not sin: PoCL's float8 sin is wrong at the smallest normal float (sin(-FLT_MIN)
# gave -0.0078; the conformance suite's special values caught it)
VECTOR_OPS = frozenset({"neg", "abs", "exp", "log", "sqrt", "cos", "tanh", "reciprocal",
                        "floor", "copy", "add", "sub", "mul", "div", "erf"})
WIDTH = 8


def elementwise_vector(op: str, expr: str, layouts: list[str]) -> tuple[str, list[str]]:
    """``elementwise`` for float32 contiguous operands (layout ``c``) or scalars
    (``k``), WIDTH consecutive elements per work-item on floatWIDTH. Its
    arguments are those of the contiguous scalar kernel, so one argument list
    serves both (the scalar one runs the tail)."""
    vt = f"float{WIDTH}"
    params, kinds, body = ["__global float *out", "long out_o"], ["buf", "long"], []
    for name, lay in zip("abc", layouts):
        if lay == "k":
            params.append(f"float {name}")
            kinds.append("float32")
        else:
            params += [f"__global const float *p{name}", f"long p{name}_o"]
            kinds += ["buf", "long"]
            body.append(f"const {vt} {name} = vload{WIDTH}(0, p{name} + p{name}_o + i * {WIDTH});")
    src = (header(["float32"]) + f"#define CT {vt}\n/* {op}, vector form: out = {expr} */\n"
           + "__kernel void k(" + ", ".join(params) + ")\n{\n"
           + "    const long i = get_global_id(0);\n    " + "\n    ".join(body)
           + f"\n    vstore{WIDTH}(({vt})({expr}), 0, out + out_o + i * {WIDTH});\n}}\n")
    return src, kinds


def ptr_params(name: str, dt: str, rank: int, const: bool = True) -> tuple[list[str], list[str]]:
    """Params (and arg kinds) of one strided operand: pointer, offset, strides."""
    q = "const " if const else ""
    params = [f"__global {q}{CTYPE[dt][0]} *{name}", f"long {name}_o"]
    params += [f"long {name}s{d}" for d in range(rank)]
    return params, ["buf", "long"] + ["long"] * rank


def kernel_source(title: str, dts: set[str], params: list[str], body: str) -> str:
    """Kernel ``k`` with ``params`` running ``body`` at work item ``i``."""
    return (header(dts) + f"/* {title} */\n__kernel void k(" + ", ".join(params)
            + ")\n{\n    const long i = get_global_id(0);\n    " + body + "\n}\n")
