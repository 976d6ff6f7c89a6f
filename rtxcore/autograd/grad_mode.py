"""Whether ops record: a per-thread switch, and the context managers that flip it.

Each thread starts with recording on. ``no_grad`` in one thread never changes what
another thread records.
"""

from __future__ import annotations

import functools
import threading
from typing import Any, Callable


class _State(threading.local):
    enabled = True  # class defaults: every new thread starts here
    inference = False


_state = _State()


def is_grad_enabled() -> bool:
    return _state.enabled


def is_inference_mode_enabled() -> bool:
    return _state.inference


class _Mode:
    """Base of the grad-mode switches: each is a context manager and a decorator."""

    def _apply(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> None:
        self._prev = (_state.enabled, _state.inference)
        self._apply()

    def __exit__(self, *exc: Any) -> None:
        _state.enabled, _state.inference = self._prev

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        apply = self._apply

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            prev = (_state.enabled, _state.inference)
            apply()
            try:
                return fn(*args, **kwargs)
            finally:
                _state.enabled, _state.inference = prev

        return wrapper


class _BareDecorator(_Mode):
    """Also usable bare, as in PyTorch: ``@no_grad`` as well as ``@no_grad()``."""

    def __new__(cls, orig_func: Callable[..., Any] | None = None) -> Any:
        if orig_func is None:
            return super().__new__(cls)
        return cls()(orig_func)


class no_grad(_BareDecorator):
    """Ops inside record nothing: their results do not require grad."""

    def _apply(self) -> None:
        _state.enabled = False


class enable_grad(_BareDecorator):
    """Turn recording back on inside a ``no_grad`` block."""

    def _apply(self) -> None:
        _state.enabled = True


class set_grad_enabled(_Mode):
    """``set_grad_enabled(False)`` is ``no_grad``. As in PyTorch it takes effect
    when called, so ``set_grad_enabled(False)`` on its own line switches the mode
    until switched back; in a ``with`` the mode is restored at the end."""

    def __init__(self, mode: bool) -> None:
        self._mode = bool(mode)
        self._prev = (_state.enabled, _state.inference)
        self._apply()

    def _apply(self) -> None:
        _state.enabled = self._mode

    def __enter__(self) -> None:
        self._apply()  # the state to restore was saved when called

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        # as a decorator the mode applies inside ``fn`` only: undo the switch made
        # when called
        _state.enabled, _state.inference = self._prev
        return super().__call__(fn)


class inference_mode(_Mode):
    """``no_grad`` for pure inference. rtxcore has no separate inference tensors,
    so inside it nothing records, as under ``no_grad``; ``inference_mode(False)``
    leaves the surrounding mode as it is."""

    def __new__(cls, mode: Any = True) -> Any:
        if isinstance(mode, bool):
            return super().__new__(cls)
        return cls()(mode)  # bare ``@inference_mode``

    def __init__(self, mode: bool = True) -> None:
        self._on = bool(mode)

    def _apply(self) -> None:
        if self._on:
            _state.enabled = False
            _state.inference = True
        else:
            _state.inference = False
