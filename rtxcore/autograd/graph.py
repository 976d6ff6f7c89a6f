"""Draw a graph: ``to_dot(t)`` gives Graphviz DOT text for everything ``t`` was
computed from; ``render(t, path)`` writes it as SVG or PNG (needs the ``graphviz``
Python package and Graphviz's ``dot`` program)."""

from __future__ import annotations

import os

from ..tensor import Tensor
from .tape import AccumulateGrad, Node


def _describe(t: Tensor) -> str:
    return f"{tuple(t._shape)} {t._dtype.name} {t._device}"


def _quote(lines: str) -> str:
    """A DOT string literal; each line of ``lines`` becomes a label line."""
    parts = [ln.replace("\\", "\\\\").replace('"', '\\"') for ln in lines.split("\n")]
    return '"' + "\\n".join(parts) + '"'


def to_dot(tensor: Tensor, name: str = "output") -> str:
    """The graph behind ``tensor`` in DOT: one box per op (its name, the shapes,
    dtypes and devices of what it saved), one per leaf (AccumulateGrad: the leaf's
    shape, dtype, device), the output, and arrows along the gradient's path."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f"to_dot expects a Tensor, got {type(tensor).__name__}")
    lines = ["digraph autograd {", '  node [shape=box, fontname="monospace", fontsize=10];',
             "  rankdir=BT;"]
    out_id = "out"
    lines.append(f"  {out_id} [label={_quote(name + chr(10) + _describe(tensor))}, "
                 "style=filled, fillcolor=lightblue];")
    m = tensor._ag
    if m is None or not m.requires_grad:
        lines.append("}")
        return "\n".join(lines) + "\n"
    ids: dict[Node, str] = {}
    root = m.grad_fn if m.grad_fn is not None else None
    if root is None:
        from .tape import edge

        e = edge(tensor)
        root = e[0] if e else None
    stack = [root] if root is not None else []
    if root is not None:
        ids[root] = "n0"
        lines.append(f"  n0 -> {out_id};")
    while stack:
        node = stack.pop()
        nid = ids[node]
        label = [node.name()]
        if isinstance(node, AccumulateGrad):
            label.append(_describe(node.variable))
            lines.append(f"  {nid} [label={_quote(chr(10).join(label))}, style=filled, fillcolor=lightgrey];")
        else:
            saved = node._saved or ()
            for t in saved:
                if isinstance(t, Tensor):
                    label.append("saved: " + _describe(t))
            if node._out is not None:
                label.append("saved result: " + _describe(node._out))
            if node._saved is None:
                label.append("(saved tensors freed)")
            lines.append(f"  {nid} [label={_quote(chr(10).join(label))}];")
        for e in node.next_functions:
            if e is None:
                continue
            nxt = e[0]
            if nxt not in ids:
                ids[nxt] = f"n{len(ids)}"
                stack.append(nxt)
            lines.append(f"  {ids[nxt]} -> {nid};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def render(tensor: Tensor, path: str, format: str | None = None) -> str:  # noqa: A002
    """Write the graph of ``tensor`` to ``path`` (``.svg`` or ``.png``, or give
    ``format``). Returns the path written."""
    fmt = format or os.path.splitext(path)[1].lstrip(".").lower() or "svg"
    if fmt not in ("svg", "png"):
        raise ValueError(f"render: format must be 'svg' or 'png', got {fmt!r}")
    try:
        import graphviz
    except ImportError:
        raise RuntimeError(
            "render() needs the graphviz Python package (pip install graphviz) and Graphviz's "
            "`dot` program; to_dot() gives the DOT text without either"
        ) from None
    src = graphviz.Source(to_dot(tensor))
    try:
        data = src.pipe(format=fmt)
    except graphviz.ExecutableNotFound:
        raise RuntimeError(
            "render() needs Graphviz's `dot` program on PATH (e.g. apt install graphviz); "
            "to_dot() gives the DOT text without it"
        ) from None
    with open(path, "wb") as f:
        f.write(data)
    return path
