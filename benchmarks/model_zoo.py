"""The models, data and training steps of ``benchmarks/models.py``, each written once for either library.

``lib`` is ``rtxcore`` or ``torch``: every builder below is called with both,
and ``benchmarks/models.py`` copies rtxcore's initial weights into PyTorch's.
``SPECS`` says, per model, how to build it, its optimizer(s), its batches
(NumPy arrays, the same on both sides) and, where it is not the usual
forward-loss-backward-step, its training step.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


# -- data ----------------------------------------------------------------------------------


def corpus() -> str:
    """The repository's documentation as one string (fixed for a checkout)."""
    parts = [ROOT / "README.md", ROOT / "docs" / "architecture.md"]
    return "\n".join(p.read_text(encoding="utf-8") for p in parts if p.exists())


def char_stream(vocab: int) -> np.ndarray:
    """The corpus as int64 codes: ``vocab`` 27 keeps lowercase letters and maps
    everything else to 0 (makemore's '.'); otherwise the ``vocab - 1`` most
    frequent characters, the rest sharing code 0."""
    text = corpus()
    if vocab == 27:
        codes = np.frombuffer(text.lower().encode("ascii", "replace"), np.uint8).astype(np.int64)
        letters = (codes >= ord("a")) & (codes <= ord("z"))
        return np.where(letters, codes - ord("a") + 1, 0)
    codes = np.frombuffer(text.encode("utf-32-le"), np.uint32)
    chars, counts = np.unique(codes, return_counts=True)
    keep = chars[np.argsort(-counts, kind="stable")[: vocab - 1]]
    table = {int(c): i + 1 for i, c in enumerate(keep)}
    return np.array([table.get(ord(ch), 0) for ch in text], np.int64)


def lm_batches(vocab: int, context: int, batch: int, steps: int, seed: int,
               last_only: bool) -> list[tuple[np.ndarray, np.ndarray]]:
    """(x, y) windows of the stream: y is x shifted by one (every position), or
    only the next character (``last_only``: the MLP LM)."""
    data = char_stream(vocab)
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(steps):
        starts = rng.integers(0, len(data) - context - 1, batch)
        x = np.stack([data[s:s + context] for s in starts])
        if last_only:
            y = data[starts + context]
        else:
            y = np.stack([data[s + 1:s + context + 1] for s in starts])
        out.append((x, y))
    return out


@functools.lru_cache(maxsize=None)
def _digits() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits

    d = load_digits()
    return (d.images / 16.0).astype(np.float32), d.target.astype(np.int64)


def digit_batches(batch: int, steps: int, seed: int, scale: int = 1,
                  pad: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """Batches of scikit-learn's bundled digits, (N, 1, H, W) float32 in [0, 1]:
    the 8x8 images, each pixel repeated ``scale`` times each way and ``pad``
    zeros around (3 and 2: 28x28, MNIST's size)."""
    x, y = _digits()
    if scale > 1:
        x = np.kron(x, np.ones((scale, scale), np.float32))
    if pad:
        x = np.pad(x, ((0, 0), (pad, pad), (pad, pad)))
    x = np.ascontiguousarray(x[:, None])
    rng = np.random.default_rng(seed)
    return [(x[i], y[i]) for i in (rng.integers(0, len(y), batch) for _ in range(steps))]


def row_batches(batch: int, steps: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """The digits at 28x28 as (N, 28, 28): 28 steps of one 28-pixel row each."""
    return [(x[:, 0], y) for x, y in digit_batches(batch, steps, seed, scale=3, pad=2)]


def superres_batches(batch: int, steps: int, seed: int, size: int = 32,
                     upscale: int = 3) -> list[tuple[np.ndarray, np.ndarray]]:
    """(low, high) pairs: smooth random images of ``size * upscale`` pixels a side
    (low-pass filtered noise in [0, 1], a luminance channel) and their
    ``upscale`` x ``upscale`` block means as the input, (N, 1, size, size)."""
    rng = np.random.default_rng(seed)
    side = size * upscale
    pool = 4 * batch
    f = np.fft.fftfreq(side)
    lowpass = np.exp(-(f[:, None] ** 2 + f[None, :] ** 2) / (2 * 0.06 ** 2))
    spec = np.fft.fft2(rng.standard_normal((pool, side, side))) * lowpass
    hi = np.fft.ifft2(spec).real
    lo_, hi_ = hi.min(axis=(1, 2), keepdims=True), hi.max(axis=(1, 2), keepdims=True)
    hi = ((hi - lo_) / (hi_ - lo_)).astype(np.float32)[:, None]
    lo = hi.reshape(pool, 1, size, upscale, size, upscale).mean(axis=(3, 5))
    out = []
    for _ in range(steps):
        i = rng.integers(0, pool, batch)
        out.append((np.ascontiguousarray(lo[i]), np.ascontiguousarray(hi[i])))
    return out


def gan_batches(batch: int, nz: int, steps: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """(real, noise): the digits at 32x32 (each pixel 4x4) scaled to [-1, 1] as
    the DCGAN example normalizes them, and the generator's (N, nz, 1, 1) noise."""
    rng = np.random.default_rng(seed + 1)
    out = []
    for x, _ in digit_batches(batch, steps, seed, scale=4):
        noise = rng.standard_normal((batch, nz, 1, 1)).astype(np.float32)
        out.append((x * 2.0 - 1.0, noise))
    return out


# -- models --------------------------------------------------------------------------------


def gpt(lib: Any, vocab: int = 65, n_layer: int = 4, n_head: int = 4, n_embd: int = 128,
        block: int = 64, gelu: str = "module") -> Any:
    """A decoder-only transformer LM as nanoGPT writes it. ``gelu``: ``"module"``
    uses ``nn.GELU()``; ``"tanh-pow"`` the hand-written tanh approximation of
    minGPT's ``NewGELU`` (with ``pow(x, 3.0)``)."""
    nn, F = lib.nn, lib.nn.functional

    class NewGELU(nn.Module):
        def forward(self, x: Any) -> Any:
            return 0.5 * x * (1.0 + lib.tanh(math.sqrt(2.0 / math.pi)
                                             * (x + 0.044715 * lib.pow(x, 3.0))))

    class CausalSelfAttention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c_attn = nn.Linear(n_embd, 3 * n_embd)
            self.c_proj = nn.Linear(n_embd, n_embd)
            self.register_buffer("bias", lib.tril(lib.ones(block, block)).view(1, 1, block, block))

        def forward(self, x: Any) -> Any:
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(n_embd, dim=2)
            k = k.view(B, T, n_head, C // n_head).transpose(1, 2)
            q = q.view(B, T, n_head, C // n_head).transpose(1, 2)
            v = v.view(B, T, n_head, C // n_head).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
            att = F.softmax(att, dim=-1)
            y = att @ v
            y = y.transpose(1, 2).contiguous().view(B, T, C)
            return self.c_proj(y)

    class MLP(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c_fc = nn.Linear(n_embd, 4 * n_embd)
            self.gelu = nn.GELU() if gelu == "module" else NewGELU()
            self.c_proj = nn.Linear(4 * n_embd, n_embd)

        def forward(self, x: Any) -> Any:
            return self.c_proj(self.gelu(self.c_fc(x)))

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln_1 = nn.LayerNorm(n_embd)
            self.attn = CausalSelfAttention()
            self.ln_2 = nn.LayerNorm(n_embd)
            self.mlp = MLP()

        def forward(self, x: Any) -> Any:
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.wte = nn.Embedding(vocab, n_embd)
            self.wpe = nn.Embedding(block, n_embd)
            self.h = nn.ModuleList([Block() for _ in range(n_layer)])
            self.ln_f = nn.LayerNorm(n_embd)
            self.lm_head = nn.Linear(n_embd, vocab, bias=False)
            self.wte.weight = self.lm_head.weight  # weight tying, as nanoGPT
            self.register_buffer("pos", lib.arange(block))

        def forward(self, idx: Any, targets: Any) -> Any:
            t = idx.size(1)
            x = self.wte(idx) + self.wpe(self.pos[:t])
            for b in self.h:
                x = b(x)
            logits = self.lm_head(self.ln_f(x))
            return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))

    return GPT()


def nanogpt(lib: Any) -> Any:
    """The small GPT users train first: 3 layers, width 48, 3 heads, context 32,
    the hand-written tanh-GELU."""
    return gpt(lib, n_layer=3, n_head=3, n_embd=48, block=32, gelu="tanh-pow")


def mlp_lm(lib: Any, vocab: int = 27, emb: int = 24, context: int = 8, hidden: int = 256) -> Any:
    nn, F = lib.nn, lib.nn.functional

    class MLPLM(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(vocab, emb)
            self.fc1 = nn.Linear(context * emb, hidden)
            self.fc2 = nn.Linear(hidden, vocab)

        def forward(self, x: Any, y: Any) -> Any:
            h = lib.tanh(self.fc1(self.emb(x).view(x.size(0), -1)))
            return F.cross_entropy(self.fc2(h), y)

    return MLPLM()


def gru_lm(lib: Any, vocab: int = 65, emb: int = 32, hidden: int = 128) -> Any:
    nn, F = lib.nn, lib.nn.functional

    class GRULM(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(vocab, emb)
            self.rnn = nn.GRU(emb, hidden, batch_first=True)
            self.head = nn.Linear(hidden, vocab)

        def forward(self, x: Any, y: Any) -> Any:
            out, _ = self.rnn(self.emb(x))
            logits = self.head(out)
            return F.cross_entropy(logits.reshape(-1, vocab), y.reshape(-1))

    return GRULM()


def lstm_rows(lib: Any, rows: int = 28, hidden: int = 128, layers: int = 2,
              classes: int = 10) -> Any:
    """The recurrent classifier of the tutorials: an image read one row per time
    step by a stacked LSTM, a Linear on the last step's output."""
    nn, F = lib.nn, lib.nn.functional

    class RowLSTM(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lstm = nn.LSTM(rows, hidden, layers, batch_first=True)
            self.fc = nn.Linear(hidden, classes)

        def forward(self, x: Any, y: Any) -> Any:
            out, _ = self.lstm(x)
            return F.cross_entropy(self.fc(out[:, -1, :]), y)

    return RowLSTM()


def digits_cnn(lib: Any) -> Any:
    nn, F = lib.nn, lib.nn.functional

    class CNN(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = nn.Sequential(
                nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                nn.Flatten(), nn.Linear(32 * 2 * 2, 64), nn.ReLU(), nn.Linear(64, 10))

        def forward(self, x: Any, y: Any) -> Any:
            return F.cross_entropy(self.net(x), y)

    return CNN()


def superres(lib: Any, upscale: int = 3) -> Any:
    """PyTorch's examples/super_resolution ``Net`` (an ESPCN), orthogonal init and
    all, with its MSE loss."""
    nn, init = lib.nn, lib.nn.init

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.relu = nn.ReLU()
            self.conv1 = nn.Conv2d(1, 64, (5, 5), (1, 1), (2, 2))
            self.conv2 = nn.Conv2d(64, 64, (3, 3), (1, 1), (1, 1))
            self.conv3 = nn.Conv2d(64, 32, (3, 3), (1, 1), (1, 1))
            self.conv4 = nn.Conv2d(32, upscale ** 2, (3, 3), (1, 1), (1, 1))
            self.pixel_shuffle = nn.PixelShuffle(upscale)
            self.criterion = nn.MSELoss()
            init.orthogonal_(self.conv1.weight, init.calculate_gain("relu"))
            init.orthogonal_(self.conv2.weight, init.calculate_gain("relu"))
            init.orthogonal_(self.conv3.weight, init.calculate_gain("relu"))
            init.orthogonal_(self.conv4.weight)

        def forward(self, x: Any, target: Any) -> Any:
            x = self.relu(self.conv1(x))
            x = self.relu(self.conv2(x))
            x = self.relu(self.conv3(x))
            return self.criterion(self.pixel_shuffle(self.conv4(x)), target)

    return Net()


DCGAN_NZ = 32


def dcgan(lib: Any, nz: int = DCGAN_NZ, ngf: int = 32, ndf: int = 32, nc: int = 1,
          inplace: bool = True) -> Any:
    """PyTorch's examples/dcgan ``Generator`` and ``Discriminator`` for 32x32
    images (one stage fewer than its 64x64 ones), with its ``weights_init``,
    held as ``netG`` and ``netD`` of one module (so the weights copy by name)."""
    nn = lib.nn

    def weights_init(m: Any) -> None:
        classname = m.__class__.__name__
        if classname.find("Conv") != -1:
            nn.init.normal_(m.weight, 0.0, 0.02)
        elif classname.find("BatchNorm") != -1:
            nn.init.normal_(m.weight, 1.0, 0.02)
            nn.init.zeros_(m.bias)

    class Generator(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.main = nn.Sequential(
                nn.ConvTranspose2d(nz, ngf * 4, 4, 1, 0, bias=False),       # 4x4
                nn.BatchNorm2d(ngf * 4), nn.ReLU(True),
                nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, bias=False),  # 8x8
                nn.BatchNorm2d(ngf * 2), nn.ReLU(True),
                nn.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, bias=False),      # 16x16
                nn.BatchNorm2d(ngf), nn.ReLU(True),
                nn.ConvTranspose2d(ngf, nc, 4, 2, 1, bias=False),           # 32x32
                nn.Tanh())

        def forward(self, z: Any) -> Any:
            return self.main(z)

    class Discriminator(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.main = nn.Sequential(
                nn.Conv2d(nc, ndf, 4, 2, 1, bias=False),                    # 16x16
                nn.LeakyReLU(0.2, inplace=inplace),
                nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False),               # 8x8
                nn.BatchNorm2d(ndf * 2), nn.LeakyReLU(0.2, inplace=inplace),
                nn.Conv2d(ndf * 2, ndf * 4, 4, 2, 1, bias=False),           # 4x4
                nn.BatchNorm2d(ndf * 4), nn.LeakyReLU(0.2, inplace=inplace),
                nn.Conv2d(ndf * 4, 1, 4, 1, 0, bias=False), nn.Sigmoid())

        def forward(self, x: Any) -> Any:
            return self.main(x).view(-1, 1).squeeze(1)

    class DCGAN(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.netG = Generator()
            self.netG.apply(weights_init)
            self.netD = Discriminator()
            self.netD.apply(weights_init)
            self.criterion = nn.BCELoss()

    return DCGAN()


# notes printed under the table (a model run differently from how users write it, and why)
NOTES: dict[str, str] = {}


@functools.lru_cache(maxsize=None)
def leaky_inplace_ok() -> bool:
    """Whether rtxcore's backward accepts the DCGAN discriminator with
    ``LeakyReLU(0.2, inplace=True)`` (after BatchNorm2d); if not, both sides
    run ``inplace=False`` and the table says so."""
    import rtxcore as rc

    try:
        d = dcgan(rc, nz=2, ngf=2, ndf=2, inplace=True).netD
        d(rc.randn(2, 1, 32, 32)).sum().backward()
    except RuntimeError as e:
        NOTES["dcgan"] = (f"LeakyReLU(0.2, inplace=False) on both sides: rtxcore's backward "
                          f"fails with inplace=True ({str(e).split(':')[0]})")
        return False
    return True


def dcgan_step(lib: Any, model: Any, opts: Any, clip: Any) -> Callable[..., tuple[float, float]]:
    """One iteration of the DCGAN example's loop: D on a real batch and on the
    generator's (detached) fakes, D's step; then G through D with real labels,
    G's step. Returns (errD, errG)."""
    netG, netD, criterion = model.netG, model.netD, model.criterion
    optimizerD, optimizerG = opts
    real_label, fake_label = 1.0, 0.0

    def step(real: Any, noise: Any) -> tuple[float, float]:
        netD.zero_grad()
        b = real.size(0)
        label = lib.full((b,), real_label, dtype=real.dtype, device=real.device)
        output = netD(real)
        errD_real = criterion(output, label)
        errD_real.backward()
        fake = netG(noise)
        label.fill_(fake_label)
        output = netD(fake.detach())
        errD_fake = criterion(output, label)
        errD_fake.backward()
        errD = errD_real + errD_fake
        optimizerD.step()

        netG.zero_grad()
        label.fill_(real_label)
        output = netD(fake)
        errG = criterion(output, label)
        errG.backward()
        optimizerG.step()
        return errD.item(), errG.item()

    return step


# -- what each model trains with ---------------------------------------------------------------


@dataclass(frozen=True)
class Spec:
    """``build(lib)``: the module; ``optim(lib, module)``: its optimizer (or the
    tuple the custom step takes); ``batches(steps, seed)``: a list of tuples of
    arrays, one per step; ``clip``: ``clip_grad_norm_(1.0)`` before the step;
    ``needs``: rtxcore.nn names without which the row is skipped; ``step(lib,
    module, optim, clip)``: a custom training step (default: zero_grad,
    ``module(*batch)`` as the loss, backward, clip, step, ``loss.item()``);
    ``chaotic``: training amplifies float32 rounding beyond ``--tol`` (PyTorch
    at 1 and at 2 threads disagrees with itself as much), so a float32 gap
    above it is judged by replaying the same steps in float64."""

    build: Callable[[Any], Any]
    optim: Callable[[Any, Any], Any]
    batches: Callable[[int, int], list]
    clip: bool = False
    needs: tuple[str, ...] = ()
    step: Callable[[Any, Any, Any, Any], Callable[..., Any]] | None = None
    chaotic: bool = False


def _adam(lr: float, **kw: Any) -> Callable[[Any, Any], Any]:
    return lambda lib, m: lib.optim.Adam(m.parameters(), lr=lr, **kw)


SPECS: dict[str, Spec] = {
    "gpt": Spec(gpt, lambda lib, m: lib.optim.AdamW(m.parameters(), lr=1e-3, weight_decay=0.1),
                lambda n, s: lm_batches(65, 64, 16, n, s, False), clip=True),
    "mlp": Spec(mlp_lm, lambda lib, m: lib.optim.SGD(m.parameters(), lr=0.1),
                lambda n, s: lm_batches(27, 8, 64, n, s, True)),
    "gru": Spec(gru_lm, _adam(2e-3), lambda n, s: lm_batches(65, 32, 32, n, s, False),
                clip=True, needs=("GRU",)),
    "cnn": Spec(digits_cnn, _adam(2e-3), lambda n, s: digit_batches(64, n, s)),
    "lstm": Spec(lstm_rows, _adam(1e-3), lambda n, s: row_batches(64, n, s), needs=("LSTM",)),
    "superres": Spec(superres, _adam(1e-2), lambda n, s: superres_batches(16, n, s),
                     needs=("PixelShuffle",)),
    "nanogpt": Spec(nanogpt,
                    lambda lib, m: lib.optim.AdamW(m.parameters(), lr=1e-3, weight_decay=0.1),
                    lambda n, s: lm_batches(65, 32, 16, n, s, False), clip=True),
    "dcgan": Spec(lambda lib: dcgan(lib, inplace=leaky_inplace_ok()),
                  lambda lib, m: (lib.optim.Adam(m.netD.parameters(), lr=2e-4, betas=(0.5, 0.999)),
                                  lib.optim.Adam(m.netG.parameters(), lr=2e-4, betas=(0.5, 0.999))),
                  lambda n, s: gan_batches(32, DCGAN_NZ, n, s),
                  needs=("ConvTranspose2d", "BatchNorm2d"), step=dcgan_step, chaotic=True),
}
MODELS = tuple(SPECS)
