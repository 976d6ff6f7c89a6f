"""The recurrent cells' composite kernels on OpenCL: ``lstm_cell``, ``gru_cell``
and their backwards (``rtxcore.dispatch.ops`` states them), each one launch.

One work item per element (b, j) of the (B, H) state reads that element's
gates from each operand (any strides: a (B, kH) operand's gate k is column
k*H + j, ``act``'s is [k, b, j]), computes the step in registers and writes
every output: the whole cell is one pass over memory where the core's
decomposition makes about twenty. The sigmoid is ``1 / (1 + exp(-x))`` as the
core's, tanh the backend's own (``codegen``); float16 loads and stores half
and computes in float. Compiled once per (op, dtype, variant); shapes, strides
and offsets are arguments.
"""

from __future__ import annotations

from typing import Any, Callable

from rtxcore.dispatch import View

from . import codegen as C
from . import launch as L

# operand layouts: (B, kH) gates, (k, B, H) gate-major, (B, H) state
_STRIDES = {"bg": 2, "gbh": 3, "bh": 2}


class _Src:
    """OpenCL C for one cell kernel: its parameters and loads/stores by layout;
    ``width`` 8: float32 in float8 vectors (every operand of unit stride along
    H, H a multiple of 8), where PoCL runs exp and tanh eight lanes a call."""

    def __init__(self, dt: str, operands: list[tuple[str, str, bool]], width: int) -> None:
        self.dt, self.width = dt, width
        self.ct = C.CTYPE[dt][1] if width == 1 else f"float{width}"
        self.params: list[str] = []
        self.kinds: list[str] = []
        self.layout = {}
        for name, lay, const in operands:  # (pointers p<name>: the body's names stay free)
            p, k = C.ptr_params("p" + name, dt, _STRIDES[lay], const)
            self.params += p
            self.kinds += k
            self.layout[name] = lay
        self.params.append("long H")
        self.kinds.append("long")

    def at(self, name: str, k: int = 0) -> str:
        lay, name = self.layout[name], "p" + name
        if lay == "bg":
            return f"{name}_o + b * {name}s0 + ({k} * H + j) * {name}s1"
        if lay == "gbh":
            return f"{name}_o + {k} * {name}s0 + b * {name}s1 + j * {name}s2"
        return f"{name}_o + b * {name}s0 + j * {name}s1"

    def ld(self, name: str, k: int = 0) -> str:
        if self.width > 1:
            return f"vload{self.width}(0, p{name} + {self.at(name, k)})"
        return f"(({self.ct}){C.load(self.dt, 'p' + name, self.at(name, k))})"

    def st(self, name: str, value: str, k: int = 0) -> str:
        if self.width > 1:
            return f"vstore{self.width}({value}, 0, p{name} + {self.at(name, k)});"
        return C.store(self.dt, "p" + name, self.at(name, k), value)

    def source(self, title: str, body: list[str]) -> tuple[str, list[str]]:
        tanh = "tanh(v)" if self.dt == "float64" else "rtx_tanh(v)"
        pre = (f"#undef CT\n#define CT {self.ct}\n"
               f"static inline CT sig(CT v) {{ return (CT)1 / ((CT)1 + exp(-v)); }}\n"
               f"static inline CT th(CT v) {{ return {tanh}; }}\n")
        w = self.width
        index = "const long b = i / H, j = i % H;" if w == 1 else \
            f"const long b = i / (H / {w}), j = (i % (H / {w})) * {w};"
        src = C.kernel_source(title + (f", {w} lanes" if w > 1 else ""), {self.dt}, self.params,
                              "\n    ".join([index, *body]))
        head, _, kernel = src.partition("/* ")
        return head + pre + "/* " + kernel, self.kinds  # (the device adds rtx_tanh)


def _lstm_cell(dt: str, w: int) -> tuple[str, list[str]]:
    s = _Src(dt, [("h", "bh", False), ("c", "bh", False), ("act", "gbh", False),
                  ("gi", "bg", True), ("gh", "bg", True), ("cp", "bh", True)], w)
    body = [f"const CT a{k} = {s.ld('gi', k)} + {s.ld('gh', k)};" for k in range(4)]
    body += ["const CT ig = sig(a0), fg = sig(a1), gg = th(a2), og = sig(a3);",
             f"const CT cn = fg * {s.ld('cp')} + ig * gg;",
             s.st("act", "ig", 0), s.st("act", "fg", 1), s.st("act", "gg", 2),
             s.st("act", "og", 3), s.st("c", "cn"), s.st("h", "og * th(cn)")]
    return s.source(f"lstm_cell {dt}", body)


def _lstm_cell_backward(dt: str, w: int, has_dc: bool) -> tuple[str, list[str]]:
    ops = [("dg", "bg", False), ("dcp", "bh", False), ("dh", "bh", True)]
    ops += [("dc", "bh", True)] if has_dc else []
    ops += [("act", "gbh", True), ("c", "bh", True), ("cp", "bh", True)]
    s = _Src(dt, ops, w)
    body = [f"const CT ig = {s.ld('act', 0)}, fg = {s.ld('act', 1)}, gg = {s.ld('act', 2)}, "
            f"og = {s.ld('act', 3)};",
            f"const CT dh = {s.ld('dh')}, tc = th({s.ld('c')});",
            f"const CT dct = ((CT)1 - tc * tc) * og * dh"
            + (f" + {s.ld('dc')};" if has_dc else ";"),
            s.st("dg", f"((CT)1 - ig) * ig * gg * dct", 0),
            s.st("dg", f"((CT)1 - fg) * fg * {s.ld('cp')} * dct", 1),
            s.st("dg", "((CT)1 - gg * gg) * ig * dct", 2),
            s.st("dg", "((CT)1 - og) * og * tc * dh", 3),
            s.st("dcp", "dct * fg")]
    return s.source(f"lstm_cell_backward {dt}" + (" with dc" if has_dc else ""), body)


def _gru_cell(dt: str, w: int) -> tuple[str, list[str]]:
    s = _Src(dt, [("h", "bh", False), ("act", "gbh", False), ("gi", "bg", True),
                  ("gh", "bg", True), ("hp", "bh", True)], w)
    body = [f"const CT r = sig({s.ld('gi', 0)} + {s.ld('gh', 0)});",
            f"const CT z = sig({s.ld('gi', 1)} + {s.ld('gh', 1)});",
            f"const CT n = th(r * {s.ld('gh', 2)} + {s.ld('gi', 2)});",
            s.st("act", "r", 0), s.st("act", "z", 1), s.st("act", "n", 2),
            s.st("h", f"({s.ld('hp')} - n) * z + n")]
    return s.source(f"gru_cell {dt}", body)


def _gru_cell_backward(dt: str, w: int) -> tuple[str, list[str]]:
    s = _Src(dt, [("dgi", "bg", False), ("dgh", "bg", False), ("dhp", "bh", False),
                  ("dh", "bh", True), ("act", "gbh", True), ("gh", "bg", True),
                  ("hp", "bh", True)], w)
    body = [f"const CT r = {s.ld('act', 0)}, z = {s.ld('act', 1)}, n = {s.ld('act', 2)};",
            f"const CT dh = {s.ld('dh')}, t = (CT)1 - z;",
            "const CT dn = dh * (t * ((CT)1 - n * n));",
            f"const CT dz = dh * (({s.ld('hp')} - n) * z * t);",
            f"const CT dr = dn * ({s.ld('gh', 2)} * r * ((CT)1 - r));",
            s.st("dgi", "dr", 0), s.st("dgi", "dz", 1), s.st("dgi", "dn", 2),
            s.st("dgh", "dr", 0), s.st("dgh", "dz", 1), s.st("dgh", "dn * r", 2),
            s.st("dhp", "dh * z")]
    return s.source(f"gru_cell_backward {dt}", body)


WIDTH = 8


def _launch(op: str, make: Callable[..., tuple[str, list[str]]], views: list[View], hid: int,
            *variant: Any) -> None:
    """One launch of ``op``'s kernel over the (B, H) state: ``WIDTH`` elements a
    work item where every operand allows (float32, unit stride along H, H a
    multiple of WIDTH), else one."""
    n = views[0].shape[0] * hid
    if n == 0:
        return
    dt = views[-1].dtype.name
    w = WIDTH if dt == "float32" and hid % WIDTH == 0 and all(
        v.strides[-1] == 1 for v in views) else 1
    dev = views[0].buffer.dev
    k = L.kernel(dev, (op, dt, w, *variant), lambda: make(dt, w, *variant))
    args: list[Any] = []
    for v in views:
        args += [v.buffer.mem, v.offset, *v.strides]
    L.enqueue(dev, k, n // w, args + [hid])


def lstm_cell(h: View, c: View, act: View, gi: View, gh: View, c_prev: View) -> None:
    _launch("lstm_cell", _lstm_cell, [h, c, act, gi, gh, c_prev], h.shape[1])


def lstm_cell_backward(dgates: View, dc_prev: View, dh: View, dc: View | None, act: View,
                       c: View, c_prev: View) -> None:
    views = [dgates, dc_prev, dh] + ([dc] if dc is not None else []) + [act, c, c_prev]
    _launch("lstm_cell_backward", _lstm_cell_backward, views, c.shape[1], dc is not None)


def gru_cell(h: View, act: View, gi: View, gh: View, h_prev: View) -> None:
    _launch("gru_cell", _gru_cell, [h, act, gi, gh, h_prev], h.shape[1])


def gru_cell_backward(dgi: View, dgh: View, dh_prev: View, dh: View, act: View, gh: View,
                      h_prev: View) -> None:
    _launch("gru_cell_backward", _gru_cell_backward, [dgi, dgh, dh_prev, dh, act, gh, h_prev],
            dh.shape[1])


KERNELS = {"lstm_cell": lstm_cell, "lstm_cell_backward": lstm_cell_backward,
           "gru_cell": gru_cell, "gru_cell_backward": gru_cell_backward}
