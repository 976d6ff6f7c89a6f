"""Backward: walk the graph from the outputs by dependency counting.

One pass finds the nodes the gradients reach and counts, for each, the edges
into it; then a node runs once every edge into it has delivered its gradient
(summed in its buffer). No recursion: a 100,000-op chain is a loop of 100,000
steps. Without ``retain_graph`` each node drops its saved tensors as it runs.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..ops import creation as C
from ..ops import elementwise as E
from ..ops import reduction as R
from ..ops import views as V
from ..ops.core import _CSTRIDES, contiguous, empty, kernel, scalar_for
from ..tensor import Tensor
from .grad_mode import _state
from .tape import RAW, AccumulateGrad, Meta, Node, _type_name, alias, edge


def _as_tuple(x: Any) -> tuple[Any, ...]:
    if x is None:
        return ()
    if isinstance(x, Tensor):
        return (x,)
    return tuple(x)


def backward(tensors: Any, grad_tensors: Any = None, retain_graph: Any = None,
             create_graph: bool = False, inputs: Any = None) -> None:
    """Add the gradients of ``tensors`` to the ``.grad`` of the graph's leaves (only
    of ``inputs``, when given)."""
    outs = _as_tuple(tensors)
    grads = _as_tuple(grad_tensors) if grad_tensors is not None else (None,) * len(outs)
    if inputs is not None:
        inputs = _as_tuple(inputs)
        if not inputs:
            raise RuntimeError("backward(): 'inputs' argument to backward() cannot be empty.")
    roots = _roots(outs, grads, "backward")
    if retain_graph is None:
        retain_graph = create_graph
    targets = None
    if inputs is not None:
        targets = {}
        for t in inputs:
            e = _input_edge(t, "backward")
            targets[e] = t
    _run(roots, retain_graph, create_graph, targets, accumulate=True)


def grad(outputs: Any, inputs: Any, grad_outputs: Any = None, retain_graph: Any = None,
         create_graph: bool = False, allow_unused: Any = None,
         materialize_grads: bool = False) -> tuple[Tensor | None, ...]:
    """The gradients of ``outputs`` with respect to ``inputs``, returned (no
    ``.grad`` is touched)."""
    outs = _as_tuple(outputs)
    single = isinstance(inputs, Tensor)
    ins = _as_tuple(inputs)
    if not ins:
        raise RuntimeError("grad requires non-empty inputs.")
    grads = _as_tuple(grad_outputs) if grad_outputs is not None else (None,) * len(outs)
    roots = _roots(outs, grads, "grad")
    if retain_graph is None:
        retain_graph = create_graph
    if allow_unused is None:
        allow_unused = materialize_grads
    targets: dict[Any, Any] = {}
    keys = []
    for t in ins:
        e = _input_edge(t, "grad")
        targets[e] = t
        keys.append(e)
    found = _run(roots, retain_graph, create_graph, targets, accumulate=False)
    result = []
    for i, (t, k) in enumerate(zip(ins, keys)):
        g = found.get(k)
        if g is None:
            if materialize_grads:
                g = C.zeros_like(t)
            elif not allow_unused:
                raise RuntimeError(
                    f"One of the differentiated Tensors (input {i}, {_type_name(t)}) appears to "
                    "not have been used in the graph. Set allow_unused=True if this is the "
                    "desired behavior."
                )
        result.append(g)
    return tuple(result) if not single else (result[0],)


def _input_edge(t: Any, what: str) -> Any:
    if not isinstance(t, Tensor):
        raise TypeError(f"{what}(): inputs must be Tensors, got {type(t).__name__}")
    e = edge(t)
    if e is None:
        raise RuntimeError(f"{what}(): one of the inputs ({_type_name(t)}) does not require grad")
    return e


def _roots(outs: Sequence[Any], grads: Sequence[Any], what: str) -> list[tuple[Any, Tensor]]:
    if len(grads) != len(outs):
        raise RuntimeError(f"{what}(): got {len(grads)} gradients for {len(outs)} outputs")
    roots = []
    for i, (t, g) in enumerate(zip(outs, grads)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{what}(): expected Tensors as outputs, got {type(t).__name__}")
        e = edge(t)
        if e is None:
            raise RuntimeError(
                f"element {i} of tensors does not require grad and does not have a grad_fn "
                f"({_type_name(t)}); call .requires_grad_() on a leaf it depends on, and "
                "don't compute it under no_grad()"
            )
        if g is None:
            if t.numel() != 1:
                raise RuntimeError(
                    f"grad can be implicitly created only for scalar outputs; the output "
                    f"{_type_name(t)} has {t.numel()} elements: pass gradient= (a tensor of "
                    "its shape), or reduce it first (e.g. .sum())"
                )
            g = _ones_like(t)
        else:
            if not isinstance(g, Tensor):
                g = C.as_tensor_on(g, t._device, t._dtype)
            if g._shape != t._shape:
                raise RuntimeError(
                    f"Mismatch in shape: grad_output[{i}] has a shape of {tuple(g._shape)} and "
                    f"output[{i}] has a shape of {tuple(t._shape)}."
                )
            if g._device is not t._device:
                raise RuntimeError(
                    f"{what}(): grad_output[{i}] is on {g._device} but output[{i}] is on {t._device}"
                )
        roots.append((e, g))
    return roots


def _ones_like(t: Tensor) -> Tensor:
    """The implicit gradient of a scalar output."""
    g = empty(t._shape, t._dtype, t._device)
    kernel(t._device, "full")(g._h, scalar_for(1, t._dtype))
    return g


def _run(roots: list[tuple[Any, Tensor]], retain_graph: bool, create_graph: bool,
         targets: dict[Any, Any] | None, accumulate: bool) -> dict[Any, Tensor]:
    # 1. the reachable graph, and how many edges lead into each node
    deps: dict[Node, int] = {}
    stack: list[Node] = []
    for (node, _), _g in roots:
        if node not in deps:
            deps[node] = 0
            stack.append(node)
    while stack:
        node = stack.pop()
        for e in node.next_functions:
            if e is None:
                continue
            nxt = e[0]
            n = deps.get(nxt)
            if n is None:
                deps[nxt] = 1
                stack.append(nxt)
            else:
                deps[nxt] = n + 1
    # 2. with explicit inputs, run only the nodes that lead to one of them
    needed: set[Node] | None = None
    target_nodes: dict[Node, list[int]] = {}
    if targets is not None:
        for (node, nr) in targets:
            target_nodes.setdefault(node, []).append(nr)
        needed = _needed(deps, [node for (node, _), _g in roots], target_nodes)
    # 3. run
    buffers: dict[Node, list[Any]] = {}
    # the sums in buffers that the engine made itself (by id: nothing else sees them
    # until their node runs, so later gradients go into them in place), and the
    # nodes whose buffers may hold a Placed gradient
    owned: dict[int, Tensor] = {}
    placed: set[Node] = set()
    for (node, nr), g in roots:
        _add_to_buffer(buffers, node, nr, g, owned, placed, create_graph)
    user_storages = {id(g._storage) for _, g in roots}
    handed: set[int] = set()
    found: dict[Any, Tensor] = {}
    ready = [node for node, n in deps.items() if n == 0]
    prev = _state.enabled
    _state.enabled = bool(create_graph)
    try:
        while ready:
            node = ready.pop()
            grads = buffers.pop(node, None)
            if grads is not None:
                if owned or placed:  # (a buffer may hold a Placed gradient or an owned sum)
                    _settle(grads, owned)
                    placed.discard(node)
                if type(node) is AccumulateGrad:
                    m = node.variable._ag
                    if m is not None and m.hooks:
                        if placed:  # (a hook may change its gradient in place)
                            _settle_pending(buffers, placed, owned, create_graph)
                        grads = _leaf_hooks(node, grads)
                if node._pre_hooks:
                    if placed:
                        _settle_pending(buffers, placed, owned, create_graph)
                    grads = _run_pre_hooks(node, grads)
                if node._retain:
                    _retain(node, grads, create_graph, user_storages, handed)
                if target_nodes and node in target_nodes:
                    for nr in target_nodes[node]:
                        g = grads[nr] if nr < len(grads) else None
                        if g is not None:
                            found[(node, nr)] = g
                            if accumulate and type(node) is not AccumulateGrad:
                                _accumulate_into(targets[(node, nr)], g, create_graph, user_storages, handed)
            if type(node) is AccumulateGrad:
                if grads is not None and accumulate and (targets is None or node in target_nodes):
                    if placed and node.variable._ag is not None and node.variable._ag.post_hooks:
                        _settle_pending(buffers, placed, owned, create_graph)
                    _accumulate_leaf(node, grads[0], create_graph, user_storages, handed)
                continue
            if grads is not None and (needed is None or node in needed):
                in_grads = _apply(node, grads, not create_graph)
            else:
                in_grads = _NONES
            if not retain_graph:
                node.release()
            for e, g in zip(node.next_functions, in_grads) if in_grads is not _NONES else \
                    ((e, None) for e in node.next_functions):
                if e is None:
                    continue
                nxt = e[0]
                if g is not None:
                    nr = e[1]
                    buf = buffers.get(nxt)
                    if buf is None and nr == 0:
                        buffers[nxt] = [g]
                        if type(g) is Placed:
                            placed.add(nxt)
                    else:
                        _add_to_buffer(buffers, nxt, nr, g, owned, placed, create_graph)
                n = deps[nxt] - 1
                deps[nxt] = n
                if n == 0:
                    ready.append(nxt)
    finally:
        _state.enabled = prev
    return found


_NONES = ()


def _needed(deps: dict[Node, int], roots: list[Node],
            target_nodes: dict[Node, list[int]]) -> set[Node]:
    """Nodes from which some target can be reached (targets included): a
    topological order by the same counting, walked backwards."""
    left = dict(deps)
    topo: list[Node] = []
    ready = [n for n in dict.fromkeys(roots) if left[n] == 0]
    while ready:
        node = ready.pop()
        topo.append(node)
        for e in node.next_functions:
            if e is not None:
                nxt = e[0]
                left[nxt] -= 1
                if left[nxt] == 0:
                    ready.append(nxt)
    needed = set(target_nodes)
    for node in reversed(topo):
        if node not in needed:
            for e in node.next_functions:
                if e is not None and e[0] in needed:
                    needed.add(node)
                    break
    return needed


class Placed:
    """The input gradient of a view op (``narrow``, ``select``, ...) before it is
    written out: ``g`` at ``RAW[op](input, *args)`` of an input of ``shape``,
    zeros elsewhere. A rule returns one (``Node.placed``) only outside
    ``create_graph``; the engine adds it into a sum it owns in place, the view's
    elements alone, and writes the zeros only where it is the first gradient to
    arrive: ``q, k, v = qkv.split(n, -1)`` costs one zero fill and three slice
    writes, not three whole-size fills and two whole-size adds."""

    __slots__ = ("g", "op", "args", "kwargs", "shape")

    def __init__(self, g: Tensor, op: str, args: tuple[Any, ...],
                 kwargs: dict[str, Any] | None, shape: tuple[int, ...]) -> None:
        self.g, self.op, self.args, self.kwargs, self.shape = g, op, args, kwargs, shape

    def dense(self) -> Tensor:
        g = self.g
        out = C.zeros(self.shape, dtype=g._dtype, device=g._device)
        E.copy_(self._view(out), g)
        return out

    def add_into(self, acc: Tensor) -> None:
        """acc[view] += g, in place (acc: a sum the engine owns, of ``shape``)."""
        E.add_.raw(self._view(acc), self.g)

    def _view(self, t: Tensor) -> Tensor:
        v = RAW[self.op](t, *self.args, **(self.kwargs or {}))
        if v._storage is not t._storage:  # (each op that returns a Placed is a view)
            raise RuntimeError(f"autograd: {self.op} did not return a view of its input")
        return v


def _add_to_buffer(buffers: dict[Node, list[Any]], node: Node, nr: int, g: Any,
                   owned: dict[int, Tensor], placed: set[Node], create_graph: bool) -> None:
    """Sum ``g`` (a Tensor or a Placed) into node's buffer slot ``nr``. A sum the
    engine made (in ``owned``: nothing else sees it until the node runs) takes
    later gradients in place; outside ``create_graph`` only."""
    buf = buffers.get(node)
    if buf is None:
        buf = buffers[node] = [None] * (nr + 1 if nr else 1)
    elif len(buf) <= nr:
        buf.extend([None] * (nr + 1 - len(buf)))
    old = buf[nr]
    if old is None:
        buf[nr] = g
        if type(g) is Placed:
            placed.add(node)
        return
    if type(old) is Placed:
        base, mine = old.dense(), True
    else:
        base, mine = old, not create_graph and owned.get(id(old)) is old
    if type(g) is Placed:
        acc = base if mine else C.clone(base)  # (a tensor others may see: copied first)
        g.add_into(acc)
    elif mine and base._shape == g._shape and base._dtype is g._dtype \
            and base._device is g._device:
        acc = base
        E.add_.raw(acc, g)
    else:
        acc = E.add(base, g)
    if acc is not old:
        owned.pop(id(old), None)
    if not create_graph:
        owned[id(acc)] = acc
    buf[nr] = acc


def _settle(grads: list[Any], owned: dict[int, Tensor]) -> None:
    """A node's gradients as its rule takes them: Placed ones written out, and
    the engine's sums no longer its own (the rule may hand them on)."""
    for i, g in enumerate(grads):
        if type(g) is Placed:
            grads[i] = g.dense()
        elif g is not None:
            owned.pop(id(g), None)


def _settle_pending(buffers: dict[Node, list[Any]], placed: set[Node],
                    owned: dict[int, Tensor], create_graph: bool) -> None:
    """Write out every Placed gradient still waiting in a buffer: before a user's
    hook runs, which may change a gradient in place that one of them reads."""
    for node in placed:
        for i, g in enumerate(buffers.get(node) or ()):
            if type(g) is Placed:
                d = g.dense()
                if not create_graph:
                    owned[id(d)] = d
                buffers[node][i] = d
    placed.clear()


def _run_pre_hooks(node: Node, grads: list[Any]) -> list[Any]:
    for nr, fn in list(node._pre_hooks):
        if nr == -1:
            res = fn(tuple(grads))
            if res is not None:
                grads = list(res)
        elif nr < len(grads) and grads[nr] is not None:
            res = fn(grads[nr])
            if res is not None:
                grads[nr] = res
    return grads


def _apply(node: Node, grads: list[Any], lazy_views: bool = False) -> tuple[Any, ...]:
    """Run ``node``'s rule and fit each gradient to its input (undo broadcasting,
    match the input's dtype). ``lazy_views`` (the engine's run, outside
    create_graph): a view op's gradient may come back as a Placed."""
    placed = node.placed
    if lazy_views and placed is not None:
        p = placed(node, grads[0])
        if p is not None and p.g._dtype is node._in[0][1]:
            return (p,) + (None,) * (len(node.next_functions) - 1)
    res = node.rule(node, *grads) if node.multi else node.rule(node, grads[0])
    if type(res) is not tuple:
        res = (res,)
    out = []
    for r, info, e in zip(res, node._in, node.next_functions):
        if r is None or e is None:
            out.append(None)
            continue
        shape, dt = info[0], info[1]
        if r._shape != shape:
            r = sum_to(r, shape)
        if r._dtype is not dt:
            r = C.to(r, dt)
        out.append(r)
    n = len(node.next_functions)
    if len(out) < n:  # a rule may leave trailing inputs out
        out.extend([None] * (n - len(out)))
    return tuple(out)


def sum_to(g: Tensor, shape: tuple[int, ...]) -> Tensor:
    """Undo broadcasting: sum ``g`` down to ``shape``."""
    gs = g._shape
    if gs == shape:
        return g
    lead = len(gs) - len(shape)
    if lead < 0:  # the input had extra leading 1s (x[i] = v with v of shape (1, n))
        return V.reshape(g, shape)
    axes = tuple(range(lead)) + tuple(
        i + lead for i, n in enumerate(shape) if n == 1 and gs[i + lead] != 1)
    r = R.sum(g, axes, keepdim=True) if axes else g
    return V.reshape(r, shape) if r._shape != shape else r


def _owned(g: Tensor, user: set[int], handed: set[int]) -> Tensor:
    """``g`` itself when nothing else can see its memory, else a copy: a stored
    ``.grad`` must never share memory with another grad or the caller's tensors."""
    sid = id(g._storage)
    # (a rule's result may be a view of a fresh temporary: that is fine to keep;
    # memory seen elsewhere is the caller's gradients or one already handed out)
    if sid in user or sid in handed or (g._strides is not _CSTRIDES.get(g._shape)
                                        and not g.is_contiguous()):
        g = C.clone(g) if _state.enabled else contiguous_copy(g)
        sid = id(g._storage)
    handed.add(sid)
    return g


def contiguous_copy(g: Tensor) -> Tensor:
    c = contiguous(g)
    return c if c is not g else C.clone(g)


def _store(m: Meta, g: Tensor, create_graph: bool, user: set[int], handed: set[int]) -> None:
    old = m.grad
    if old is None:
        g = _owned(g, user, handed)
        m.grad = g if create_graph or g._ag is None else alias(g)  # (detached)
    elif create_graph or old._ag is not None:
        m.grad = E.add(old, g)
    else:
        E.add_.raw(old, g)


def _leaf_hooks(node: AccumulateGrad, grads: list[Any]) -> list[Any]:
    """A leaf's tensor hooks see its total gradient, before it is stored or
    returned by autograd.grad."""
    m = node.variable._ag
    if m is None or not m.hooks or grads[0] is None:
        return grads
    g = grads[0]
    for _, fn in list(m.hooks):
        res = fn(g)
        if res is not None:
            g = res
    return [g]


def _accumulate_leaf(node: AccumulateGrad, g: Tensor, create_graph: bool,
                     user: set[int], handed: set[int]) -> None:
    var = node.variable
    m = var._ag
    if m is None or not m.requires_grad:
        return
    if g._dtype is not var._dtype:
        g = C.to(g, var._dtype)
    if m.post_hooks and m.grad is None and not create_graph:
        # a post-accumulate hook may change .grad in place (an optimizer step in the
        # backward, DDP's averaging), while the same tensor -- a rule hands one to
        # several inputs -- still waits for another node: .grad gets its own copy
        g = contiguous_copy(g)
    _store(m, g, create_graph, user, handed)
    if m.post_hooks:
        for fn in list(m.post_hooks):
            fn(var)


def _accumulate_into(t: Tensor, g: Tensor, create_graph: bool, user: set[int], handed: set[int]) -> None:
    """``backward(inputs=[non_leaf])`` adds to that tensor's ``.grad``."""
    m = t._ag
    if m is not None:
        _store(m, g, create_graph, user, handed)


def _retain(node: Node, grads: list[Any], create_graph: bool, user: set[int], handed: set[int]) -> None:
    for nr, ref in list(node._retain.items()):
        m = ref()
        if m is None or nr >= len(grads) or grads[nr] is None:
            continue
        _store(m, grads[nr], create_graph, user, handed)

