"""Many threads on one device get the same numbers as one thread.

A short GIL switch interval makes Python switch threads between almost every
bytecode, so a launcher shared between threads (arguments set by one thread,
enqueued by another) shows up as wrong sums within a few hundred ops."""

from __future__ import annotations

import sys
import threading
from typing import Any, Callable

import numpy as np
import pytest

import rtxcore as rc

THREADS = 8


@pytest.fixture
def short_switch_interval() -> Any:
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(old)


def _run_threads(work: Callable[[int], Any]) -> list[Any]:
    results: list[Any] = [None] * THREADS
    errors: list[BaseException] = []

    def target(i: int) -> None:
        try:
            results[i] = work(i)
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=target, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


def test_threads_sharing_a_device_get_exact_elementwise_and_reduction_results(
        device: str, short_switch_interval: None) -> None:
    def work(i: int) -> list[float]:
        x = rc.full((1000,), float(i), device=device)
        return [(x * 2 + 1).sum().item() for _ in range(150)]

    for i, sums in enumerate(_run_threads(work)):
        assert sums == [(2 * i + 1) * 1000.0] * 150, f"thread {i}: {sorted(set(sums))}"


def test_threads_sharing_a_device_get_exact_matmuls_and_indexing(
        device: str, short_switch_interval: None) -> None:
    rng = np.random.default_rng(0)
    a = rng.integers(-3, 4, (THREADS, 17, 9)).astype(np.float32)
    b = rng.integers(-3, 4, (THREADS, 9, 5)).astype(np.float32)
    idx = rng.integers(0, 17, 11)

    def work(i: int) -> list[np.ndarray]:
        x, y = rc.tensor(a[i], device=device), rc.tensor(b[i], device=device)
        j = rc.tensor(idx, device=device)
        return [(x @ y)[j].numpy() for _ in range(40)]

    for i, outs in enumerate(_run_threads(work)):
        want = (a[i] @ b[i])[idx]  # small integers: exact in float32
        for got in outs:
            np.testing.assert_array_equal(got, want)


def test_threads_training_on_one_device_get_the_single_thread_gradients(
        device: str, short_switch_interval: None) -> None:
    nn = rc.nn
    rng = np.random.default_rng(1)
    data = rng.standard_normal((THREADS, 32, 6)).astype(np.float32)
    target = rng.standard_normal((THREADS, 32, 1)).astype(np.float32)

    def grads(i: int) -> list[np.ndarray]:
        rc.manual_seed(0)  # every thread's model starts from the same weights
        model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 1))
        with rc.no_grad():
            for k, p in enumerate(model.parameters()):
                p.copy_(rc.tensor(np.linspace(-0.5, 0.5, p.numel(), dtype=np.float32)
                                  .reshape(tuple(p.shape)) * (k + 1)))
        model.to(device)
        x, y = rc.tensor(data[i], device=device), rc.tensor(target[i], device=device)
        out: list[np.ndarray] = []
        for _ in range(5):
            model.zero_grad()
            nn.functional.mse_loss(model(x), y).backward()
            out = [p.grad.numpy() for p in model.parameters()]
        return out

    want = [grads(i) for i in range(THREADS)]  # one thread at a time
    for i, got in enumerate(_run_threads(grads)):
        for g, w in zip(got, want[i]):
            np.testing.assert_array_equal(g, w)
