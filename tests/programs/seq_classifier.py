"""A sequence classifier as people write them with PyTorch's built-in layers:
nn.TransformerEncoderLayer(batch_first=True) with a key-padding mask, attention
pooling with nn.MultiheadAttention and a learned query, AdamW + OneCycleLR,
a custom NumPy-seeded Sampler for training batches and a RandomSampler with
num_samples for validation."""

import zlib

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.lr_scheduler import OneCycleLR
from torch.utils.data import DataLoader, Dataset, RandomSampler, Sampler

PAD = 0


class ToySequences(Dataset):
    """Variable-length token sequences, padded; label: is token 3 more frequent than token 4?"""

    def __init__(self, n, max_len, vocab, seed):
        rng = np.random.default_rng(seed)
        self.x = np.full((n, max_len), PAD, np.int64)
        self.y = np.zeros(n, np.int64)
        for k in range(n):
            length = rng.integers(max_len // 2, max_len + 1)
            seq = rng.integers(1, vocab, length)
            self.x[k, :length] = seq
            self.y[k] = int((seq == 3).sum() > (seq == 4).sum())

    def __len__(self):
        return len(self.y)

    def __getitem__(self, idx):
        return torch.from_numpy(self.x[idx]), torch.tensor(self.y[idx])


class EpochPermutationSampler(Sampler):
    """Yields a fresh NumPy permutation of the indices each epoch (reproducible across runs)."""

    def __init__(self, data_source, seed):
        self.n = len(data_source)
        self.seed = seed
        self.epoch = 0

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __iter__(self):
        return iter(np.random.default_rng([self.seed, self.epoch]).permutation(self.n).tolist())

    def __len__(self):
        return self.n


class Classifier(nn.Module):
    def __init__(self, vocab, d_model=16, nhead=2, num_layers=2, max_len=12, num_classes=2,
                 dropout=0.1):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model, padding_idx=PAD)
        self.pos = nn.Parameter(torch.zeros(1, max_len, d_model))
        layer = nn.TransformerEncoderLayer(
            d_model, nhead, dim_feedforward=4 * d_model, dropout=dropout, activation="gelu",
            batch_first=True, norm_first=True,
        )
        self.encoder = nn.TransformerEncoder(layer, num_layers, enable_nested_tensor=False)
        self.query = nn.Parameter(torch.zeros(1, 1, d_model))
        self.pool = nn.MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=True)
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, num_classes)

    def forward(self, x):
        pad_mask = x == PAD
        h = self.embed(x) + self.pos[:, : x.size(1)]
        h = self.encoder(h, src_key_padding_mask=pad_mask)
        q = self.query.expand(x.size(0), -1, -1)
        pooled, weights = self.pool(q, h, h, key_padding_mask=pad_mask, need_weights=True)
        return self.head(self.norm(pooled.squeeze(1))), weights


def init_from_numpy(model, seed):
    """Redraw every weight with NumPy (keyed by name) for reproducible runs."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1 and "norm" in name and name.endswith("weight"):
                continue
            rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
            fan_in = p.shape[-1]
            w = rng.uniform(-1, 1, tuple(p.shape)).astype(np.float32) / fan_in**0.5
            p.copy_(torch.from_numpy(w))


def main(steps=12, device=None, seed=0, dropout=0.0):
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(seed)
    vocab, max_len, batch_size, epochs = 8, 12, 16, 3
    train_ds = ToySequences(batch_size * -(-steps // epochs), max_len, vocab, seed)
    val_ds = ToySequences(48, max_len, vocab, seed + 1)
    sampler = EpochPermutationSampler(train_ds, seed)
    train_loader = DataLoader(train_ds, batch_size=batch_size, sampler=sampler, drop_last=True)
    val_loader = DataLoader(
        val_ds,
        batch_size=16,
        sampler=RandomSampler(val_ds, replacement=False, num_samples=len(val_ds)),
    )

    model = Classifier(vocab, max_len=max_len, dropout=dropout)
    init_from_numpy(model, seed)
    model.to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    scheduler = OneCycleLR(optimizer, max_lr=1e-2, total_steps=epochs * len(train_loader))

    losses = []
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        model.train()
        for x, y in train_loader:
            x, y = x.to(device), y.to(device)
            logits, _ = model(x)
            loss = F.cross_entropy(logits, y)
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
            optimizer.step()
            scheduler.step()
            losses.append(loss.item())

        model.eval()
        correct, total, val_loss = 0, 0, 0.0
        with torch.inference_mode():
            for x, y in val_loader:
                x, y = x.to(device), y.to(device)
                logits, weights = model(x)
                val_loss += F.cross_entropy(logits, y, reduction="sum").item()
                correct += (logits.argmax(-1) == y).sum().item()
                total += y.numel()
                # pooling attention never looks at padding
                assert float(weights.masked_fill(~(x == PAD).unsqueeze(1), 0).abs().max()) == 0.0
        assert total == len(val_ds) and 0 <= correct <= total
    return losses[:steps]


if __name__ == "__main__":
    print(main())
