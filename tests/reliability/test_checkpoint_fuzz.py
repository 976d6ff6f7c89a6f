"""A fuzzer of rc.load: valid rtxcore checkpoints with flipped bytes, truncations,
insertions, deletions and rewritten headers. Every outcome must be a load equal to
what was saved, or a ValueError; never another exception, a slow load, a large
allocation or silently different values. The outcome table is printed (``-s``)
and recorded as the test's ``checkpoint_fuzz_outcomes`` property (shown in the
terminal summary by this folder's conftest)."""

from __future__ import annotations

import io
import json
import re
import time
import tracemalloc
from collections import Counter
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rtxcore as rc

from .checkpoints import header_crc32, header_of, same, sample_objects, to_bytes

OBJECTS = sample_objects()
FILES = [to_bytes(obj) for obj in OBJECTS]

# what a ValueError's message says, first match wins
REASONS = [
    ("refused by safetensors, not explained", r"safetensors package refuses"),
    ("tensor checksum", r"data of tensor .* changed after it was saved"),
    ("header checksum", r"header changed after it was saved"),
    ("'format' key", r"'format'"),
    ("header not JSON", r"not valid JSON|not a JSON object|names .* twice"),
    ("header length", r"first 8 bytes give a header"),
    ("too short", r"is empty|only \d+ bytes long"),
    ("foreign format", r"zip archive|pickle|NumPy|PyTorch"),
    ("byte ranges", r"claim the same bytes|belong to no tensor|outside the data section|ends inside|"
                    r"elements\) but|data_offsets|no dtype|checksums"),
    ("dtype", r"dtype"),
    ("rtxcore metadata", r"metadata|version"),
    ("structure", r"structure|refers to a tensor|bad |unknown dtype"),
]

# header rewrites; FIXABLE ones may also get a recomputed header checksum (a
# writer that keeps the checksum right but the layout wrong; only where it was
# right before), the others change what the file means and are only made as
# corruption
REWRITES = ["offsets", "same range", "drop", "duplicate key", "format", "version", "drop meta key",
            "shape", "dtype", "rename", "structure"]
FIXABLE = {"offsets", "same range", "drop", "duplicate key", "format", "version", "drop meta key"}

pos = st.integers(0, 2**32)
BYTE_EDIT = st.one_of(
    st.tuples(st.just("flip"), pos, st.integers(1, 255)),
    st.tuples(st.just("flip header"), pos, st.integers(1, 255)),
    st.tuples(st.just("flip data"), pos, st.sampled_from([1 << b for b in range(8)])),
    st.tuples(st.just("truncate"), pos),
    st.tuples(st.just("insert"), pos, st.binary(min_size=1, max_size=8)),
    st.tuples(st.just("delete"), pos, st.integers(1, 8)),
    st.tuples(st.just("length"), st.one_of(st.integers(-16, 16), st.integers(0, 2**64 - 1))),
)
HEADER_EDIT = st.tuples(st.just("rewrite"), st.sampled_from(REWRITES), pos, st.booleans())
# half the edits rewrite the header (one_of would flatten the two and weigh each edit alike)
MUTATION = st.booleans().flatmap(lambda header: HEADER_EDIT if header else BYTE_EDIT)


def _tensors(header: dict[str, Any]) -> list[str]:
    return [k for k in header if k != "__metadata__"]


def _rewrite(data: bytes, kind: str, r: int, fix: bool) -> bytes:
    """``data`` with its header changed as ``kind`` says (``r`` picks what to change)."""
    n = int.from_bytes(data[:8], "little")
    try:
        header = json.loads(data[8:8 + n])
        names = _tensors(header)
        meta = header["__metadata__"]
    except (ValueError, KeyError, TypeError):
        return data  # an earlier mutation broke it already
    body = data[8 + n:]
    if not names:
        return data
    # a writer that recomputes the checksum over an earlier corruption would make
    # a file no checksum can catch: fix only checksums that were right
    fix = fix and meta.get("header_crc32") == header_crc32(header)
    t, u = names[r % len(names)], names[(r // 7) % len(names)]
    extra = ""
    try:
        if kind == "offsets":
            delta = (r % 17 - 8) or 1
            header[t]["data_offsets"][(r // 17) % 2] += delta
        elif kind == "same range":
            header[t]["data_offsets"] = list(header[u]["data_offsets"])
        elif kind == "drop":
            del header[t]
        elif kind == "duplicate key":
            extra = f",{json.dumps(u)}:{json.dumps(header[t])}"
        elif kind == "format":
            meta["format"] = ["pt", "", "rtxcorf", "RTXCORE", "np", "rtxcore "][r % 6]
        elif kind == "version":
            meta["version"] = ["2", "0", "1.0", ""][r % 4]
        elif kind == "drop meta key":
            keys = [k for k in meta if k != "header_crc32"]
            del meta[keys[r % len(keys)]]
        elif kind == "shape":
            shape = header[t]["shape"]
            header[t]["shape"] = [[*shape, 1], shape[::-1], [], [max(1, len(body))]][r % 4]
        elif kind == "dtype":
            header[t]["dtype"] = ["I32", "F16", "U8", "BF16", "U32", "F8_E4M3", "XYZ"][r % 7]
        elif kind == "rename":
            header[f"{t}.renamed" if r % 2 else t.upper()] = header.pop(t)
        elif kind == "structure":
            text = meta["structure"]
            meta["structure"] = text.replace(json.dumps(t), json.dumps(u)) if t != u else text[:-1]
    except (KeyError, TypeError, IndexError, ZeroDivisionError, AttributeError):
        return data  # not there any more after an earlier edit
    if fix and kind in FIXABLE and "header_crc32" in meta:
        meta["header_crc32"] = header_crc32(header)
    text = json.dumps(header)
    text = (text[:-1] + extra + "}").encode("utf-8")
    return len(text).to_bytes(8, "little") + text + body


def _mutate(data: bytes, header_end: int, op: tuple) -> bytes:
    kind = op[0]
    b = bytearray(data)
    if kind.startswith("flip"):
        lo, hi = {"flip": (0, len(b)), "flip header": (0, min(header_end, len(b))),
                  "flip data": (min(header_end, len(b)), len(b))}[kind]
        if hi > lo:
            b[lo + op[1] % (hi - lo)] ^= op[2]
    elif kind == "truncate":
        del b[op[1] % max(1, len(b)):]
    elif kind == "insert":
        at = op[1] % (len(b) + 1)
        b[at:at] = op[2]
    elif kind == "delete":
        at = op[1] % max(1, len(b))
        del b[at:at + op[2]]
    elif kind == "length" and len(b) >= 8:
        v = op[1] + int.from_bytes(b[:8], "little") if -16 <= op[1] <= 16 else op[1]
        b[:8] = (v % 2**64).to_bytes(8, "little")
    elif kind == "rewrite":
        return _rewrite(bytes(b), *op[1:])
    return bytes(b)


def _reason(msg: str) -> str:
    for label, pattern in REASONS:
        if re.search(pattern, msg):
            return f"ValueError: {label}"
    return "ValueError: other"


def _outcome(source: Any, obj: Any, ops: list[tuple]) -> str:
    try:
        out = rc.load(source)
    except ValueError as exc:
        return _reason(str(exc))
    assert same(out, obj), f"silently different values after {ops}"
    return "loaded intact"


def test_load_survives_corruption(record_property, tmp_path):
    """Each corrupted file is loaded from bytes (``safetensors.deserialize``) and
    from a path (``safe_open``), with the same outcome."""
    outcomes: Counter[str] = Counter()
    seen: set[bytes] = set()
    path = tmp_path / "fuzzed.safetensors"

    @settings(max_examples=2000, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.integers(0, len(FILES) - 1), st.lists(MUTATION, min_size=1, max_size=3))
    def run(which: int, ops: list[tuple]) -> None:
        data, obj = FILES[which], OBJECTS[which]
        header_end = header_of(data)[1]
        for op in ops:
            data = _mutate(data, header_end, op)
        tracemalloc.start()
        start = time.perf_counter()
        outcome = _outcome(io.BytesIO(data), obj, ops)
        elapsed = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert elapsed < 2.0, f"load took {elapsed:.1f} s after {ops}"
        assert peak < 4 * len(data) + (1 << 20), f"load allocated {peak} bytes after {ops}"
        path.write_bytes(data)
        assert _outcome(path, obj, ops) == outcome, f"bytes and path disagree after {ops}"
        if outcome == "loaded intact" and data == FILES[which]:
            outcome += " (unchanged file)"
        if data not in seen:  # hypothesis may replay an example: count each file once
            seen.add(data)
            outcomes[outcome] += 1

    for data, obj in zip(FILES, OBJECTS):  # the unmutated files load intact
        assert same(rc.load(io.BytesIO(data)), obj)
    try:
        run()
    finally:
        tracemalloc.stop()
    table = "\n".join(f"  {count:6d}  {what}" for what, count in outcomes.most_common())
    print(f"\nrc.load of {sum(outcomes.values())} distinct corrupted checkpoints:\n{table}")
    record_property("checkpoint_fuzz_outcomes", dict(outcomes))
    assert sum(outcomes.values()) > 1000
    assert outcomes["ValueError: other"] == 0, outcomes
    assert outcomes["ValueError: tensor checksum"] > 0 and outcomes["ValueError: byte ranges"] > 0
