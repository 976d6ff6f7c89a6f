"""rc.save never loses the checkpoint it replaces, and rc.load never returns
silently wrong values: interrupted saves (file size limit, KeyboardInterrupt,
SIGKILL), checksums, foreign file formats and inconsistent headers."""

from __future__ import annotations

import errno
import io
import os
import subprocess
import sys
import textwrap
import zipfile
import zlib
from pathlib import Path

import numpy as np
import pytest

import rtxcore as rc
import rtxcore.serialization as ser

from .checkpoints import header_crc32, header_of, same, sample_objects, to_bytes, with_header

ROOT = Path(__file__).resolve().parents[2]
posix_only = pytest.mark.skipif(os.name != "posix", reason="needs POSIX resource limits and signals")


def _child(code: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


def _leftovers(folder: Path, keep: set[str]) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name not in keep)


# -- interrupted saves ------------------------------------------------------------------


@posix_only
def test_save_hitting_the_file_size_limit_keeps_the_old_file(tmp_path):
    path = tmp_path / "model.safetensors"
    rc.save({"w": rc.arange(1000, dtype=rc.float32), "step": 1}, path)
    before = path.read_bytes()
    r = _child("""
        import resource, signal, sys
        import numpy as np
        import rtxcore as rc

        big = {"w": rc.from_numpy(np.ones(1_000_000, np.float32)), "step": 2}  # 4 MB
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # so the write fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
        try:
            rc.save(big, sys.argv[1])
        except OSError as exc:
            print("OSError", exc.errno)
            sys.exit(3)
        print("saved")
    """, str(path))
    assert r.returncode == 3, (r.stdout, r.stderr)
    assert f"OSError {errno.EFBIG}" in r.stdout
    assert path.read_bytes() == before
    assert _leftovers(tmp_path, {path.name}) == []  # the temporary file is gone
    assert rc.load(path)["step"] == 1


@pytest.mark.parametrize("failure", [KeyboardInterrupt(), OSError(errno.ENOSPC, "No space left on device")])
def test_save_interrupted_before_the_rename_keeps_the_old_file(tmp_path, monkeypatch, failure):
    path = tmp_path / "model.safetensors"
    old = {"w": rc.ones(3), "step": 1}
    rc.save(old, path)
    before = path.read_bytes()

    def interrupted(fd):
        raise failure

    monkeypatch.setattr(os, "fsync", interrupted)  # the new file is written, not yet on disk
    with pytest.raises(type(failure)):
        rc.save({"w": rc.zeros(1000), "step": 2}, path)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert _leftovers(tmp_path, {path.name}) == []
    assert same(rc.load(path), old)


@posix_only
def test_killed_while_saving_leaves_the_old_or_the_new_checkpoint(tmp_path):
    """A process re-saving a 16 MB checkpoint in a loop is killed (SIGKILL): half
    the times as soon as some file in the folder is partly written (mid-write),
    half after delays spread over its save cycle. The checkpoint always loads as
    one of the two objects it alternates between."""
    folder, copies = tmp_path / "run", tmp_path / "after"
    folder.mkdir()
    copies.mkdir()
    path = folder / "model.safetensors"
    trials = 10
    r = _child("""
        import os, shutil, signal, sys, time
        import numpy as np
        import rtxcore as rc

        path, copies, trials = sys.argv[1], sys.argv[2], int(sys.argv[3])
        folder = os.path.dirname(path)
        objs = [{"w": rc.from_numpy(np.full(4_000_000, float(k), np.float32)), "k": k} for k in (0, 1)]
        rc.save(objs[0], path)
        full = os.path.getsize(path)  # both objects save to the same size

        def partly_written():
            for e in os.scandir(folder):
                try:
                    if 0 < e.stat().st_size < full:
                        return True
                except FileNotFoundError:  # renamed away meanwhile
                    pass
            return False

        for t in range(trials):
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:  # save, alternating the two objects, until killed
                try:
                    os.close(r)
                    i = 1
                    while True:
                        rc.save(objs[i % 2], path)
                        if i == 1:
                            os.write(w, b"x")
                        i += 1
                finally:
                    os._exit(1)
            os.close(w)
            assert os.read(r, 1) == b"x"  # one save finished: now in the loop
            os.close(r)
            if t % 2 == 0:
                deadline = time.monotonic() + 2.0
                while not partly_written() and time.monotonic() < deadline:
                    pass
            else:
                time.sleep(0.029 * t)
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            shutil.copyfile(path, os.path.join(copies, str(t)))
        print("done")
    """, str(path), str(copies), str(trials))
    assert r.returncode == 0 and "done" in r.stdout, r.stderr
    want = [{"w": rc.from_numpy(np.full(4_000_000, float(k), np.float32)), "k": k} for k in (0, 1)]
    for t in range(trials):
        got = rc.load(copies / str(t))
        assert same(got, want[got["k"]]), t
    # what a kill can leave is a temporary file beside it, never a damaged checkpoint
    assert all(n.startswith(f".{path.name}.") and n.endswith(".tmp") for n in _leftovers(folder, {path.name}))


# -- checksums ------------------------------------------------------------------------------


def test_flipped_data_byte_is_caught_and_verify_false_loads_it(tmp_path):
    w = np.arange(12, dtype=np.float32).reshape(3, 4)
    path = tmp_path / "model.safetensors"
    rc.save({"fc.weight": rc.from_numpy(w), "fc.bias": rc.zeros(4), "epoch": 3}, path)
    data = bytearray(path.read_bytes())
    header, start = header_of(bytes(data))
    begin = header["fc.weight"]["data_offsets"][0]
    data[start + begin + 4 * 5] ^= 0x01  # element 5 of fc.weight, lowest mantissa bit
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError) as info:
        rc.load(path)
    msg = str(info.value)
    assert "'fc.weight'" in msg and str(path) in msg and "fc.bias" not in msg
    out = rc.load(path, verify=False)
    expected = w.copy()
    expected.reshape(-1).view(np.uint32)[5] ^= 1
    assert out["fc.weight"].numpy().tobytes() == expected.tobytes()
    assert out["epoch"] == 3 and not np.array_equal(expected, w)


def test_every_flipped_byte_is_caught():
    """No single flipped bit anywhere in a file loads: every one is a ValueError."""
    obj = sample_objects()[0]
    data = to_bytes(obj)
    for i in range(len(data)):
        for bit in (0x01, 0x80):
            flipped = bytearray(data)
            flipped[i] ^= bit
            try:
                out = rc.load(io.BytesIO(bytes(flipped)))
            except ValueError:
                continue
            # only a change to the header's whitespace padding may load, and then as saved
            header_end = header_of(data)[1]
            assert i < header_end and data[i:i + 1] == b" " and same(out, obj), (i, bit)


def test_checksums_are_in_the_metadata():
    """tensor_crc32 holds the CRC-32 of each tensor's bytes in the order of the
    data; header_crc32 that of the rest of the header, as the format says."""
    data = to_bytes({"a": rc.ones(2), "b": rc.zeros(3, dtype=rc.int8), "c": rc.arange(3.0)})
    header, start = header_of(data)
    meta = header["__metadata__"]
    assert meta["format"] == ser.FORMAT
    ranges = sorted(v["data_offsets"] for k, v in header.items() if k != "__metadata__")
    want = [f"{zlib.crc32(data[start + b:start + e]):08x}" for b, e in ranges]
    assert meta["tensor_crc32"].split(",") == want and len(set(want)) == 3
    assert meta["header_crc32"] == header_crc32(header)


# -- what the metadata says ----------------------------------------------------------------------


def test_flipped_format_value_is_refused_naming_the_key():
    data = to_bytes({"w": rc.ones(2), "n": 1})
    at = data.index(b'"format":"rtxcore"') + len(b'"format":"')
    for i in range(at, at + len(ser.FORMAT)):
        for bit in (0x01, 0x02, 0x20):
            flipped = bytearray(data)
            flipped[i] ^= bit
            with pytest.raises(ValueError, match="'format'"):
                rc.load(io.BytesIO(bytes(flipped)))


# -- foreign files --------------------------------------------------------------------------------


def _zip(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    return buf.getvalue()


def _npy() -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.arange(3.0))
    return buf.getvalue()


def _npz() -> bytes:
    buf = io.BytesIO()
    np.savez(buf, a=np.arange(3.0), b=np.ones(2))
    return buf.getvalue()


# torch.save's legacy format starts with a protocol-2 pickle of this number
_LEGACY = b"\x80\x02\x8a\x0a" + (0x1950A86A20F9469CFC6C).to_bytes(10, "little") + b".\x80\x02M\xe9\x03."


@pytest.mark.parametrize("what,data,words", [
    ("pt zip", _zip({"archive/data.pkl": b"\x80\x02}q\x00.", "archive/version": b"3\n",
                     "archive/data/0": b"\x00" * 8}), ["PyTorch", "torch.load", "rc.tensor(v.numpy())"]),
    ("pt zip named", _zip({"model/data.pkl": b"\x80\x02}.", "model/byteorder": b"little"}), ["PyTorch"]),
    ("pt legacy", _LEGACY + b"\x00" * 64, ["PyTorch", "legacy", "torch.load"]),
    ("npy", _npy(), ["NumPy .npy", "rc.from_numpy(np.load(path))"]),
    ("npz", _npz(), ["NumPy .npz", "np.load(path)"]),
    ("zip", _zip({"readme.txt": b"hello"}), ["zip archive"]),
])
def test_foreign_formats_are_named(tmp_path, what, data, words):
    path = tmp_path / "checkpoint.bin"
    path.write_bytes(data)
    for source in (path, io.BytesIO(data)):
        with pytest.raises(ValueError) as info:
            rc.load(source)
        msg = str(info.value)
        assert all(w in msg for w in words), msg
    assert str(path) in str(pytest.raises(ValueError, rc.load, path).value)


def test_torch_files_are_named():
    torch = pytest.importorskip("torch")
    sd = {"w": torch.ones(2, 3)}
    for legacy in (False, True):
        buf = io.BytesIO()
        torch.save(sd, buf, _use_new_zipfile_serialization=not legacy)
        with pytest.raises(ValueError) as info:
            rc.load(io.BytesIO(buf.getvalue()))
        assert "PyTorch" in str(info.value) and ("legacy" in str(info.value)) == legacy


# -- inconsistent headers --------------------------------------------------------------------------


def _two_tensors(a_range: list[int], b_range: list[int], size: int = 16) -> bytes:
    return with_header({
        "first.weight": {"dtype": "F32", "shape": [(a_range[1] - a_range[0]) // 4], "data_offsets": a_range},
        "second.weight": {"dtype": "F32", "shape": [(b_range[1] - b_range[0]) // 4], "data_offsets": b_range},
    }, np.arange(size // 4, dtype=np.float32).tobytes())


@pytest.mark.parametrize("a,b", [([0, 16], [0, 16]), ([0, 8], [0, 8]), ([0, 12], [8, 16]), ([4, 16], [0, 8])])
def test_overlapping_byte_ranges_are_refused_naming_both(a, b):
    import safetensors

    data = _two_tensors(a, b)
    with pytest.raises(safetensors.SafetensorError, match="invalid offset"):
        safetensors.deserialize(data)  # the package refuses them; rtxcore says which tensors
    with pytest.raises(ValueError) as info:
        rc.load(io.BytesIO(data))
    msg = str(info.value)
    assert "'first.weight'" in msg and "'second.weight'" in msg, msg


def test_overlap_in_an_rtxcore_file_is_refused_even_with_fixed_checksums():
    """A header rewritten so that two tensors share bytes, with its header
    checksum recomputed, is still refused."""
    data = to_bytes({"a": rc.ones(4), "b": rc.zeros(4)})
    header, start = header_of(data)
    header["b"]["data_offsets"] = header["a"]["data_offsets"]
    header["__metadata__"]["header_crc32"] = header_crc32(header)
    with pytest.raises(ValueError) as info:
        rc.load(io.BytesIO(with_header(header, data[start:])))
    assert "'a'" in str(info.value) and "'b'" in str(info.value)

