"""What a new user does first, on whatever backends are installed: create, print,
compute, autograd, a few optimizer steps, data loading, save/load.

    python scripts/install_smoke.py --device opencl   # fails unless the default device is opencl
    python scripts/install_smoke.py --info-only       # import and `rtx info` only (cuda without a GPU)

Run by scripts/check_install.py in a fresh environment holding rtxcore and one
backend (installed from wheels), and by tests/test_one_backend.py with the
other backends disabled. Needs nothing of the repository but this file.
Prints one line per step; exits non-zero at the first step that fails.
"""

from __future__ import annotations

import argparse
import io
import os
import pickle
import sys
import tempfile


def info_only() -> None:
    import subprocess

    import rtxcore  # noqa: F401  (the import itself is the check)

    r = subprocess.run([sys.executable, "-m", "rtxcore", "info"], capture_output=True, text=True,
                       timeout=300)
    print(r.stdout, end="")
    if r.returncode != 0:
        raise SystemExit(f"rtx info exited {r.returncode}: {r.stderr}")
    if "default device:" not in r.stdout:
        raise SystemExit("rtx info does not say which device is the default")
    print("smoke ok: import and rtx info")


def smoke(want: str | None) -> None:
    import numpy as np

    import rtxcore as rc
    from rtxcore.device import default_device_reason
    from rtxcore.utils.data import DataLoader, TensorDataset

    dev, why = default_device_reason()
    print(f"default device: {dev} ({why})")
    if want is not None and dev.type != want:
        raise SystemExit(f"the default device is {dev}, expected {want}")

    x = rc.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert x.device == dev, (x.device, dev)
    text = repr(x)
    print("print:", text.replace("\n", " "))
    assert "1." in text and "4." in text, text
    assert x.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    assert np.array_equal(x.numpy(), np.array([[1.0, 2.0], [3.0, 4.0]], np.float32))
    assert np.array_equal(np.asarray(x), x.numpy())

    a = rc.from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3))
    assert a.device == dev and a.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]], a
    y = (x @ x.T + 1).sum(0)
    assert y.tolist() == [18.0, 38.0], y.tolist()  # [[5, 11], [11, 25]] + 1, summed over rows
    print("compute:", y)

    w = rc.tensor([0.5, -1.0], requires_grad=True)
    loss = rc.tanh(x @ w).sum()
    loss.backward()
    want_grad = x.numpy().T @ (1 - np.tanh(x.numpy() @ np.array([0.5, -1.0])) ** 2)
    assert np.allclose(w.grad.numpy(), want_grad, atol=1e-5), (w.grad, want_grad)
    print("autograd:", w.grad)

    rc.manual_seed(0)
    model = rc.nn.Sequential(rc.nn.Linear(4, 8), rc.nn.ReLU(), rc.nn.Linear(8, 1))
    opt = rc.optim.Adam(model.parameters(), lr=0.05)
    data = TensorDataset(rc.randn(64, 4), rc.randn(64, 1))
    losses = []
    for _ in range(5):
        for xb, yb in DataLoader(data, batch_size=16, shuffle=True):
            opt.zero_grad()
            step_loss = rc.nn.functional.mse_loss(model(xb), yb)
            step_loss.backward()
            opt.step()
        losses.append(step_loss.item())
    print("training, last batch's loss per epoch:", " ".join(f"{v:.3f}" for v in losses))
    assert all(np.isfinite(losses)), losses

    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "model.safetensors")
        rc.save(model.state_dict(), path)
        back = rc.load(path)
        for k, v in model.state_dict().items():
            assert back[k].device == v.device, (k, back[k].device, v.device)
            assert np.array_equal(back[k].numpy(), v.detach().numpy()), k
    buf = io.BytesIO()
    rc.save({"w": w.detach()}, buf)
    buf.seek(0)
    assert rc.load(buf)["w"].tolist() == [0.5, -1.0]
    assert pickle.loads(pickle.dumps(x)).tolist() == x.tolist()
    print("save/load: ok")
    print(f"smoke ok on {dev}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", help="the device type the default device must be")
    p.add_argument("--info-only", action="store_true", help="import rtxcore and run `rtx info` only")
    args = p.parse_args(argv)
    if args.info_only:
        info_only()
    else:
        smoke(args.device)
    return 0


if __name__ == "__main__":
    sys.exit(main())
