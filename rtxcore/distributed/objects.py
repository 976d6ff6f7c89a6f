"""The object collectives: Python objects, pickled, through the tensor collectives.

As PyTorch's: a Python object travels pickled, as a uint8 tensor, through the
tensor collectives (the lengths first, then the bytes padded to the longest).
Unpickling runs code of the sender's choosing: use these only between ranks of
your own job, as with PyTorch's.
"""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np

from .collectives import all_gather_into_tensor, broadcast
from .groups import ProcessGroup, _member, _root


def _to_bytes(obj: Any) -> Any:
    from .. import tensor, uint8

    return tensor(np.frombuffer(pickle.dumps(obj), dtype=np.uint8).copy(), dtype=uint8)


def _from_bytes(t: Any, n: int) -> Any:
    return pickle.loads(t.numpy()[:n].tobytes())


def _gather_bytes(obj: Any, pg: ProcessGroup, group: Any) -> list[Any]:
    """Every rank's pickled ``obj``, unpickled, in group rank order."""
    from .. import empty, int64, tensor, uint8

    data = _to_bytes(obj)
    sizes = empty(pg.size(), dtype=int64)
    all_gather_into_tensor(sizes, tensor([data.numel()], dtype=int64), group=group)
    longest = int(sizes.numpy().max())
    padded = empty(longest, dtype=uint8)
    padded[:data.numel()] = data
    out = empty(pg.size() * longest, dtype=uint8)
    all_gather_into_tensor(out, padded, group=group)
    return [_from_bytes(out[r * longest:(r + 1) * longest], int(n))
            for r, n in enumerate(sizes.numpy())]


def _object_list(op: str, objects: Any, name: str, n: int, where: str = "") -> None:
    """``objects`` is a list of world size ``n`` entries (checked ``where``: on the root)."""
    if not isinstance(objects, list) or len(objects) != n:
        raise ValueError(f"{op}: {where}{name} must be a list of world size {n} entries, "
                         f"got {_what(objects)}")


def all_gather_object(object_list: list[Any], obj: Any, group: Any = None) -> None:
    """``object_list[r]`` gets rank r's ``obj`` (pickled: trusted ranks only)."""
    pg = _member(group)
    if pg is None:
        return
    _object_list("all_gather_object", object_list, "object_list", pg.size())
    object_list[:] = _gather_bytes(obj, pg, group)


def gather_object(obj: Any, object_gather_list: list[Any] | None = None, dst: int = 0,
                  group: Any = None) -> None:
    """On ``dst``, ``object_gather_list[r]`` gets rank r's ``obj``; other ranks
    pass None. (Every rank's bytes travel to every rank: small objects only.)"""
    pg = _member(group)
    if pg is None:
        return
    root = _root(pg, dst, None, "gather_object", "dst")
    if pg.rank() == root:
        _object_list("gather_object", object_gather_list, "object_gather_list", pg.size(),
                     "on dst, ")
    got = _gather_bytes(obj, pg, group)
    if pg.rank() == root:
        object_gather_list[:] = got


def broadcast_object_list(object_list: list[Any], src: int = 0, group: Any = None,
                          device: Any = None) -> None:
    """Every rank's ``object_list`` gets ``src``'s entries, in place (the lists
    have the same length on every rank)."""
    from .. import empty, int64, tensor, uint8

    pg = _member(group)
    if pg is None:
        return
    if not isinstance(object_list, list):
        raise TypeError(f"broadcast_object_list: object_list must be a list, got {_what(object_list)}")
    root = _root(pg, src, None, "broadcast_object_list", "src")
    me = pg.rank() == root
    data = _to_bytes(list(object_list)) if me else None
    size = tensor([data.numel() if me else 0], dtype=int64)
    broadcast(size, src=src, group=group)
    buf = data if me else empty(int(size.numpy()[0]), dtype=uint8)
    broadcast(buf, src=src, group=group)
    if not me:
        got = _from_bytes(buf, buf.numel())
        if len(got) != len(object_list):
            raise ValueError(f"broadcast_object_list: src has {len(got)} objects, this rank's "
                             f"list {len(object_list)}")
        object_list[:] = got


def scatter_object_list(scatter_object_output_list: list[Any], scatter_object_input_list:
                        list[Any] | None = None, src: int = 0, group: Any = None) -> None:
    """``scatter_object_output_list[0]`` gets entry r of ``src``'s input list."""
    pg = _member(group)
    if pg is None:
        return
    if not isinstance(scatter_object_output_list, list) or not scatter_object_output_list:
        raise ValueError("scatter_object_list: scatter_object_output_list must be a non-empty list")
    root = _root(pg, src, None, "scatter_object_list", "src")
    if pg.rank() == root:
        _object_list("scatter_object_list", scatter_object_input_list,
                     "scatter_object_input_list", pg.size(), "on src, ")
    box = [scatter_object_input_list if pg.rank() == root else None]
    broadcast_object_list(box, src=src, group=group)
    scatter_object_output_list[0] = box[0][pg.rank()]


def _what(x: Any) -> str:
    return f"a list of {len(x)}" if isinstance(x, list) else type(x).__name__
