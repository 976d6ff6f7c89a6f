"""OpenCL C for every primitive: an expression table and one template per family.

A kernel is specialised at compile time on the op, the dtypes and the layout —
the rank of the (coalesced) index space and, per operand, whether it is
contiguous (``c``), strided (``s``) or a scalar argument (``k``). Shapes,
strides and offsets are kernel arguments, so one program serves every shape of
that layout. Strides and offsets count elements; stride-0 dims are broadcasts.

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

# dtype name -> (storage type, compute type)
CTYPE = {
    "bool": ("uchar", "uchar"), "uint8": ("uchar", "uchar"), "int8": ("char", "char"),
    "int16": ("short", "short"), "int32": ("int", "int"), "int64": ("long", "long"),
    "float16": ("half", "float"), "float32": ("float", "float"), "float64": ("double", "double"),
}
FLOATS = ("float16", "float32", "float64")

# the smallest and largest value of each compute type (for max/min reductions)
LIMITS = {
    "uchar": ("0", "UCHAR_MAX"), "char": ("CHAR_MIN", "CHAR_MAX"),
    "short": ("SHRT_MIN", "SHRT_MAX"), "int": ("INT_MIN", "INT_MAX"),
    "long": ("LONG_MIN", "LONG_MAX"), "float": ("-INFINITY", "INFINITY"),
    "double": ("-INFINITY", "INFINITY"),
}

# Elementwise ops: (expression for float dtypes, expression for integer/bool dtypes).
# `a`, `b`, `c` are the operands in the compute type `CT`; None: not defined there
# (the core never asks: it promotes integers to float for these).
UNARY = {
    "neg": ("-a", "-a"),
    "abs": ("fabs(a)", "(a < 0 ? -a : a)"),
    "sign": ("(ISNAN(a) ? a : (CT)((a > 0) - (a < 0)))", "(CT)((a > 0) - (a < 0))"),
    "exp": ("exp(a)", None),
    "log": ("log(a)", None),
    "sqrt": ("sqrt(a)", None),
    "sin": ("sin(a)", None),
    "cos": ("cos(a)", None),
    "tanh": ("tanh(a)", None),
    "reciprocal": ("(CT)1 / a", None),
    "floor": ("floor(a)", "a"),
    "logical_not": ("!a", "!a"),
    "copy": ("a", "a"),
    "cast": ("a", "a"),
}
BINARY = {
    "add": ("a + b", "a + b"),
    "sub": ("a - b", "a - b"),
    "mul": ("a * b", "a * b"),
    "div": ("a / b", None),
    "pow": ("pow(a, b)", "ipow(a, b)"),
    "maximum": ("(ISNAN(a) || a > b) ? a : b", "(a > b ? a : b)"),
    "minimum": ("(ISNAN(a) || a < b) ? a : b", "(a < b ? a : b)"),
    "logical_and": ("(a != 0) && (b != 0)", "(a != 0) && (b != 0)"),
    "logical_or": ("(a != 0) || (b != 0)", "(a != 0) || (b != 0)"),
    "eq": ("a == b", "a == b"), "ne": ("a != b", "a != b"),
    "lt": ("a < b", "a < b"), "le": ("a <= b", "a <= b"),
    "gt": ("a > b", "a > b"), "ge": ("a >= b", "a >= b"),
    # composites with kernels of their own on floats (ints: the core's exact
    # integer composite). floor(a / b) is wrong next to multiples: 1.0 // 0.1
    # would be 10 and 1.0 % 0.1 zero, 5 % inf NaN; these go through fmod, which
    # is exact, with PyTorch's (and Python's) rounding and signs
    "floor_divide": ("FLOORDIV(a, b)", None),
    "remainder": ("REMAINDER(a, b)", None),
}
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
TERNARY = {"where": ("a ? b : c", "a ? b : c")}

# Reductions: (identity, combine(acc, v)) in the accumulator type AT.
REDUCE = {
    "sum": ("0", "acc + v"),
    "prod": ("1", "acc * v"),
    "max": ("LOWEST", "(ISNAN(acc) || acc > v) ? acc : v"),
    "min": ("HIGHEST", "(ISNAN(acc) || acc < v) ? acc : v"),
}
REDUCE_INT = {"max": "(acc > v ? acc : v)", "min": "(acc < v ? acc : v)"}


def expression(table: dict, op: str, dtype: str) -> str:
    fl, it = table[op]
    if op == "tanh" and dtype in ("float32", "float16"):  # (float16 computes in float)
        return "rtx_tanh(a)"
    expr = fl if dtype in FLOATS else it
    if expr is None:
        raise TypeError(f"opencl: {op} is not defined for {dtype}")
    return expr


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


def with_helpers(source: str) -> str:
    """``source`` with the helper functions it calls defined first."""
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


def index_math(rank: int, names: list[str], var: str = "i") -> str:
    """C statements that turn the linear id ``var`` into the element offset
    ``p_<name>`` of every strided operand, walking dims from the last. Dim d has
    size ``n<d>`` and operand X's stride there is ``<X>s<d>``."""
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
                extra: tuple[tuple[str, str], ...] = (), kname: str = "k") -> tuple[str, list[str]]:
    """One kernel ``kname``: ``out = expr(a, b, c)`` at every element.

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

    body = [index_math(rank, strided)] if strided else []
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
        + "    const long i = get_global_id(0);\n    "
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
                        "floor", "copy", "add", "sub", "mul", "div"})
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


# -- reductions ------------------------------------------------------------------------------

REDUCE_LOCAL = 128  # work-group size of tree reductions (a power of two)


def _strided_params(ptr: str, prefix: str, rank: int) -> list[str]:
    return [f"long {ptr}{prefix}{d}" for d in range(rank)]


def _walk(var: str, sizes: str, rank: int, ptrs: list[tuple[str, str]], into: str) -> str:
    """C statements adding to ``<into>_<ptr>`` the offset of element ``var`` of an
    index space of ``rank`` dims (sizes ``<sizes>1..``), stride params ``<ptr><pre><d>``."""
    lines = [f"long {var}_r = {var}, {var}_q;"]
    for d in range(rank - 1, 0, -1):
        lines.append(f"{var}_q = {var}_r % {sizes}{d}; {var}_r /= {sizes}{d};")
        lines.append(" ".join(f"{into}_{p} += {var}_q * {p}{pre}{d};" for p, pre in ptrs))
    lines.append(" ".join(f"{into}_{p} += {var}_r * {p}{pre}0;" for p, pre in ptrs))
    return "\n        ".join(lines)


def reduction(op: str, xdt: str, odt: str, ro: int, ri: int, mode: str,
              arg: bool = False, kname: str = "k") -> tuple[str, list[str]]:
    """Reduce ``x`` over an inner index space (``ri`` dims, ``K`` elements) for
    every point of an outer one (``ro`` dims, one output each).

    ``mode``: ``tree`` runs one work-group of REDUCE_LOCAL per (output, part):
    each work item folds every REDUCE_LOCAL-th element of its part, then the group
    combines in local memory, halving each step; with ``parts`` > 1 the groups
    write partial results to ``tmp`` (a second launch reduces those).
    ``serial`` runs one work item per output (for short reductions, or when
    neighbouring outputs are neighbours in memory).
    ``arg`` (argmax/argmin): the fold keeps (value, index), the first best wins,
    NaN counting as the best; the output is the int64 index.
    """
    ct = CTYPE[xdt][1]
    at = ct if arg else CTYPE[odt][1]
    lo, hi = LIMITS[at]
    partial = mode == "partial"
    if arg:
        cmp = ">" if op == "argmax" else "<"
        nan = "ISNAN" if xdt in FLOATS else "NOTNAN"
        ident = lo if op == "argmax" else hi
        better = (f"({nan}(v) ? (!{nan}(acc) || j < acc_i) : "
                  f"(!{nan}(acc) && (v {cmp} acc || (v == acc && j < acc_i))))")
    else:
        ident, combine = REDUCE[op]
        if xdt not in FLOATS and op in REDUCE_INT:
            combine = REDUCE_INT[op]
        ident = {"LOWEST": lo, "HIGHEST": hi}.get(ident, ident)

    params = ["__global " + (f"{at} *tmp" if partial else f"{CTYPE[odt][0]} *out"), "long out_o"]
    params += _strided_params("out", "s", ro)
    params += [f"__global const {CTYPE[xdt][0]} *px", "long px_o"]
    params += _strided_params("px", "s", ro) + _strided_params("px", "r", ri)
    params += [f"long n{d}" for d in range(1, ro)] + [f"long m{d}" for d in range(1, ri)]
    params += ["long K", "long parts", "long chunk"]
    kinds = ["buf", "long"] + ["long"] * ro + ["buf", "long"] + ["long"] * (ro + ri)
    kinds += ["long"] * (ro - 1 + ri - 1) + ["long"] * 3

    if arg:
        fold = f"""{{ const {at} v = {load(xdt, 'px', 'at_px')}; const long j = kk;
            if ({better}) {{ acc = v; acc_i = j; }} }}"""
    else:
        fold = f"{{ const {at} v = ({at}){load(xdt, 'px', 'at_px')}; acc = {combine}; }}"
    outer = _walk("o", "n", ro, [("out", "s"), ("px", "s")], "base")
    inner = _walk("kk", "m", ri, [("px", "r")], "at")
    loop_body = f"long at_px = base_px;\n        {inner}\n        {fold}"
    store_v = "acc_i" if arg else "acc"
    if mode == "serial":
        ids = "const long o = get_global_id(0);"
        loop = f"for (long kk = 0; kk < K; kk++) {{\n        {loop_body}\n    }}"
        finish = "    " + store(odt, "out", "base_out", store_v)
    else:
        L = REDUCE_LOCAL
        ids = ("const long g = get_group_id(0); const int lid = get_local_id(0);\n"
               "    const long o = g / parts, part = g % parts;")
        loop = (f"const long k1 = min(K, (part + 1) * chunk);\n"
                f"    for (long kk = part * chunk + lid; kk < k1; kk += {L}) {{\n        {loop_body}\n    }}")
        comb = ("if ({b}) {{ sv[lid] = v; si[lid] = j; }}".format(b=better.replace("acc_i", "si[lid]").replace("acc", "sv[lid]"))
                if arg else f"{{ const {at} acc = sv[lid]; sv[lid] = {combine}; }}")
        load_other = (f"const {at} v = sv[lid + s]; const long j = si[lid + s];" if arg
                      else f"const {at} v = sv[lid + s];")
        tree = f"""    __local {at} sv[{L}];
    {"__local long si[" + str(L) + "];" if arg else ""}
    sv[lid] = acc; {"si[lid] = acc_i;" if arg else ""}
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = {L // 2}; s > 0; s >>= 1) {{
        if (lid < s) {{ {load_other} {comb} }}
        barrier(CLK_LOCAL_MEM_FENCE);
    }}
"""
        if arg:
            tree = tree.replace("sv[lid] = acc;", "sv[lid] = acc;")
        if partial:
            finish = tree + "    if (lid == 0) tmp[g] = sv[0];"
        else:
            fin_v = "si[0]" if arg else "sv[0]"
            finish = tree + "    if (lid == 0) " + store(odt, "out", "base_out", fin_v)
    acc_decl = f"{at} acc = {ident};" + (" long acc_i = LONG_MAX;" if arg else "")
    attr = f"__attribute__((reqd_work_group_size({REDUCE_LOCAL}, 1, 1))) " if mode != "serial" else ""
    src = (header({xdt, odt}) + "#define NOTNAN(v) 0\n"
           + f"/* {op} over an inner index space, {mode} */\n"
           + f"__kernel {attr}void {kname}(" + ", ".join(params) + ")\n{\n"
           + f"    {ids}\n    long base_out = out_o, base_px = px_o;\n"
           + f"    {{\n        {outer}\n    }}\n"
           + f"    {acc_decl}\n    {loop}\n{finish}\n}}\n")
    return src, kinds


# -- indexing -------------------------------------------------------------------------------


def _ptr(name: str, dt: str, rank: int, const: bool = True) -> tuple[list[str], list[str]]:
    """Params (and arg kinds) of one strided operand: pointer, offset, strides."""
    q = "const " if const else ""
    params = [f"__global {q}{CTYPE[dt][0]} *{name}", f"long {name}_o"]
    params += [f"long {name}s{d}" for d in range(rank)]
    return params, ["buf", "long"] + ["long"] * rank


def _kernel_src(title: str, dts: set[str], params: list[str], body: str) -> str:
    return (header(dts) + f"/* {title} */\n__kernel void k(" + ", ".join(params)
            + ")\n{\n    const long i = get_global_id(0);\n    " + body + "\n}\n")


def gather(dt: str, rank: int) -> tuple[str, list[str]]:
    """out[i] = x[same position, but index[i] along dim]: x's stride along dim is
    0 in its strides and ``xsd`` separately."""
    params, kinds = _ptr("out", dt, rank, False)
    for name, d in (("pi", "int64"), ("px", dt)):
        p, k = _ptr(name, d, rank)
        params += p
        kinds += k
    params += ["long xsd"] + [f"long n{d}" for d in range(1, rank)]
    kinds += ["long"] * rank
    body = (index_math(rank, ["out", "pi", "px"])
            + f"\n    {store(dt, 'out', 'p_out', load(dt, 'px', 'p_px + pi[p_pi] * xsd'))}")
    return _kernel_src(f"gather {dt}", {dt}, params, body), kinds


def index(dt: str, rank: int, nidx: int) -> tuple[str, list[str]]:
    """out[s, t] = x[idx0[s], ..., idx<k-1>[s], t]: the index tensors and x are
    walked as operands of out's shape (strides 0 where they don't vary)."""
    params, kinds = _ptr("out", dt, rank, False)
    names = ["out"]
    for j in range(nidx):
        p, k = _ptr(f"pi{j}", "int64", rank)
        params += p
        kinds += k
        names.append(f"pi{j}")
    p, k = _ptr("px", dt, rank)
    params += p + [f"long xsd{j}" for j in range(nidx)] + [f"long n{d}" for d in range(1, rank)]
    kinds += k + ["long"] * (nidx + rank - 1)
    at = " + ".join(["p_px"] + [f"pi{j}[p_pi{j}] * xsd{j}" for j in range(nidx)])
    body = (index_math(rank, names + ["px"])
            + f"\n    {store(dt, 'out', 'p_out', load(dt, 'px', at))}")
    return _kernel_src(f"index {dt} by {nidx} index tensors", {dt}, params, body), kinds


def scatter_add(dt: str, rank: int) -> tuple[str, list[str]]:
    """One work item per column (a position with the dim left out) walks the dim
    in order and adds into out: columns write disjoint elements, so there are
    no races and the sum is deterministic."""
    params, kinds = _ptr("out", dt, rank, False)
    for name, d in (("pi", "int64"), ("ps", dt)):
        p, k = _ptr(name, d, rank)
        params += p
        kinds += k
    params += ["long osd", "long isd", "long ssd", "long len"] + [f"long n{d}" for d in range(1, rank)]
    kinds += ["long"] * (4 + rank - 1)
    ct = CTYPE[dt][1]
    body = (index_math(rank, ["out", "pi", "ps"])
            + f"""
    for (long j = 0; j < len; j++) {{
        const long at = p_out + pi[p_pi + j * isd] * osd;
        const {ct} v = {load(dt, 'out', 'at')} + {load(dt, 'ps', 'p_ps + j * ssd')};
        {store(dt, 'out', 'at', 'v')}
    }}""")
    return _kernel_src(f"scatter_add {dt}", {dt}, params, body), kinds


def masked_select(dt: str, rank: int) -> str:
    """Three kernels over chunks of the row-major order of x (and mask):
    ``count`` the True per chunk, ``scan`` the counts into start positions (one
    work item: there are few chunks), ``pack`` each chunk's elements there."""
    px, _ = _ptr("px", dt, rank)
    pm, _ = _ptr("pm", "bool", rank)
    sizes = [f"long n{d}" for d in range(1, rank)]
    walk = index_math(rank, ["px", "pm"], "e").replace("\n    ", "\n            ")
    walk_mask = index_math(rank, ["pm"], "e").replace("\n    ", "\n            ")
    common = ", ".join(pm + sizes + ["long n", "long chunk"])
    return header({dt}) + f"""/* masked_select {dt} */
__kernel void count(__global long *counts, {common})
{{
    const long g = get_global_id(0);
    const long e1 = min(n, (g + 1) * chunk);
    long c = 0;
    for (long e = g * chunk; e < e1; e++) {{
        {{
            {walk_mask}
            c += pm[p_pm] != 0;
        }}
    }}
    counts[g] = c;
}}

__kernel void scan(__global long *counts, long groups)
{{
    long total = 0;
    for (long g = 0; g < groups; g++) {{ const long c = counts[g]; counts[g] = total; total += c; }}
}}

__kernel void pack(__global {CTYPE[dt][0]} *out, long out_o, __global const long *counts,
                   {", ".join(px)}, {common})
{{
    const long g = get_global_id(0);
    const long e1 = min(n, (g + 1) * chunk);
    long w = out_o + counts[g];
    for (long e = g * chunk; e < e1; e++) {{
        {{
            {walk}
            if (pm[p_pm]) {{ {store(dt, 'out', 'w', load(dt, 'px', 'p_px'))} w++; }}
        }}
    }}
}}
"""


# -- matmul ---------------------------------------------------------------------------------


def matmul_simple(dt: str, rank: int) -> tuple[str, list[str]]:
    """One work item per output element: a dot product of length K along a's
    row and b's column (the fallback for shapes the tiled kernel doesn't take)."""
    params, kinds = _ptr("out", dt, rank, False)
    for name in ("pa", "pb"):
        p, k = _ptr(name, dt, rank)
        params += p
        kinds += k
    params += ["long ask", "long bsk", "long K"] + [f"long n{d}" for d in range(1, rank)]
    kinds += ["long"] * (3 + rank - 1)
    ct = CTYPE[dt][1]
    acc = {"float16": "float", "bool": "int"}.get(dt, ct)
    body = (index_math(rank, ["out", "pa", "pb"])
            + f"""
    {acc} acc = 0;
    for (long kk = 0; kk < K; kk++)
        acc += ({acc}){load(dt, 'pa', 'p_pa + kk * ask')} * ({acc}){load(dt, 'pb', 'p_pb + kk * bsk')};
    {store(dt, 'out', 'p_out', 'acc')}""")
    return _kernel_src(f"matmul {dt}, one dot product per work item", {dt}, params, body), kinds


def _vec_combine(op: str, dt: str) -> str:
    ident, combine = REDUCE[op]
    if dt not in FLOATS and op in REDUCE_INT:
        combine = REDUCE_INT[op]
    return combine


def reduction_vec(op: str, dt: str, ro: int, mode: str, kname: str = "k") -> tuple[str, list[str]]:
    """Reductions that read memory 8 elements at a time (``dt`` is both x's and
    out's dtype, not float16), for CPUs where a work item is a loop iteration:

    ``rows``: the reduced elements are contiguous (a row sum). Each work item of
    a group folds its own contiguous share of the row into 8 vector lanes, then
    the group combines in local memory as in ``reduction``.
    ``cols``: neighbouring outputs are neighbours in x (a column sum). Each work
    item owns 8 adjacent outputs and folds whole rows of 8 into vector lanes.
    """
    ct = CTYPE[dt][1]
    lo, hi = LIMITS[ct]
    ident, _ = REDUCE[op]
    ident = {"LOWEST": lo, "HIGHEST": hi}.get(ident, ident)
    combine = _vec_combine(op, dt)
    L = REDUCE_LOCAL
    params = [f"__global {ct} *out", "long out_o"] + _strided_params("out", "s", ro)
    params += [f"__global const {ct} *px", "long px_o"] + _strided_params("px", "s", ro)
    params += ["long pxr0"] + [f"long n{d}" for d in range(1, ro)] + ["long K", "long parts", "long chunk"]
    kinds = ["buf", "long"] + ["long"] * ro + ["buf", "long"] + ["long"] * (ro + 1)
    kinds += ["long"] * (ro - 1) + ["long"] * 3
    fold8 = f"{{ const {ct}8 v = *(__global const {ct}8u*)(px + at); acc = {combine}; }}"
    lanes = " ".join(f"{{ const {ct} v = acc8.s{i}; acc = {combine}; }}" for i in range(8))
    # (the typedef guarded: C99 forbids repeating it where kernels share a program)
    head = (header({dt}) + f"#ifndef HAVE_{ct}8u\n#define HAVE_{ct}8u\n"
            f"typedef {ct}8 {ct}8u __attribute__((aligned(sizeof({ct}))));\n#endif\n")
    if mode in ("rows", "rows_partial"):
        # rows_partial: group g writes its part's result to out[g] (a scratch
        # buffer of parts per output, reduced by a second launch)
        fin = ("out[g] = sv[0];" if mode == "rows_partial"
               else store(dt, "out", "base_out", "sv[0]"))
        outer = _walk("o", "n", ro, [("out", "s"), ("px", "s")], "base")
        src = head + f"""/* {op} of contiguous rows, 8 lanes per work item, then a tree */
__kernel __attribute__((reqd_work_group_size({L}, 1, 1))) void {kname}({", ".join(params)})
{{
    const long g = get_group_id(0); const int lid = get_local_id(0);
    const long o = g / parts, part = g % parts;
    long base_out = out_o, base_px = px_o;
    {{
        {outer}
    }}
    const long k0 = part * chunk, k1 = min(K, k0 + chunk);
    const long share = (((k1 - k0 + {L - 1}) / {L}) + 7) & ~7L;  /* a multiple of 8 */
    const long s0 = k0 + lid * share, s1 = s0 + share < k1 ? s0 + share : k1;
    {ct}8 acc8 = ({ct}8)({ident});
    long kk = s0;
    {{
        {ct}8 acc = acc8;
        for (; kk + 8 <= s1; kk += 8) {{ const long at = base_px + kk; {fold8} }}
        acc8 = acc;
    }}
    {ct} acc = {ident};
    for (; kk < s1; kk++) {{ const {ct} v = px[base_px + kk]; acc = {combine}; }}
    {lanes}
    __local {ct} sv[{L}];
    sv[lid] = acc;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = {L // 2}; s > 0; s >>= 1) {{
        if (lid < s) {{ const {ct} v = sv[lid + s]; const {ct} acc = sv[lid]; sv[lid] = {combine}; }}
        barrier(CLK_LOCAL_MEM_FENCE);
    }}
    if (lid == 0) {fin}
}}
"""
        return src, kinds
    # cols: the outer space is (rows of outputs, blocks of W = 8*nv along the last
    # outer dim); a work item streams its block of every row into nv vectors
    nv = 8 if mode == "cols64" else 1
    W = 8 * nv
    params.append("long nl")
    kinds.append("long")
    outer = _walk("o", "n", ro - 1, [("out", "s"), ("px", "s")], "base") if ro > 1 else ""
    last = ro - 1
    decl = " ".join(f"{ct}8 acc{u} = ({ct}8)({ident});" for u in range(nv))
    fold = "\n            ".join(
        f"{{ const {ct}8 v = *(__global const {ct}8u*)(px + at + {8 * u}); const {ct}8 acc = acc{u}; "
        f"acc{u} = {combine}; }}" for u in range(nv))
    stores = "\n        ".join(
        store(dt, "out", f"base_out + {8 * u + i} * outs{last}", f"acc{u}.s{i}")
        for u in range(nv) for i in range(8))
    src = head + f"""/* {op} where outputs are adjacent in x: {W} outputs per work item */
__kernel void {kname}({", ".join(params)})
{{
    const long w = get_global_id(0);
    const long blocks = (nl + {W - 1}) / {W};
    const long o = w / blocks, j = (w % blocks) * {W};
    long base_out = out_o + j * outs{last}, base_px = px_o + j * pxs{last};
    {{
        {outer}
    }}
    if (j + {W} <= nl) {{
        {decl}
        for (long kk = 0; kk < K; kk++) {{
            const long at = base_px + kk * pxr0;
            {fold}
        }}
        {stores}
    }} else {{
        for (long c = j; c < nl; c++) {{
            {ct} acc = {ident};
            const long b = base_px + (c - j) * pxs{last};
            for (long kk = 0; kk < K; kk++) {{ const {ct} v = px[b + kk * pxr0]; acc = {combine}; }}
            {store(dt, "out", "base_out + (c - j) * outs" + str(last), "acc")}
        }}
    }}
}}
"""
    return src, kinds
