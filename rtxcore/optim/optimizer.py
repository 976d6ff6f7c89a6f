"""``Optimizer``, the base of every optimizer (as ``torch.optim.Optimizer``), and what they share.

Parameters live in ``param_groups`` (a list of dicts: ``'params'`` plus that
group's options); per-parameter state lives in ``state`` (a dict keyed by the
parameter tensor). ``state_dict()`` replaces parameters by their index, in
PyTorch's format, so a checkpoint loads into a fresh optimizer built on the
same parameters in the same order.

Subclasses implement ``step`` with rtxcore's in-place ops under ``no_grad``, on
the parameters' own device: their state tensors live next to the parameters.
What PyTorch's optimizers each write again lives here once: the constructor's
checks and switches (``_options``), the options an old checkpoint lacks
(``_restored_options``), the per-parameter preamble of a step (``_grads``:
gradients, state made on first use, step counts, ``maximize`` and weight decay)
and the step's grad-mode handling (``_with_grad``), so that each optimizer's
file holds its update rule.
"""

from __future__ import annotations

import copy
from collections import defaultdict
from collections.abc import Callable
from itertools import chain
from typing import Any

from ..autograd.grad_mode import _state as _grad_state
from ..tensor import Tensor
from ..dtype import float32
from ..ops.creation import full, zeros, zeros_like

__all__ = ["Optimizer", "required"]


class _RequiredParameter:
    """Singleton for a default that each parameter group must supply."""

    def __repr__(self) -> str:
        return "<required parameter>"


required = _RequiredParameter()


def _typename(obj: Any) -> str:
    t = type(obj)
    mod = t.__module__
    return t.__qualname__ if mod in (None, "builtins") else f"{mod}.{t.__qualname__}"


def _not_iterable(params: Any) -> TypeError:
    return TypeError("params argument given to the optimizer should be an iterable of Tensors "
                     f"or dicts, but got {_typename(params)}")


def _refuse_sets(params: Any) -> None:
    """TypeError for a set of parameters: its order changes between runs."""
    if isinstance(params, (set, frozenset)):
        raise TypeError(
            "optimizer parameters need to be organized in ordered collections, but the "
            "ordering of tensors in sets will change between runs. Please use a list instead."
        )


def _check_nonneg(value: Any, what: str) -> None:
    """``ValueError(f"Invalid {what}: {value}")`` unless ``0 <= value`` (NaN fails)."""
    if not 0.0 <= value:
        raise ValueError(f"Invalid {what}: {value}")


_OPTION_NAMES = {"lr": "learning rate", "eps": "epsilon value"}


def _check_nonneg_options(options: dict[str, Any], *keys: str) -> None:
    """``_check_nonneg`` on each of ``options[key]``, in order, named as PyTorch's
    messages name them ("learning rate", "epsilon value", else "<key> value")."""
    for key in keys:
        _check_nonneg(options[key], _OPTION_NAMES.get(key, f"{key} value"))


class Optimizer:
    """Base class for all optimizers.

    Args:
        params: an iterable of tensors, of ``(name, tensor)`` pairs, or of dicts
            (parameter groups: ``{'params': [...], 'lr': ...}``) whose options
            override ``defaults`` for that group.
        defaults: the default value of each option.
    """

    _param_shaped_state: tuple[str, ...] = ()
    """State entries with the parameter's shape (load_state_dict checks them)."""

    _restored_options: dict[str, Any] = {}
    """Options a group saved before they existed takes on load (``__setstate__``:
    pickles and ``load_state_dict``), as PyTorch's ``__setstate__`` fills them in."""

    def __init__(self, params: Any, defaults: dict[str, Any]) -> None:
        self.defaults = defaults
        if isinstance(params, Tensor):
            raise _not_iterable(params)
        _refuse_sets(params)
        try:
            param_groups = list(params)
        except TypeError:
            raise _not_iterable(params) from None
        if len(param_groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]

        self.state: defaultdict[Tensor, dict[str, Any]] = defaultdict(dict)
        self.param_groups: list[dict[str, Any]] = []
        for group in param_groups:
            self.add_param_group(group)

    # -- pickling and display ---------------------------------------------------------

    def __getstate__(self) -> dict[str, Any]:
        return {"defaults": self.defaults, "state": self.state, "param_groups": self.param_groups}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if self._restored_options:
            for group in self.param_groups:
                for name, value in self._restored_options.items():
                    group.setdefault(name, value)

    def __repr__(self) -> str:
        out = self.__class__.__name__ + " ("
        for i, group in enumerate(self.param_groups):
            out += f"\nParameter Group {i}\n"
            for key in sorted(group.keys()):
                if key != "params":
                    out += f"    {key}: {group[key]}\n"
        return out + ")"

    # -- parameter groups -------------------------------------------------------------

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a parameter group (a dict with ``'params'`` and any options; missing
        options take the optimizer's defaults)."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {_typename(param_group)}")
        if "params" not in param_group:
            raise ValueError("a parameter group needs a 'params' entry")
        params = param_group["params"]
        if isinstance(params, Tensor):
            params = [params]
        else:
            _refuse_sets(params)
            params = list(params)

        tensors: list[Any] = []
        names: list[Any] = []
        for p in params:
            if isinstance(p, tuple) and len(p) == 2 and not isinstance(p[0], Tensor):
                names.append(p[0])
                tensors.append(p[1])
            else:
                tensors.append(p)
        if names:
            if len(names) != len(tensors):
                raise ValueError(
                    "all optimizer params should be with/without names. "
                    "Some param names are missing"
                )
            param_group["param_names"] = names
        param_group["params"] = tensors

        for p in tensors:
            if not isinstance(p, Tensor):
                raise TypeError(
                    f"optimizer can only optimize Tensors, but one of the params is {_typename(p)}"
                )
            if not (p.is_leaf or p.retains_grad):
                raise ValueError("can't optimize a non-leaf Tensor")

        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError(
                    "parameter group didn't specify a value of required optimization "
                    f"parameter {name}"
                )
            param_group.setdefault(name, default)
        self._check_group(param_group)

        ids = {id(p) for p in tensors}
        if len(ids) != len(tensors):
            raise ValueError(
                "optimizer contains a parameter group with duplicate parameters "
                "(each parameter may be listed once)"
            )
        for group in self.param_groups:
            if ("param_names" in param_group) != ("param_names" in group):
                txt = "with names" if "param_names" in param_group else "without names"
                raise ValueError(
                    "all optimizer param groups should be with/without names. "
                    f"cannot add param group {txt} to the optimizer"
                )
            if any(id(p) in ids for p in group["params"]):
                raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)

    @staticmethod
    def _validate(group: dict[str, Any]) -> None:
        """Check a group's hyperparameters (each optimizer supplies its own)."""

    def _options(self, optimizer: str, options: dict[str, Any], **switches: Any) -> dict[str, Any]:
        """A constructor's ``defaults``: ``options`` checked (``_validate``), their
        ``betas`` as Python numbers, then PyTorch's implementation ``switches``
        (``implementation_options``: ``optimizer`` names the class in its errors)."""
        self._validate(options)
        if "betas" in options:
            options["betas"] = tuple(_scalar(b) for b in options["betas"])
        options.update(implementation_options(optimizer, **switches))
        return options

    def _check_group(self, group: dict[str, Any]) -> None:
        self._validate(group)

    # -- gradients and steps ----------------------------------------------------------

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of every parameter: to None (the default), or to
        zeros in place when ``set_to_none=False``."""
        for group in self.param_groups:
            for p in group["params"]:
                g = p.grad
                if g is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    if g.grad_fn is not None:
                        g.detach_()
                    elif g.requires_grad:
                        g.requires_grad_(False)
                    g.zero_()

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Perform one optimization step. ``closure`` re-evaluates the model and
        returns the loss (it runs with grad enabled); optional for most optimizers."""
        return self._run_step(closure, self._update)

    def _update(self, group: dict[str, Any]) -> None:
        """Update one parameter group's parameters (each optimizer's own rule)."""
        raise NotImplementedError

    def _grads(self, group: dict[str, Any],
               init: Callable[[dict[str, Any], Tensor], None] | None = None,
               coupled_weight_decay: bool = True, raw: bool = False, *,
               zeroed: tuple[str, ...] = ()) -> Any:
        """The preamble PyTorch's optimizers share, for each parameter of ``group``
        that has a gradient: its state, made on first use (``step`` 0, then
        ``init(state, param)``, then a ``zeros_like(param)`` entry for each name
        in ``zeroed``), the step counted, the gradient negated under ``maximize``
        and, with ``coupled_weight_decay``, ``weight_decay * param`` added to it.
        Yields (param, grad, state, step). ``raw``: the gradient as it is (the
        caller negates it and adds weight decay)."""
        wd = group["weight_decay"] if coupled_weight_decay and not raw else 0
        maximize = group["maximize"] and not raw
        state = self.state
        # capturable, or stepped inside a compiled function: the count is a
        # tensor (as torch.compile keeps it), so the graph replays every step
        capturable = group.get("capturable") or _tracing()
        for p in group["params"]:
            g = p.grad
            if g is None:
                continue
            st = state[p]
            if not st:
                # capturable: the count is a tensor on the parameter's device, counted
                # in place, so a traced step (rtxcore.jit) advances it on replay
                st["step"] = zeros((), dtype=float32, device=p.device) if capturable else 0
                if init is not None:
                    init(st, p)
                for name in zeroed:
                    st[name] = zeros_like(p)
            step = st["step"]
            if capturable and not isinstance(step, Tensor):  # loaded, or counted, as a number
                step = st["step"] = full((), float(step), dtype=float32, device=p.device)
            if isinstance(step, Tensor):
                step.add_(1)
            else:
                step = st["step"] = step + 1
            yield p, _grad_term(p, g, maximize, wd), st, step

    def _run_step(self, closure: Callable[[], Any] | None,
                  update: Callable[[dict[str, Any]], None]) -> Any:
        """What every ``step`` does: the closure (with grad enabled), then
        ``update(group)`` for each parameter group with recording off."""
        loss = None if closure is None else _with_grad(True, closure)
        self._check_state_devices()
        _with_grad(False, self._update_groups, update)
        return loss

    def _update_groups(self, update: Callable[[dict[str, Any]], None]) -> None:
        for group in self.param_groups:
            update(group)

    def _check_state_devices(self) -> None:
        """Refuse a step, before anything changes, when a parameter's state tensors
        are on another device than the parameter (after ``model.to(dev)``)."""
        for gi, group in enumerate(self.param_groups):
            for pi, p in enumerate(group["params"]):
                st = self.state.get(p) if p.grad is not None else None
                for name, v in (st or {}).items():
                    if isinstance(v, Tensor) and v.device != p.device:
                        raise RuntimeError(
                            f"optimizer state {name!r} of parameter {pi} in group {gi} is on "
                            f"{v.device}, but the parameter is on {p.device}; after moving the "
                            "model, move the optimizer's state too: "
                            "optimizer.load_state_dict(optimizer.state_dict())"
                        )

    # -- checkpoints ------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """The optimizer's state, in PyTorch's format::

            {'state': {index: {...per-parameter state...}},
             'param_groups': [{...options..., 'params': [indices]}]}

        Parameters are numbered in order across the groups. The state tensors are
        the optimizer's own (not copies): save or deep-copy the dict to keep it.
        """
        mapping: dict[int, int] = {}
        start = 0

        def pack(group: dict[str, Any]) -> dict[str, Any]:
            nonlocal start
            packed = {k: v for k, v in group.items() if k != "params"}
            for i, p in enumerate(group["params"], start):
                mapping.setdefault(id(p), i)
            packed["params"] = [mapping[id(p)] for p in group["params"]]
            start += len(packed["params"])
            return packed

        groups = [pack(g) for g in self.param_groups]
        state = {(mapping[id(k)] if isinstance(k, Tensor) else k): v for k, v in self.state.items()}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load a state from ``state_dict()`` (of an optimizer of the same kind on
        parameters of the same shapes, in the same groups and order).

        State tensors are copied onto each parameter's device, floating ones cast
        to its dtype; the step counts stay numbers.
        """
        if not isinstance(state_dict, dict) or "state" not in state_dict \
                or "param_groups" not in state_dict:
            raise ValueError(
                "an optimizer state dict is a dict with 'state' and 'param_groups' entries"
            )
        groups = self.param_groups
        saved_groups = copy.deepcopy(state_dict["param_groups"])
        if len(groups) != len(saved_groups):
            raise ValueError(
                "loaded state dict has a different number of parameter groups "
                f"({len(saved_groups)}, the optimizer has {len(groups)})"
            )
        for i, (g, sg) in enumerate(zip(groups, saved_groups)):
            if len(g["params"]) != len(sg["params"]):
                raise ValueError(
                    "loaded state dict contains a parameter group that doesn't match the "
                    f"size of optimizer's group (group {i}: {len(sg['params'])} parameters "
                    f"saved, {len(g['params'])} in the optimizer)"
                )
        id_map = dict(zip(chain.from_iterable(g["params"] for g in saved_groups),
                          chain.from_iterable(g["params"] for g in groups)))

        def cast(param: Tensor, value: Any, key: Any = None) -> Any:
            if isinstance(value, Tensor):
                if key == "step":
                    return _step_number(value)
                if param.is_floating_point() and value.is_floating_point():
                    return value.to(device=param.device, dtype=param.dtype, copy=True)
                return value.to(device=param.device, copy=True)
            if isinstance(value, dict):
                return {k: cast(param, v, k) for k, v in value.items()}
            if isinstance(value, (list, tuple)):
                return type(value)(cast(param, v) for v in value)
            return value

        state: defaultdict[Any, dict[str, Any]] = defaultdict(dict)
        for k, v in state_dict["state"].items():
            if k in id_map:
                param = id_map[k]
                if isinstance(v, dict):
                    for name, t in v.items():
                        if name in self._param_shaped_state and isinstance(t, Tensor) \
                                and tuple(t.shape) != tuple(param.shape):
                            raise ValueError(
                                f"loaded state dict's state {name!r} of parameter {k} has shape "
                                f"{tuple(t.shape)}, but the parameter has shape "
                                f"{tuple(param.shape)}"
                            )
                state[param] = cast(param, v)
            else:
                state[k] = v

        def update_group(group: dict[str, Any], new_group: dict[str, Any]) -> dict[str, Any]:
            new_group["params"] = group["params"]
            if "param_names" in group and "param_names" not in new_group:
                new_group["param_names"] = group["param_names"]
            return new_group

        param_groups = [update_group(g, ng) for g, ng in zip(groups, saved_groups)]
        self.__setstate__({"state": state, "param_groups": param_groups})


def _grad_term(p: Tensor, g: Tensor, maximize: bool, weight_decay: float) -> Tensor:
    """The gradient an update rule uses: ``g`` negated under ``maximize``, plus
    ``weight_decay * p`` when that is not 0 (new tensors; ``g`` is left alone)."""
    if maximize:
        g = -g
    if weight_decay != 0:
        g = g.add(p, alpha=weight_decay)
    return g


def _with_grad(enabled: bool, fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` with gradient recording ``enabled`` (a closure records; an
    update does not), the mode put back after, also on an error."""
    prev = _grad_state.enabled
    _grad_state.enabled = enabled
    try:
        return fn(*args)
    finally:
        _grad_state.enabled = prev


def _tracing() -> bool:
    from .._tracing import is_tracing

    return is_tracing()


def _step_number(value: Tensor) -> Any:
    """A saved step count (a tensor in PyTorch's checkpoints) as a Python number."""
    v = value.item()
    return int(v) if float(v).is_integer() else v


def implementation_options(optimizer: str, **options: Any) -> dict[str, Any]:
    """PyTorch's switches between implementations of one update rule
    (``foreach``, ``fused``, ``capturable``, ``differentiable``: each optimizer
    passes those PyTorch's has), for the param groups. Adam and AdamW run a
    group's step on flat buffers (``_multi``: PyTorch's ``foreach`` idea, the
    same numbers as the per-parameter loop) unless ``foreach=False`` or
    ``capturable=True``; the other optimizers have one implementation (a pass of
    whole-tensor ops per parameter). The switches are kept, as PyTorch keeps
    them, so scripts that pass or inspect them run. ``differentiable=True``
    (differentiating through the step) is refused."""
    if options.get("differentiable"):
        raise NotImplementedError(f"{optimizer}: differentiable=True (differentiating through "
                                  "the optimizer step) is not supported by rtxcore")
    if options.get("fused") and options.get("foreach"):
        raise RuntimeError("`fused` and `foreach` cannot be `True` together.")
    return options


def _scalar(v: Any) -> Any:
    """A hyperparameter as a Python number (a 0-d tensor lr is read once per step)."""
    return v.item() if isinstance(v, Tensor) else v


def _hyper(group: dict[str, Any], *names: str) -> tuple[Any, ...]:
    """A step's hyperparameters: ``group[name]`` for each of ``names``, ``lr`` as
    a Python number (``_scalar``)."""
    return tuple([_scalar(group[n]) if n == "lr" else group[n] for n in names])


def _lerp_(start: Tensor, end: Tensor, weight: float) -> None:
    """``start.lerp_(end, weight)`` in PyTorch's two-sided form, in three or four
    primitive kernels (rtxcore's ``lerp_`` computes out of place and copies back)."""
    d = end.sub(start)
    if weight < 0.5:
        start.add_(d.mul_(weight))
    else:
        start.copy_(d.mul_(weight - 1).add_(end))
