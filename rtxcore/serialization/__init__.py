"""``rtxcore.save`` / ``rtxcore.load``: tensors and nested containers of them in
the safetensors format. No pickle, ever: loading a file can't run code.

    rc.save(model.state_dict(), "model.safetensors")
    model.load_state_dict(rc.load("model.safetensors", map_location="cpu"))

What can be saved
    A Tensor (or ``nn.Parameter``), or any nesting of ``dict`` / ``OrderedDict`` /
    ``list`` / ``tuple`` whose leaves are tensors, ``int``, ``float`` (nan and
    infinities included), ``bool``, ``str``, ``None``, dtypes (``rc.float32``) and
    devices. Dict keys may be ``str``, ``int``, ``float``, ``bool``, ``None`` or
    tuples of these. NumPy scalars are saved as the Python number they hold.
    Anything else (a set, a lambda, an object of your own class, a dict
    subclass other than OrderedDict) is refused with a ``TypeError`` naming where
    it sits, e.g. ``obj['state'][2]: cannot save object of type set``.

File format
    A plain safetensors file (https://github.com/huggingface/safetensors): an
    8-byte little-endian header length, a JSON header, then the raw tensor data.
    The ``safetensors`` package writes and parses it; rtxcore adds the metadata
    below and checks what the package doesn't (the checksums, the metadata,
    names given twice, files in other formats).

    * Every tensor is stored under its own name, made from its path in the saved
      object joined with ``.``: a ``state_dict`` {"fc.weight": w} is stored as the
      tensor ``fc.weight``, so other safetensors readers (``safetensors.torch.
      load_file``) see the same names; ``{"state": {0: {"exp_avg": t}}}`` stores
      ``state.0.exp_avg``; a lone tensor is ``tensor``. A name already taken gets
      a ``#2``, ``#3``, ... suffix. Tensors are written as their values, C-ordered:
      a non-contiguous view saves the elements it shows, and two tensors sharing
      memory are saved (and loaded) as two independent tensors.
    * The header's ``__metadata__`` holds five strings::

          {"format": "rtxcore", "version": "1", "structure": "<JSON>",
           "tensor_crc32": "<hex>,<hex>,...", "header_crc32": "<hex>"}

      ``structure`` describes the saved object as JSON, node by node:

      ========================================  ===================================
      ``null``, ``true``, ``3``, ``2.5``, ``"s"``  None, bools, ints, finite floats, str
      ``{"float": "nan" | "inf" | "-inf"}``      a non-finite float
      ``{"tensor": NAME, "device": "cpu"}``      a tensor (plus ``"requires_grad":
                                                 true`` and ``"parameter": true``
                                                 when they apply)
      ``{"ndarray": NAME}``                      a NumPy array (bool, int or float;
                                                 loads back as an array, on the host)
      ``{"list": [NODE, ...]}``                  a list
      ``{"tuple": [NODE, ...]}``                 a tuple
      ``{"dict": [[KEY, NODE], ...]}``           a dict, keys as nodes, in order
      ``{"odict": [[KEY, NODE], ...]}``          an OrderedDict
      ``{"dtype": "float32"}``                   an rtxcore dtype
      ``{"device": "cpu"}``                      an rtxcore device
      ========================================  ===================================

    * ``tensor_crc32`` lists the CRC-32 of each tensor's bytes (8 hex digits), in
      the order their data lies in the file; ``header_crc32`` is the CRC-32 of the
      header without that entry, as JSON with sorted keys, no spaces and ASCII
      escapes (``json.dumps(h, sort_keys=True, separators=(",", ":"))``), so it
      doesn't depend on how the header is spaced. Files from older rtxcore
      versions have neither, and load unchecked.
    * The layout is the safetensors package's: tensors ordered by itemsize
      (widest first), then by name, so each one's data is aligned; the header
      padded with spaces to a multiple of 8 bytes. rtxcore writes the header's
      ``__metadata__`` in the order above (the package writes it in hash order).

    Saving the same object twice writes the same bytes. Saving to a path writes a
    temporary file in the same folder, syncs it to disk and renames it over the
    target, so a save that fails (disk full, KeyboardInterrupt) or is killed
    leaves the previous file intact (a killed one may leave a ``.NAME.*.tmp``
    file behind); the file keeps the mode of the one it replaces.

Loading
    Tensors come back on the device they were saved from (the ``device`` of each
    tensor node), as in PyTorch. ``map_location`` changes that: a device (string
    or ``rtxcore.device``) puts every tensor there; a dict ``{"saved": "new"}``
    remaps the devices it names; a callable ``f(tensor_on_cpu, saved_device_str)``
    returns the tensor to use, a device to move it to, or ``None`` for the default.
    A tensor saved on a device that isn't available here raises a RuntimeError
    naming the device and suggesting ``map_location="cpu"``.

    A safetensors file written by another program (no rtxcore metadata) loads as
    a dict name -> tensor on cpu (or per ``map_location``). An empty, truncated,
    corrupt or foreign file raises a ``ValueError`` naming the file and what is
    wrong with it; a dtype rtxcore lacks (bfloat16, uint32, ...) is reported the
    same way. In particular:

    * the checksums are verified: a changed header, or a tensor whose bytes
      changed, is refused naming it (``verify=False`` loads such a file anyway);
    * tensors' byte ranges must cover the data exactly, without overlaps (which
      would alias two tensors) or holes, as the safetensors specification says:
      the package refuses such files, and rtxcore names the tensors involved;
    * a tensor name given twice in the header is refused (the package would
      keep the last);
    * rtxcore metadata whose ``format`` isn't exactly ``"rtxcore"`` is refused
      rather than loaded as a foreign file;
    * PyTorch checkpoints (zip or legacy pickle), NumPy ``.npy``/``.npz`` files and
      pickles are recognized and named, with how to convert them, before the
      package parses anything.

    Each tensor gets memory of its own: from a path, ``safetensors.safe_open``
    reads it with pread(2) (a file cut short while it is read is a ValueError,
    where a memory map would kill the process with SIGBUS); from a file object,
    which is read whole, ``safetensors.deserialize`` copies it out of the bytes.
"""

from __future__ import annotations

import contextlib
import json
import os
from typing import Any

from .header import FORMAT, VERSION, _Corrupt
from .reading import _open, _parse
from .structure import _Loader
from .writing import _encode, _serialize, _write_atomic

__all__ = ["FORMAT", "VERSION", "load", "save"]


def save(obj: Any, f: Any) -> None:
    """Save ``obj`` (a tensor or nested containers of tensors and plain values) to
    ``f``, a path (str or ``os.PathLike``) or a binary file object, as safetensors.

    A path is written atomically: to a temporary file in the same folder, synced to
    disk, then renamed over ``f``, so a save that fails or is killed leaves the old
    file as it was. See the module docstring for what can be saved and the format."""
    if not isinstance(f, (str, os.PathLike)) and not hasattr(f, "write"):
        raise TypeError(f"save() needs a path or a binary file object to write to, got {type(f).__name__}")
    arrays, meta = _encode(obj)
    head, body = _serialize(arrays, meta)
    if isinstance(f, (str, os.PathLike)):
        _write_atomic(f, head, body)
    else:
        f.write(head)
        f.write(body)


def load(f: Any, map_location: Any = None, weights_only: Any = None, *, verify: bool = True) -> Any:
    """Load what ``save`` wrote to ``f`` (a path or a binary file object).

    ``map_location``: None (each tensor on the device it was saved from), a device
    for all tensors, a dict ``{saved_device: device}``, or a callable
    ``f(cpu_tensor, saved_device_str) -> tensor | device | None``. ``weights_only``
    is accepted for PyTorch compatibility and changes nothing: loading never runs
    code. A safetensors file without rtxcore metadata loads as a dict of tensors.
    ``verify=False`` skips the checksums, to load a damaged file as it is.
    """
    del weights_only
    with contextlib.ExitStack() as stack:
        stream, size, name, source = _open(f, stack)
        meta, arrays = _parse(stream, size, name, verify, source, stack)
    if meta is None:
        # a plain safetensors file from another program: its tensors by name
        loader = _Loader(name, arrays, map_location)
        return {k: loader.tensor(k, "cpu") for k in arrays}
    try:
        structure = json.loads(meta["structure"])
    except (KeyError, TypeError, ValueError, RecursionError) as exc:
        raise ValueError(f"can't load {name}: its rtxcore metadata is corrupt "
                         f"({type(exc).__name__}: {exc})") from None
    loader = _Loader(name, arrays, map_location)
    try:
        return loader.node(structure)
    except _Corrupt as exc:
        raise ValueError(f"can't load {name}: the file is corrupt: {exc}") from None
    except RecursionError:
        raise ValueError(f"can't load {name}: the file is corrupt: its structure is nested "
                         "too deeply") from None
