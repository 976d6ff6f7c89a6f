"""Seeded random numbers: a ``Generator`` is a (seed, offset) pair.

Random kernels are counter-based: a backend turns (seed, offset) into numbers, the
same pair always giving the same numbers. Each draw advances the offset past what
it used, so a seed fixes the whole sequence of draws on every run.
"""

from __future__ import annotations

import threading
from typing import Any

DEFAULT_SEED = 67280421310721  # PyTorch's, so an unseeded program is still repeatable


class Generator:
    """``rtxcore.Generator().manual_seed(0)``: pass as ``generator=`` to random ops."""

    def __init__(self, device: Any = "cpu") -> None:
        self.device = device
        self._seed = DEFAULT_SEED
        self._offset = 0
        self._lock = threading.Lock()

    def manual_seed(self, seed: int) -> "Generator":
        seed = int(seed)
        if seed < 0:
            seed &= (1 << 64) - 1
        with self._lock:
            self._seed = seed
            self._offset = 0
        return self

    def seed(self) -> int:
        import secrets

        s = secrets.randbits(63)
        self.manual_seed(s)
        return s

    def initial_seed(self) -> int:
        return self._seed

    def get_state(self) -> tuple[int, int]:
        return (self._seed, self._offset)

    def set_state(self, state: tuple[int, int]) -> "Generator":
        self._seed, self._offset = int(state[0]), int(state[1])
        return self

    def take(self, n: int) -> tuple[int, int]:
        """Reserve ``n`` numbers: returns the (seed, offset) a kernel should use."""
        with self._lock:
            off = self._offset
            # round up so consecutive draws never share a counter block
            self._offset += max(4, (n + 3) // 4 * 4)
            return self._seed, off


default_generator = Generator()


def manual_seed(seed: int) -> Generator:
    """Seed the default generator (all devices draw from it)."""
    return default_generator.manual_seed(seed)


def seed() -> int:
    return default_generator.seed()


def initial_seed() -> int:
    return default_generator.initial_seed()


def get_rng_state() -> tuple[int, int]:
    return default_generator.get_state()


def set_rng_state(state: tuple[int, int]) -> None:
    default_generator.set_state(state)
