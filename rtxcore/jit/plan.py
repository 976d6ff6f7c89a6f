"""A Graph made into straight-line Python for one device: what a replay runs.

``run.run_env`` interprets a graph node by node, keeping a ``Tensor`` per value;
that costs about 10 us a node, and a transformer's training step has over a
thousand nodes -- as much as the eager step's own dispatch. A plan does the
interpretation once: every value becomes a local variable holding the backend's
native view, every node one line of generated code (``K12(v40, v33, v35)``),
with kernels, shapes, strides and scalars bound as names. Tensors are made only
where a caller sees them (the outputs) or the core needs them (a composite the
backend lacks, a fused group the backend does not run).

Generated source is made only of names the builder makes (``v12``, ``K3``) and
ints (ids, shapes, strides, offsets: through ``_i``, which refuses anything but
an int); every other value -- a kernel, a dtype, a float, a string -- is bound
as a global. Nothing a graph file says reaches the source as text (the file's
fields are checked first too: ``rtxcore.jit.validate``).

A plan is made once per (graph, device) and kept on the graph (``Graph`` objects
are not edited after they run: passes return new ones). It computes what
``run_env`` computes, by the same kernels in the same order; the interpreter
stays as the reference (``run_with_env``) and the tests compare the two.
"""

from __future__ import annotations

import operator
from typing import Any, Callable

from .. import dtype as D
from ..autograd.grad_mode import no_grad
from ..device import Device
from ..dispatch.ops import COMPOSITES
from ..dispatch.fused import input_kinds, input_sizes, output_sizes
from ..dispatch.types import contiguous_strides
from ..ops.core import (_safe_offset, check_dtype, from_host, kernel, make, out_of_memory, own_kernel,
                        view_of)
from ..tensor import Storage, Tensor
from .decompose import DECOMPOSE
from .fused import fused_runner, run_steps
from .graph import Graph, Ref, buffer_roots, output_ids
from .trace import READS_OUT, untraced
from .validate import check_indices, index_operands

Plan = Callable[[dict[int, Tensor]], Any]


def _i(x: Any) -> int:
    """``x`` as a plain int for generated source: an id, a size, a stride or an
    offset. A string or a float (from a file) raises instead of becoming code."""
    return int(operator.index(x))


def _t(xs: Any) -> tuple[int, ...]:
    """A shape or strides as a tuple of plain ints (its repr is source)."""
    return tuple(_i(x) for x in xs)


def plan_for(graph: Graph, dev: Device) -> Plan:
    """The plan of ``graph`` on ``dev`` (made on first use, then kept)."""
    plans = graph.__dict__.setdefault("_plans", {})
    p = plans.get(dev)
    if p is None:
        p = plans[dev] = _Builder(graph, dev).build()
    return p


class _Builder:
    def __init__(self, graph: Graph, dev: Device) -> None:
        self.g = graph
        self.dev = dev
        # (the backend's own kernels and view, also while another thread traces)
        self.env: dict[str, Any] = {"DEV": dev, "VIEW": untraced(dev.view), "Storage": Storage,
                                    "make": make, "view_of": view_of}
        self.lines: list[str] = []
        self.root: dict[int, int] = {}  # value id -> the id of its buffer's first version
        self.need_storage: set[int] = set()  # roots whose Storage a Tensor needs
        self._names = 0

    # -- naming -------------------------------------------------------------------------

    def bind(self, value: Any, prefix: str = "A") -> str:
        """A name in the plan's globals for ``value``."""
        self._names += 1
        name = f"{prefix}{self._names}"
        self.env[name] = value
        return name

    def v(self, vid: int) -> str:
        """The native view of value ``vid``: a view node's own, a buffer version's
        its buffer's."""
        return f"v{_i(vid)}" if "of" in self.g.values[vid] else f"v{_i(self.root[vid])}"

    def layout(self, vid: int) -> tuple[tuple[int, ...], tuple[int, ...], int, D.DType]:
        val = self.g.values[vid]
        shape = _t(val["shape"])
        if "of" in val:
            return shape, _t(val["strides"]), _i(_safe_offset(val["offset"], shape)), \
                D.BY_NAME[val["dtype"]]
        return shape, contiguous_strides(shape), 0, D.BY_NAME[val["dtype"]]

    def tensor(self, vid: int) -> str:
        """An expression making a Tensor of value ``vid`` (over its buffer's storage)."""
        r = _i(self.root[vid])
        self.need_storage.add(r)
        shape, strides, off, dt = self.layout(vid)
        return f"make(s{r}, {shape!r}, {strides!r}, {off}, {self.bind(dt, 'DT')}, DEV, " \
               f"{self.v(vid)})"

    def arg(self, a: Any, tensors: bool = False) -> str:
        """A kernel argument: a value as its native view (as a Tensor when
        ``tensors``: for the core's decompositions), sequences item by item,
        other constants bound as names."""
        if isinstance(a, Ref):
            return self.tensor(a.id) if tensors else self.v(a.id)
        if isinstance(a, tuple):
            return "(" + "".join(self.arg(x, tensors) + ", " for x in a) + ")"
        if isinstance(a, list):
            return "[" + ", ".join(self.arg(x, tensors) for x in a) + "]"
        if a is None or isinstance(a, bool) or type(a) is int:
            return repr(a)
        return self.bind(a)

    # -- the nodes ------------------------------------------------------------------------

    def build(self) -> Plan:
        g, dev = self.g, self.dev
        self.root = buffer_roots(g)
        written = {self.root[r] for n in g.nodes for r, _ in n.writes}
        out_roots = {self.root[v] for v in output_ids(g.outputs)}
        homes: dict[int, int] = {}
        body: list[tuple[Any, list[str]]] = []
        for n in g.nodes:
            op, i = n.op, _i(n.id)
            if op == "input":
                code = [f"t{i} = IN[{i}]", f"s{i} = t{i}._storage", f"b{i} = s{i}.buffer",
                        f"v{i} = view_of(t{i})"]
            elif op == "alloc":
                shape, strides, _, dt = self.layout(i)
                home = n.attrs.get("reuse")
                if home is None:
                    code = [f"b{i}, v{i} = {self.bind(_allocator(dev, shape, dt), 'ALLOC')}()"]
                else:
                    home = homes[i] = _i(home)
                    code = [f"b{i} = b{home}", f"v{i} = VIEW(b{i}, {shape!r}, {strides!r}, 0, "
                                               f"{self.bind(dt, 'DT')})"]
            elif op == "const":
                arr = g.constants[n.attrs["name"]]
                if i in written or i in out_roots:  # a fresh copy each run
                    self.env["from_host"] = from_host
                    code = [f"t{i} = from_host({self.bind(arr, 'ARR')}, DEV)"]
                else:  # on the device once, for every run
                    code = [f"t{i} = {self.bind(from_host(arr, dev), 'CONST')}"]
                code += [f"s{i} = t{i}._storage", f"b{i} = s{i}.buffer", f"v{i} = view_of(t{i})"]
            elif op == "view":
                shape, strides, off, dt = self.layout(i)
                code = [f"v{i} = VIEW(b{_i(self.root[i])}, {shape!r}, {strides!r}, {off}, "
                        f"{self.bind(dt, 'DT')})"]
            elif op == "fused":
                code = self._fused(n)
            else:
                code = self._kernel(n)
            body.append((n, code))
        ret = f"return {self._outputs(g.outputs)}"
        # a Storage for each allocated buffer a Tensor is made of (a reused buffer
        # shares its home's)
        for i in sorted(homes, reverse=True):
            if i in self.need_storage:
                self.need_storage.add(homes[i])
        lines = ["def replay(IN):"]
        for n, code in body:
            lines += ["    " + c for c in code]
            if n.op == "alloc" and n.id in self.need_storage:
                home = homes.get(n.id)
                lines.append(f"    s{_i(n.id)} = " + (f"s{home}" if home is not None
                                                    else f"Storage(b{_i(n.id)}, DEV)"))
        lines.append("    " + ret)
        src = "\n".join(lines)
        self.env["__source__"] = src
        exec(compile(src, f"<rtxcore.jit plan: {len(g.nodes)} nodes on {dev}>", "exec"), self.env)
        return self.env["replay"]

    def _kernel(self, n: Any) -> list[str]:
        dev, op = self.dev, n.op
        out_dt = D.BY_NAME[self.g.values[n.writes[0][0]]["dtype"]] if n.writes else None
        args = n.args[len(n.writes) if op in READS_OUT else 0:]
        pre = self._index_checks(n)
        rng = n.attrs.get("rng")
        if rng is not None:  # fresh numbers each run, drawn as the eager op draws
            from ..random import default_generator

            self.env["GEN"] = default_generator
            pre.append(f"_seed, _off = GEN.take({_i(rng)})")
        k = dev.kernels.get(op) if op not in COMPOSITES else own_kernel(dev, op, out_dt)
        if k is None and op in DECOMPOSE:  # a composite this backend lacks: the core's
            self.env["no_grad"] = no_grad
            call_args = [self.tensor(r) for r, _ in n.writes] + [self.arg(a, tensors=True) for a in args]
            if rng is not None:
                call_args[-2:] = ["_seed", "_off"]
            return pre + ["with no_grad():",
                          f"    {self.bind(DECOMPOSE[op], 'DEC')}({', '.join(call_args)})"]
        k = untraced(k or kernel(dev, op))
        call_args = [self.v(r) for r, _ in n.writes] + [self.arg(a) for a in args]
        if rng is not None:
            call_args[-2:] = ["_seed", "_off"]
        return pre + [f"{self.bind(k, 'K')}({', '.join(call_args)})"]

    def _index_checks(self, n: Any) -> list[str]:
        """For a graph read from a file (``rtxcore.jit.load``): a line per index
        operand checking its values before the kernel reads them -- data no check
        of the file sees, and a device kernel trusts."""
        if not self.g.__dict__.get("_from_file"):
            return []
        self.env["CHECK_INDICES"] = check_indices
        return [f"CHECK_INDICES({self.tensor(vid)}, {_i(bound)}, {self.bind(what, 'W')})"
                for vid, bound, what in index_operands(self.g, n)]

    def _fused(self, n: Any) -> list[str]:
        prog = n.attrs["program"]
        fn = fused_runner(prog, self.dev)
        count = _i(prog["n"])
        kinds, sizes = input_kinds(prog), input_sizes(prog)

        def where(vid: int, i: int | None = None, size: int | None = None) -> str:
            # outputs and "in" inputs are whole buffers (offset 0) of ``count``
            # elements (``size``: a reduction's output); a broadcast input the
            # elements its view starts at
            val = self.g.values[vid]
            shape, off = ((_i(size or count),), 0) if i is None or kinds[i] == "in" else \
                ((_i(sizes[i]),), _i(_safe_offset(val.get("offset", 0), (sizes[i],))))
            return f"b{_i(self.root[vid])}, {shape!r}, (1,), {off}, " \
                   f"{self.bind(D.BY_NAME[val['dtype']], 'DT')}"

        if fn is not None:
            outs = ", ".join(f"VIEW({where(r, size=m)})"
                             for (r, _), m in zip(n.writes, output_sizes(prog)))
            ins = ", ".join(f"VIEW({where(a.id, i)})" for i, a in enumerate(n.args))
            return [f"{self.bind(fn, 'F')}([{outs}], [{ins}])"]
        self.env["run_steps"] = run_steps

        def flat_t(vid: int, i: int | None = None, size: int | None = None) -> str:
            r = _i(self.root[vid])
            self.need_storage.add(r)
            layout = where(vid, i, size).split(", ", 1)[1]  # all but the buffer
            return f"make(s{r}, {layout}, DEV)"

        outs = ", ".join(flat_t(r, size=m) for (r, _), m in zip(n.writes, output_sizes(prog)))
        ins = ", ".join(flat_t(a.id, i) for i, a in enumerate(n.args))
        return [f"run_steps({self.bind(prog, 'P')}, [{outs}], [{ins}], DEV)"]

    def _outputs(self, o: Any) -> str:
        if "view" in o:
            return self.tensor(o["view"])
        if "seq" in o:
            items = "".join(self._outputs(x) + ", " for x in o["seq"])
            return f"({items})" if o.get("type") == "tuple" else f"[{items}]"
        if "map" in o:
            return "{" + ", ".join(f"{self.bind(k)}: {self._outputs(v)}" for k, v in o["map"]) + "}"
        return self.bind(o["lit"])


def _allocator(dev: Device, shape: tuple[int, ...], dtype: D.DType) -> Callable[[], Any]:
    """() -> (buffer, native view) of a new contiguous ``shape`` buffer on ``dev``."""
    check_dtype(dtype, dev)
    empty = untraced(dev.kernels["empty"])
    index = dev.index
    view = untraced(dev.view)
    strides = contiguous_strides(shape)

    def alloc() -> tuple[Any, Any]:
        try:
            buf, h = empty(shape, dtype, index)
        except MemoryError as exc:
            raise out_of_memory(shape, dtype, dev, exc) from None
        return buf, (h if h is not None else view(buf, shape, strides, 0, dtype))

    return alloc
