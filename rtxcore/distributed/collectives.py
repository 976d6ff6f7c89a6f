"""The tensor collectives (all_reduce, broadcast, gathers, scatters, all-to-all) and send/recv.

Each works in place on tensors of any device, as PyTorch's: its arguments are
checked (``checks``), its tensors turned into the arrays the backend takes
(``buffers``) and the backend's call run, blocking under the watchdog or as a
``Work`` (``work``). On a rank outside the group a collective does nothing and
returns None. Collectives are not recorded by autograd.
"""

from __future__ import annotations

from typing import Any, Sequence

from .buffers import _Buf, _reduced, _scatter_rows, _stack_rows, _xp
from .checks import ReduceOp, _begin, _reduce_op, _root_list, _tensor, _tensor_list, _world_times
from .groups import ProcessGroup, _group, _group_rank, _member, _root
from .work import Work, _describe, _finished, _launch, _run


def all_reduce(tensor: Any, op: Any = ReduceOp.SUM, group: Any = None, async_op: bool = False) -> Any:
    """Every rank's ``tensor`` becomes the reduction (``op``) of all ranks' tensors."""
    return _reduction("all_reduce", tensor, op, group, async_op)


def reduce(tensor: Any, dst: int = 0, op: Any = ReduceOp.SUM, group: Any = None,
           async_op: bool = False, group_dst: int | None = None) -> Any:
    """Rank ``dst``'s ``tensor`` becomes the reduction of every rank's; the others keep theirs."""
    return _reduction("reduce", tensor, op, group, async_op, dst, group_dst)


def _reduction(name: str, tensor: Any, op: Any, group: Any, async_op: bool, dst: int = 0,
               group_dst: int | None = None) -> Any:
    """all_reduce (every rank gets the result) and reduce (rank ``dst`` does)."""
    pg = _begin(name, group, tensor=tensor)
    if pg is None:
        return None
    root = None if name == "all_reduce" else _root(pg, dst, group_dst, name, "dst")
    kind = _reduce_op(op, tensor, name)
    if pg.size() == 1:  # nothing to combine: no staging either
        return _finished(async_op)
    b = _Buf(tensor, pg)
    backend_op, finish = _reduced(kind, b, pg.size())
    if root is None:
        return _launch(pg, _describe(name, tensor, f", {kind}"),
                       lambda a: pg.comm.all_reduce(b.a, backend_op, a), finish, async_op)
    return _launch(pg, _describe(name, tensor, f", {kind}, dst={root}"),
                   lambda a: pg.comm.reduce(b.a, backend_op, root, a),
                   finish if pg.rank() == root else None, async_op)


def broadcast(tensor: Any, src: int = 0, group: Any = None, async_op: bool = False,
              group_src: int | None = None) -> Any:
    """Every rank's ``tensor`` becomes rank ``src``'s (a global rank)."""
    pg = _begin("broadcast", group, tensor=tensor)
    if pg is None:
        return None
    root = _root(pg, src, group_src, "broadcast", "src")
    if pg.size() == 1:
        return _finished(async_op)
    b = _Buf(tensor, pg, read=pg.rank() == root)
    return _launch(pg, _describe("broadcast", tensor, f", src={root}"),
                   lambda a: pg.comm.broadcast(b.a, root, a), b.finish, async_op)


def all_gather_into_tensor(output_tensor: Any, input_tensor: Any, group: Any = None,
                           async_op: bool = False) -> Any:
    """``output_tensor`` (world * d0, ...) or (world, d0, ...) gets every rank's input, in rank order."""
    out, inp = output_tensor, input_tensor
    pg = _begin("all_gather_into_tensor", group, output_tensor=out, input_tensor=inp)
    if pg is None:
        return None
    n = pg.size()
    _world_times("all_gather_into_tensor", out, "output", inp, "input", n,
                 f" (input {list(inp.shape)}, output {list(out.shape)})")
    src = _Buf(inp, pg)
    dst = _Buf(out, pg, read=False)
    send = src.a.reshape(-1)
    recv = dst.a.reshape(n, -1)
    return _launch(pg, _describe("all_gather", inp),
                   lambda a: pg.comm.all_gather(send, recv, a), dst.finish, async_op)


def all_gather(tensor_list: list[Any], tensor: Any, group: Any = None, async_op: bool = False) -> Any:
    """``tensor_list[r]`` gets rank r's ``tensor``."""
    pg = _begin("all_gather", group, tensor=tensor)
    if pg is None:
        return None
    n = pg.size()
    _tensor_list("all_gather", tensor_list, tensor, "tensor_list", n)
    src = _Buf(tensor, pg)
    recv = _xp(src.a).empty((n, *src.a.shape), src.a.dtype)

    def finish() -> None:
        _scatter_rows(recv, tensor_list, pg)

    return _launch(pg, _describe("all_gather", tensor),
                   lambda a: pg.comm.all_gather(src.a, recv, a), finish, async_op)


def reduce_scatter_tensor(output: Any, input: Any, op: Any = ReduceOp.SUM, group: Any = None,
                          async_op: bool = False) -> Any:
    """``output`` = the reduction over ranks of this rank's slice of ``input``
    (world x output's elements)."""
    pg = _begin("reduce_scatter_tensor", group, output=output, input=input)
    if pg is None:
        return None
    kind = _reduce_op(op, output, "reduce_scatter_tensor")
    n = pg.size()
    _world_times("reduce_scatter_tensor", input, "input", output, "output", n)
    send = _Buf(input, pg).a.reshape(n, -1)
    return _reduce_scatter(pg, send, output, kind, async_op)


def reduce_scatter(output: Any, input_list: list[Any], op: Any = ReduceOp.SUM, group: Any = None,
                   async_op: bool = False) -> Any:
    """``output`` = the reduction over ranks of their ``input_list[rank]``."""
    pg = _begin("reduce_scatter", group, output=output)
    if pg is None:
        return None
    n = pg.size()
    _tensor_list("reduce_scatter", input_list, output, "input_list", n)
    kind = _reduce_op(op, output, "reduce_scatter")
    send = _stack_rows(input_list, pg).reshape(n, -1)
    return _reduce_scatter(pg, send, output, kind, async_op)


def _reduce_scatter(pg: ProcessGroup, send: Any, output: Any, kind: str, async_op: bool) -> Any:
    """Both reduce-scatters, once ``send`` is (world, output's elements)."""
    dst = _Buf(output, pg, read=False)
    recv = dst.a.reshape(-1)
    backend_op, finish = _reduced(kind, dst, pg.size())
    return _launch(pg, _describe("reduce_scatter", output, f", {kind}"),
                   lambda a: pg.comm.reduce_scatter(send, recv, backend_op, a), finish, async_op)


def gather(tensor: Any, gather_list: list[Any] | None = None, dst: int = 0, group: Any = None,
           async_op: bool = False, group_dst: int | None = None) -> Any:
    """Rank ``dst``'s ``gather_list[r]`` gets rank r's ``tensor``."""
    return _rooted("gather", tensor, gather_list, group, dst, group_dst, async_op)


def scatter(tensor: Any, scatter_list: list[Any] | None = None, src: int = 0, group: Any = None,
            async_op: bool = False, group_src: int | None = None) -> Any:
    """Rank r's ``tensor`` gets rank ``src``'s ``scatter_list[r]``."""
    return _rooted("scatter", tensor, scatter_list, group, src, group_src, async_op)


def _rooted(name: str, tensor: Any, lst: list[Any] | None, group: Any, root: int,
            group_root: int | None, async_op: bool) -> Any:
    """gather and scatter: their list lives on the root (gather's destination,
    scatter's source), is checked there and must be absent elsewhere."""
    gathering = name == "gather"
    arg, role = ("dst", "destination") if gathering else ("src", "source")
    pg = _begin(name, group, tensor=tensor)
    if pg is None:
        return None
    r = _root(pg, root, group_root, name, arg)
    n = pg.size()
    me = pg.rank() == r
    _root_list(name, lst, tensor, f"{name}_list", n, me, role)
    what = _describe(name, tensor, f", {arg}={r}")
    if gathering:
        src = _Buf(tensor, pg)
        recv = _xp(src.a).empty((n, *src.a.shape), src.a.dtype) if me else None
        return _launch(pg, what, lambda a: pg.comm.gather(src.a, recv, r, a),
                       (lambda: _scatter_rows(recv, lst, pg)) if me else None, async_op)
    send = _stack_rows(lst, pg) if me else None
    dst = _Buf(tensor, pg, read=False)
    return _launch(pg, what, lambda a: pg.comm.scatter(send, dst.a, r, a), dst.finish, async_op)


def all_to_all_single(output: Any, input: Any, output_split_sizes: Sequence[int] | None = None,
                      input_split_sizes: Sequence[int] | None = None, group: Any = None,
                      async_op: bool = False) -> Any:
    """Split ``input`` along dim 0 (evenly, or by ``input_split_sizes``), send
    part r to rank r, and concatenate what arrives, in rank order, into ``output``."""
    out, inp = output, input
    pg = _begin("all_to_all_single", group, output=out, input=inp)
    if pg is None:
        return None
    n = pg.size()
    row_in = inp.numel() // max(1, inp.shape[0]) if inp.dim() else 1
    row_out = out.numel() // max(1, out.shape[0]) if out.dim() else 1

    def counts(sizes: Any, t: Any, row: int, name: str) -> list[int]:
        if sizes is None or len(sizes) == 0:
            if t.dim() == 0 or t.shape[0] % n:
                raise ValueError(f"all_to_all_single: {name}'s first dimension "
                                 f"({t.shape[0] if t.dim() else 'none'}) does not split evenly "
                                 f"over {n} ranks; pass {name}_split_sizes")
            return [t.shape[0] // n * row] * n
        sizes = [int(s) for s in sizes]
        if len(sizes) != n or sum(sizes) != t.shape[0]:
            raise ValueError(f"all_to_all_single: {name}_split_sizes {sizes} must have {n} "
                             f"entries summing to {name}'s first dimension {t.shape[0]}")
        return [s * row for s in sizes]

    sc = counts(input_split_sizes, inp, row_in, "input")
    rc = counts(output_split_sizes, out, row_out, "output")
    src = _Buf(inp, pg)
    dst = _Buf(out, pg, read=False)
    return _launch(pg, _describe("all_to_all_single", inp),
                   lambda a: pg.comm.all_to_all(src.a.reshape(-1), dst.a.reshape(-1), sc, rc, a),
                   dst.finish, async_op)


def barrier(group: Any = None, async_op: bool = False, device_ids: Any = None) -> Any:
    """Wait until every rank of the group reaches it."""
    pg = _member(group)
    if pg is None:
        return None
    return _launch(pg, _describe("barrier"), lambda a: pg.comm.barrier(a), None, async_op)


# -- point to point ---------------------------------------------------------------------

def _p2p(op: str, tensor: Any, peer: int | None, group: Any, tag: int, async_op: bool) -> Any:
    t = _tensor(tensor, f"{op}: tensor")
    pg = _group(group)
    if peer is None:
        peer_g = None
    else:
        peer_g = _group_rank(pg, peer, op, "dst" if op in ("send", "isend") else "src")
        if peer_g == pg.rank():
            raise ValueError(f"{op}: a rank can't {op.lstrip('i')} to or from itself "
                             f"(rank {pg.ranks[peer_g]})")
    what = _describe(op, t, f", peer={peer}, tag={tag}")
    if op in ("send", "isend"):
        b = _Buf(t, pg)
        if async_op:
            return Work(pg.comm.send(b.a, peer_g, tag, True), what, timeout=pg.timeout,
                        ranks=pg.ranks)
        _run(lambda: pg.comm.send(b.a, peer_g, tag, False), what, timeout=pg.timeout, ranks=pg.ranks)
        return None
    b = _Buf(t, pg, read=False)
    if async_op:
        return Work(pg.comm.recv(b.a, peer_g, tag, True), what, b.finish, timeout=pg.timeout,
                    ranks=pg.ranks)
    src = _run(lambda: pg.comm.recv(b.a, peer_g, tag, False), what, then=b.finish,
               timeout=pg.timeout, ranks=pg.ranks)
    return pg.ranks[src]


def send(tensor: Any, dst: int, group: Any = None, tag: int = 0) -> None:
    _p2p("send", tensor, dst, group, tag, False)


def recv(tensor: Any, src: int | None = None, group: Any = None, tag: int = 0) -> int:
    """Receive into ``tensor``; returns the sender's rank (any rank when ``src`` is None)."""
    return _p2p("recv", tensor, src, group, tag, False)


def isend(tensor: Any, dst: int, group: Any = None, tag: int = 0) -> Work:
    return _p2p("isend", tensor, dst, group, tag, True)


def irecv(tensor: Any, src: int | None = None, group: Any = None, tag: int = 0) -> Work:
    return _p2p("irecv", tensor, src, group, tag, True)
