"""The official PyTorch MNIST example (pytorch/examples/mnist), shrunk: a CNN with
Conv2d / max_pool2d / Dropout / log_softmax trained by Adadelta with StepLR,
fed by a DataLoader over a TensorDataset of synthetic 12x12 digits."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self, dropout=(0.25, 0.5)):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, 1)
        self.conv2 = nn.Conv2d(8, 16, 3, 1)
        self.dropout1 = nn.Dropout(dropout[0])
        self.dropout2 = nn.Dropout(dropout[1])
        self.fc1 = nn.Linear(256, 32)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x):
        x = self.conv1(x)
        x = F.relu(x)
        x = self.conv2(x)
        x = F.relu(x)
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = self.fc1(x)
        x = F.relu(x)
        x = self.dropout2(x)
        x = self.fc2(x)
        output = F.log_softmax(x, dim=1)
        return output


def train(model, device, train_loader, optimizer, losses):
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())


def test(model, device, test_loader):
    model.eval()
    test_loss = 0
    correct = 0
    with torch.no_grad():
        for data, target in test_loader:
            data, target = data.to(device), target.to(device)
            output = model(data)
            test_loss += F.nll_loss(output, target, reduction="sum").item()
            pred = output.argmax(dim=1, keepdim=True)
            correct += pred.eq(target.view_as(pred)).sum().item()
    test_loss /= len(test_loader.dataset)
    return test_loss, correct / len(test_loader.dataset)


def synthetic_digits(n, seed):
    """Ten fixed random 12x12 prototypes plus noise, normalised like MNIST."""
    rng = np.random.default_rng(seed)
    protos = (rng.random((10, 12, 12)) > 0.6).astype(np.float32)
    y = rng.integers(0, 10, n)
    x = protos[y] + 0.3 * rng.standard_normal((n, 12, 12)).astype(np.float32)
    x = (x - 0.1307) / 0.3081
    return x[:, None].astype(np.float32), y.astype(np.int64)


def init_from_numpy(model, seed):
    """PyTorch's default uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)) init, drawn by NumPy."""
    rng = np.random.default_rng(seed)
    state = model.state_dict()
    for name, value in state.items():
        shape = tuple(value.shape)
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else None
        if fan_in is None:  # a bias: fan_in of its weight
            fan_in = int(np.prod(state[name.replace("bias", "weight")].shape[1:]))
        bound = 1.0 / np.sqrt(fan_in)
        state[name] = torch.from_numpy(rng.uniform(-bound, bound, shape).astype(np.float32))
    model.load_state_dict(state)


def main(steps=12, device=None, seed=1, dropout=(0.0, 0.0)):
    use_accel = torch.accelerator.is_available()
    if device is None:
        device = torch.accelerator.current_accelerator() if use_accel else torch.device("cpu")
    device = torch.device(device)
    torch.manual_seed(seed)
    batch_size, epochs = 32, 3
    train_kwargs = {"batch_size": batch_size}
    test_kwargs = {"batch_size": 100}
    if use_accel and device.type != "cpu":
        accel_kwargs = {"num_workers": 1, "pin_memory": True, "shuffle": True}
        train_kwargs.update(accel_kwargs)
        test_kwargs.update(accel_kwargs)

    n_train = batch_size * max(1, -(-steps // epochs))
    x, y = synthetic_digits(n_train + 200, seed)
    dataset1 = TensorDataset(torch.from_numpy(x[:n_train]), torch.from_numpy(y[:n_train]))
    dataset2 = TensorDataset(torch.from_numpy(x[n_train:]), torch.from_numpy(y[n_train:]))
    train_loader = DataLoader(dataset1, **train_kwargs)
    test_loader = DataLoader(dataset2, **test_kwargs)

    model = Net(dropout)
    init_from_numpy(model, seed)
    model = model.to(device)
    optimizer = optim.Adadelta(model.parameters(), lr=1.0)

    scheduler = StepLR(optimizer, step_size=1, gamma=0.7)
    losses = []
    for epoch in range(1, epochs + 1):
        train(model, device, train_loader, optimizer, losses)
        test_loss, accuracy = test(model, device, test_loader)
        scheduler.step()
    assert 0.0 <= accuracy <= 1.0 and test_loss == test_loss
    return losses[:steps]


if __name__ == "__main__":
    print(main())
