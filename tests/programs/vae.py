"""The official PyTorch VAE example (pytorch/examples/vae), shrunk: an MLP
encoder/decoder, the reparameterisation trick with ``torch.randn_like``, a
binary-cross-entropy + KL loss, Adam, and ReduceLROnPlateau on the test loss."""

import numpy as np
import torch
import torch.utils.data
from torch import nn, optim
from torch.nn import functional as F

IMG = 64  # 8x8 "images"


class VAE(nn.Module):
    def __init__(self):
        super(VAE, self).__init__()
        self.fc1 = nn.Linear(IMG, 32)
        self.fc21 = nn.Linear(32, 4)
        self.fc22 = nn.Linear(32, 4)
        self.fc3 = nn.Linear(4, 32)
        self.fc4 = nn.Linear(32, IMG)

    def encode(self, x):
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def reparameterize(self, mu, logvar):
        std = torch.exp(0.5 * logvar)
        eps = torch.randn_like(std)
        return mu + eps * std

    def decode(self, z):
        h3 = F.relu(self.fc3(z))
        return torch.sigmoid(self.fc4(h3))

    def forward(self, x):
        mu, logvar = self.encode(x.view(-1, IMG))
        z = self.reparameterize(mu, logvar)
        return self.decode(z), mu, logvar


def loss_function(recon_x, x, mu, logvar):
    """Reconstruction + KL divergence losses summed over all elements and batch."""
    BCE = F.binary_cross_entropy(recon_x, x.view(-1, IMG), reduction="sum")
    # see Appendix B from VAE paper: Kingma and Welling. Auto-Encoding Variational Bayes. ICLR, 2014
    KLD = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return BCE + KLD


def synthetic_images(n, seed):
    """Bars on an 8x8 grid with soft edges, values in [0, 1]."""
    rng = np.random.default_rng(seed)
    imgs = np.zeros((n, 8, 8), np.float32)
    for k in range(n):
        r, c = rng.integers(0, 8, 2)
        imgs[k, r, :] = 1.0
        imgs[k, :, c] = 0.8
    imgs = np.clip(imgs + 0.1 * rng.random((n, 8, 8)), 0.0, 1.0)
    return imgs[:, None].astype(np.float32)


def init_from_numpy(model, seed):
    rng = np.random.default_rng(seed)
    state = {}
    for k, v in model.state_dict().items():
        state[k] = torch.from_numpy(rng.uniform(-0.3, 0.3, tuple(v.shape)).astype(np.float32))
    model.load_state_dict(state)


def main(steps=10, device=None, seed=1):
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    torch.manual_seed(seed)
    batch_size, log_interval = 16, 5
    x = synthetic_images(batch_size * steps + 64, seed)
    train_set = torch.utils.data.TensorDataset(torch.from_numpy(x[:-64]), torch.zeros(len(x) - 64))
    test_set = torch.utils.data.TensorDataset(torch.from_numpy(x[-64:]), torch.zeros(64))
    train_loader = torch.utils.data.DataLoader(train_set, batch_size=batch_size, shuffle=False)
    test_loader = torch.utils.data.DataLoader(test_set, batch_size=batch_size, shuffle=False)

    model = VAE()
    init_from_numpy(model, seed)
    model = model.to(device)
    optimizer = optim.Adam(model.parameters(), lr=1e-2)
    scheduler = optim.lr_scheduler.ReduceLROnPlateau(
        optimizer, mode="min", factor=0.5, patience=0, threshold=0.1
    )

    losses = []
    model.train()
    train_loss = 0
    for batch_idx, (data, _) in enumerate(train_loader):
        data = data.to(device)
        optimizer.zero_grad()
        recon_batch, mu, logvar = model(data)
        loss = loss_function(recon_batch, data, mu, logvar)
        loss.backward()
        train_loss += loss.item()
        optimizer.step()
        losses.append(loss.item() / len(data))
        if batch_idx % log_interval == log_interval - 1:
            model.eval()
            test_loss = 0
            with torch.no_grad():
                for data, _ in test_loader:
                    data = data.to(device)
                    recon_batch, mu, logvar = model(data)
                    test_loss += loss_function(recon_batch, data, mu, logvar).item()
            test_loss /= len(test_loader.dataset)
            scheduler.step(test_loss)
            model.train()

    with torch.no_grad():
        sample = torch.randn(8, 4).to(device)
        sample = model.decode(sample).cpu()
        assert tuple(sample.view(8, 1, 8, 8).shape) == (8, 1, 8, 8)
        assert bool(((sample >= 0) & (sample <= 1)).all())
    return losses


if __name__ == "__main__":
    print(main())
