"""Karpathy's makemore MLP (Bengio et al. 2003) written the way the lectures do:
raw parameter tensors, an embedding lookup ``C[X]``, a batch-norm layer with
running statistics, ``F.cross_entropy``, manual SGD through ``p.data``, and
sampling names with ``torch.multinomial`` from a seeded ``torch.Generator``."""

import numpy as np
import torch
import torch.nn.functional as F


def make_words(n, seed):
    """Toy names: consonant-vowel syllables."""
    rng = np.random.default_rng(seed)
    cons, vows = "bdklmnrst", "aeiou"
    words = []
    for _ in range(n):
        k = rng.integers(1, 4)
        syllables = [cons[rng.integers(len(cons))] + vows[rng.integers(len(vows))]
                     for _ in range(k)]
        words.append("".join(syllables))
    return words


def build_dataset(words, stoi, block_size):
    X, Y = [], []
    for w in words:
        context = [0] * block_size
        for ch in w + ".":
            ix = stoi[ch]
            X.append(context)
            Y.append(ix)
            context = context[1:] + [ix]
    X = torch.tensor(X)
    Y = torch.tensor(Y)
    return X, Y


def main(steps=20, device=None, seed=42):
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    words = make_words(300, seed)
    chars = sorted(list(set("".join(words))))
    stoi = {s: i + 1 for i, s in enumerate(chars)}
    stoi["."] = 0
    itos = {i: s for s, i in stoi.items()}
    vocab_size = len(itos)

    block_size = 3
    n1, n2 = int(0.8 * len(words)), int(0.9 * len(words))
    Xtr, Ytr = build_dataset(words[:n1], stoi, block_size)
    Xdev, Ydev = build_dataset(words[n1:n2], stoi, block_size)
    Xtr, Ytr, Xdev, Ydev = Xtr.to(device), Ytr.to(device), Xdev.to(device), Ydev.to(device)

    n_embd, n_hidden = 10, 64
    rng = np.random.default_rng(seed)
    randn = lambda *shape: torch.tensor(rng.standard_normal(shape), dtype=torch.float32)
    C = randn(vocab_size, n_embd)
    W1 = randn(n_embd * block_size, n_hidden) * (5 / 3) / ((n_embd * block_size) ** 0.5)
    W2 = randn(n_hidden, vocab_size) * 0.01
    b2 = randn(vocab_size) * 0
    bngain = torch.ones((1, n_hidden))
    bnbias = torch.zeros((1, n_hidden))
    bnmean_running = torch.zeros((1, n_hidden), device=device)
    bnstd_running = torch.ones((1, n_hidden), device=device)
    parameters = [t.to(device) for t in (C, W1, W2, b2, bngain, bnbias)]
    C, W1, W2, b2, bngain, bnbias = parameters
    print(sum(p.nelement() for p in parameters))
    for p in parameters:
        p.requires_grad = True

    batch_size = 32
    lossi = []
    for i in range(steps):
        ix = torch.from_numpy(rng.integers(0, Xtr.shape[0], (batch_size,))).to(device)
        Xb, Yb = Xtr[ix], Ytr[ix]

        emb = C[Xb]
        embcat = emb.view(emb.shape[0], -1)
        hpreact = embcat @ W1
        bnmeani = hpreact.mean(0, keepdim=True)
        bnstdi = hpreact.std(0, keepdim=True)
        hpreact = bngain * (hpreact - bnmeani) / bnstdi + bnbias
        with torch.no_grad():
            bnmean_running = 0.999 * bnmean_running + 0.001 * bnmeani
            bnstd_running = 0.999 * bnstd_running + 0.001 * bnstdi
        h = torch.tanh(hpreact)
        logits = h @ W2 + b2
        loss = F.cross_entropy(logits, Yb)

        for p in parameters:
            p.grad = None
        loss.backward()

        lr = 0.1 if i < steps // 2 else 0.01
        for p in parameters:
            p.data += -lr * p.grad
        lossi.append(loss.item())

    @torch.no_grad()
    def split_loss(x, y):
        emb = F.embedding(x, C)
        embcat = emb.view(emb.shape[0], -1)
        hpreact = embcat @ W1
        hpreact = bngain * (hpreact - bnmean_running) / bnstd_running + bnbias
        h = torch.tanh(hpreact)
        logits = h @ W2 + b2
        return F.cross_entropy(logits, y).item()

    g = torch.Generator().manual_seed(2147483647 + 10)
    ix = torch.randint(0, Xdev.shape[0], (32,), generator=g)
    dev_loss = split_loss(Xdev[ix.to(device)], Ydev[ix.to(device)])
    assert dev_loss == dev_loss

    names = []
    for _ in range(3):
        out = []
        context = [0] * block_size
        while True:
            emb = F.embedding(torch.tensor([context], device=device), C)
            hpreact = emb.view(1, -1) @ W1
            hpreact = bngain * (hpreact - bnmean_running) / bnstd_running + bnbias
            h = torch.tanh(hpreact)
            logits = h @ W2 + b2
            probs = F.softmax(logits, dim=1)
            ix = torch.multinomial(probs.cpu(), num_samples=1, generator=g).item()
            context = context[1:] + [ix]
            out.append(ix)
            if ix == 0 or len(out) > 20:
                break
        names.append("".join(itos[i] for i in out))
    assert all(set(n) <= set(stoi) for n in names)
    return lossi


if __name__ == "__main__":
    print(main())
