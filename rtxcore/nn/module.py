"""``Module``: parameters, buffers and submodules registered by attribute, as in PyTorch."""

from __future__ import annotations

from collections import OrderedDict, namedtuple
from typing import Any, Callable, Iterator

from ..tensor import Tensor
from .parameter import Parameter

_IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])


class _Handle:
    """What ``register_forward_hook`` returns: ``handle.remove()``."""

    def __init__(self, hooks: dict[int, Any], key: int) -> None:
        self._hooks, self._key = hooks, key

    def remove(self) -> None:
        self._hooks.pop(self._key, None)


class _Registry(OrderedDict):
    """A module's parameters, buffers or submodules: an OrderedDict that counts
    every change, in any module (``Module.structure_version()``), so a cache
    keyed on a model's structure (``rtxcore.compile``'s guards) checks one
    number instead of walking the model on every call."""

    def __setitem__(self, key: Any, value: Any) -> None:
        _version[0] += 1
        super().__setitem__(key, value)

    def __delitem__(self, key: Any) -> None:
        _version[0] += 1
        super().__delitem__(key)

    def pop(self, *args: Any) -> Any:
        _version[0] += 1
        return super().pop(*args)

    def popitem(self, last: bool = True) -> Any:
        _version[0] += 1
        return super().popitem(last)

    def clear(self) -> None:
        _version[0] += 1
        super().clear()

    def update(self, *args: Any, **kwargs: Any) -> None:
        _version[0] += 1
        super().update(*args, **kwargs)

    def setdefault(self, key: Any, default: Any = None) -> Any:
        _version[0] += 1
        return super().setdefault(key, default)

    def move_to_end(self, key: Any, last: bool = True) -> None:
        _version[0] += 1
        super().move_to_end(key, last)

    def __reduce__(self) -> Any:  # pickles and copies as a plain OrderedDict would
        return (type(self), (list(self.items()),))


_version = [0]


def structure_version() -> int:
    """A number that changes whenever any module's parameters, buffers or
    submodules are set, replaced or removed."""
    return _version[0]


class Module:
    """Base class of every layer and model. Subclasses set parameters, buffers and
    submodules as attributes in ``__init__`` and define ``forward``."""

    training: bool
    _hook_id = 0

    def __init__(self) -> None:
        d = self.__dict__
        d["training"] = True
        d["_parameters"] = _Registry()
        d["_buffers"] = _Registry()
        d["_non_persistent"] = set()
        d["_modules"] = _Registry()
        d["_forward_hooks"] = OrderedDict()
        d["_forward_pre_hooks"] = OrderedDict()

    # -- registration ----------------------------------------------------------------

    def __setattr__(self, name: str, value: Any) -> None:
        d = self.__dict__
        if "_parameters" not in d:
            if isinstance(value, (Parameter, Module)):
                raise AttributeError(
                    f"cannot assign {type(value).__name__} '{name}' before Module.__init__() call"
                )
            object.__setattr__(self, name, value)
            return
        params, buffers, modules = d["_parameters"], d["_buffers"], d["_modules"]
        if isinstance(value, Parameter):
            self._drop(name, keep="_parameters")
            params[name] = value
        elif isinstance(value, Module):
            self._drop(name, keep="_modules")
            modules[name] = value
        elif name in params:
            if value is not None:
                raise TypeError(
                    f"cannot assign '{type(value).__name__}' as parameter '{name}' "
                    "(rtxcore.nn.Parameter or None expected)"
                )
            params[name] = None
        elif name in modules:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as child module '{name}' (Module or None expected)")
            modules[name] = None
        elif name in buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{type(value).__name__}' as buffer '{name}' (Tensor or None expected)")
            buffers[name] = value
        else:
            object.__setattr__(self, name, value)

    def _drop(self, name: str, keep: str | None = None) -> None:
        """Remove ``name`` from the attributes and the registries, but for the
        registry ``keep`` (a value set again there keeps its place in the order,
        as in PyTorch: ``model.layers[1] = new`` stays the second layer)."""
        d = self.__dict__
        d.pop(name, None)
        for reg in ("_parameters", "_buffers", "_modules"):
            if reg != keep:
                d[reg].pop(name, None)
        d["_non_persistent"].discard(name)

    def __getattr__(self, name: str) -> Any:
        d = self.__dict__
        for reg in ("_parameters", "_buffers", "_modules"):
            r = d.get(reg)
            if r is not None and name in r:
                return r[name]
        from .._unbuilt import missing_attribute

        raise missing_attribute("Module", name, self)

    def __delattr__(self, name: str) -> None:
        d = self.__dict__
        for reg in ("_parameters", "_buffers", "_modules"):
            if name in d[reg]:
                del d[reg][name]
                d["_non_persistent"].discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(self._parameters) | set(self._buffers)
                      | set(self._modules))

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{type(param).__name__}' object to parameter '{name}' (rtxcore.nn.Parameter or None required)")
        self._register("_parameters", name, param)

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """A tensor that is part of the module's state but not a parameter (e.g.
        BatchNorm's running mean): moved by ``to()``, saved by ``state_dict()``
        unless ``persistent=False``."""
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' (Tensor or None required)")
        self._register("_buffers", name, tensor)
        if not persistent:
            self._non_persistent.add(name)

    def add_module(self, name: str, module: Module | None) -> None:
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        self._register("_modules", name, module)

    register_module = add_module

    def _register(self, registry: str, name: str, value: Any) -> None:
        """Set ``name`` in one registry, after checking the name and dropping
        whatever held it before (attribute, parameter, buffer or submodule)."""
        if not isinstance(name, str):
            raise TypeError(f"name should be a string, got {type(name).__name__}")
        if "." in name or not name:
            raise KeyError(f"name can't contain \".\" or be empty, got {name!r}")
        self._drop(name, keep=registry)
        self.__dict__[registry][name] = value

    # -- calling -------------------------------------------------------------------------

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        d = self.__dict__
        if d["_forward_pre_hooks"]:
            for hook in list(d["_forward_pre_hooks"].values()):
                res = hook(self, args)
                if res is not None:
                    args = res if isinstance(res, tuple) else (res,)
        compiled = d.get("_compiled_forward")  # after model.compile(): hooks stay eager
        out = self.forward(*args, **kwargs) if compiled is None else compiled(*args, **kwargs)
        if d["_forward_hooks"]:
            for hook in list(d["_forward_hooks"].values()):
                res = hook(self, args, out)
                if res is not None:
                    out = res
        return out

    def register_forward_hook(self, hook: Callable[..., Any]) -> _Handle:
        """``hook(module, inputs, output) -> output or None`` after each forward."""
        Module._hook_id += 1
        self._forward_hooks[Module._hook_id] = hook
        return _Handle(self._forward_hooks, Module._hook_id)

    def register_forward_pre_hook(self, hook: Callable[..., Any]) -> _Handle:
        """``hook(module, inputs) -> inputs or None`` before each forward."""
        Module._hook_id += 1
        self._forward_pre_hooks[Module._hook_id] = hook
        return _Handle(self._forward_pre_hooks, Module._hook_id)

    # -- traversal ----------------------------------------------------------------------

    def named_modules(self, memo: set[int] | None = None, prefix: str = "",
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Module]]:
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, m in self._modules.items():
            if m is not None:
                yield from m.named_modules(memo, f"{prefix}.{name}" if prefix else name, remove_duplicate)

    def modules(self) -> Iterator[Module]:
        for _, m in self.named_modules():
            yield m

    def named_children(self) -> Iterator[tuple[str, Module]]:
        seen: set[int] = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in seen:
                seen.add(id(m))
                yield name, m

    def children(self) -> Iterator[Module]:
        for _, m in self.named_children():
            yield m

    def _named(self, reg: str, prefix: str, recurse: bool) -> Iterator[tuple[str, Any]]:
        seen: set[int] = set()
        mods = self.named_modules(prefix=prefix) if recurse else [(prefix, self)]
        for mp, m in mods:
            for name, v in m.__dict__[reg].items():
                if v is None or id(v) in seen:
                    continue
                seen.add(id(v))
                yield (f"{mp}.{name}" if mp else name), v

    def named_parameters(self, prefix: str = "", recurse: bool = True) -> Iterator[tuple[str, Parameter]]:
        return self._named("_parameters", prefix, recurse)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "", recurse: bool = True) -> Iterator[tuple[str, Tensor]]:
        return self._named("_buffers", prefix, recurse)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def get_submodule(self, target: str) -> Module:
        mod: Module = self
        for part in target.split(".") if target else []:
            if part not in mod._modules:
                raise AttributeError(f"{type(mod).__name__} has no submodule {part!r} (looking for {target!r})")
            mod = mod._modules[part]
        return mod

    def get_parameter(self, target: str) -> Parameter:
        """The parameter at a dotted path (``"layer.0.weight"``), as PyTorch's."""
        return self._registered_at(target, "_parameters", "parameter")

    def get_buffer(self, target: str) -> Tensor:
        """The buffer at a dotted path (``"bn.running_mean"``), as PyTorch's."""
        return self._registered_at(target, "_buffers", "buffer")

    def _registered_at(self, target: str, registry: str, kind: str) -> Any:
        mod_path, _, name = target.rpartition(".")
        mod = self.get_submodule(mod_path)
        found = getattr(mod, registry).get(name)
        if found is None:
            raise AttributeError(f"{type(mod).__name__} has no {kind} {name!r} "
                                 f"(looking for {target!r})")
        return found

    def set_submodule(self, target: str, module: Module, strict: bool = False) -> None:
        """Replace (or, unless ``strict``, add) the submodule at a dotted path."""
        if not target:
            raise ValueError("set_submodule: the target must name a submodule, not ''")
        if not isinstance(module, Module):
            raise TypeError(f"set_submodule: expected a Module, got {type(module).__name__}")
        parent_path, _, name = target.rpartition(".")
        parent = self.get_submodule(parent_path)
        if strict and name not in parent._modules:
            raise AttributeError(f"{type(parent).__name__} has no submodule {name!r} "
                                 f"(looking for {target!r})")
        setattr(parent, name, module)

    # -- modes, devices, functions -----------------------------------------------------

    def compile(self, *args: Any, **kwargs: Any) -> None:
        """Compile this module's calls in place, as PyTorch's ``model.compile()``:
        ``model(x)`` then runs its ``forward`` through ``rtxcore.compile`` (same
        arguments; see docs/compile.md), its forward hooks eagerly around it; the
        module keeps its type, parameters and state_dict. A copy or a pickle of the
        module is uncompiled (``compile()`` it again)."""
        from ..jit.compile import compile as compile_fn

        self.__dict__["_compiled_forward"] = compile_fn(self.forward, *args, **kwargs)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("_compiled_forward", None)  # (holds locks and graphs: not copied)
        return state

    def train(self, mode: bool = True) -> Module:
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        for m in self.modules():
            m.__dict__["training"] = mode
        return self

    def eval(self) -> Module:
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.parameters():
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                p.grad.zero_()

    def apply(self, fn: Callable[[Module], Any]) -> Module:
        """``fn(m)`` on every submodule, then on this one (as PyTorch)."""
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    def _apply_tensors(self, fn: Callable[[Tensor], Tensor]) -> Module:
        """Replace every parameter's and buffer's data with ``fn(data)`` (the
        Parameter objects stay the same, so optimizers keep working)."""
        from ..autograd.grad_mode import no_grad

        with no_grad():
            for m in self.modules():
                for name, p in m._parameters.items():
                    if p is None:
                        continue
                    new = fn(p.detach())
                    if new is not p.detach() and (new._storage is not p._storage or new._dtype is not p._dtype):
                        p.data = new
                        if p.grad is not None:
                            p.grad = fn(p.grad)
                for name, b in m._buffers.items():
                    if b is not None:
                        m._buffers[name] = fn(b)
        return self

    def to(self, *args: Any, **kwargs: Any) -> Module:
        """``to(device)``, ``to(dtype)`` (floating parameters and buffers only),
        ``to(device, dtype)``, ``to(tensor)``."""
        from ..ops.creation import _parse_to

        device, dtype, _ = _parse_to(args, dict(kwargs))
        from .. import dtype as D

        dt = D.as_dtype(dtype) if dtype is not None else None
        if dt is not None and not dt.is_floating_point:
            raise TypeError(f"nn.Module.to only accepts floating point dtypes, but got desired dtype={dt.name}")

        def convert(t: Tensor) -> Tensor:
            return t.to(device, dt if (dt is not None and t.is_floating_point()) else None)

        return self._apply_tensors(convert)

    def cpu(self) -> Module:
        return self.to("cpu")

    def cuda(self, device: Any = None) -> Module:
        """``to("cuda")`` (or ``cuda:N`` for ``device=N``): without a usable CUDA
        backend it raises the RuntimeError that says why."""
        if device is None:
            return self.to("cuda")
        return self.to(f"cuda:{device}" if isinstance(device, int) else device)

    def type(self, dst_type: Any) -> Module:  # noqa: A003
        """Every parameter and buffer cast to ``dst_type`` (a dtype)."""
        return self._apply_tensors(lambda t: t.type(dst_type))

    def to_empty(self, *, device: Any, recurse: bool = True) -> Module:
        """Parameters and buffers moved to ``device`` without their values (as
        PyTorch's: the new memory is uninitialized, to be filled by a load)."""
        from ..ops.creation import empty

        if not recurse:
            raise ValueError("to_empty(recurse=False) is not supported: every submodule moves")
        return self._apply_tensors(lambda t: empty(t.shape, dtype=t.dtype, device=device))

    def share_memory(self) -> Module:
        """The module itself: tensors are copied between processes, never shared
        (see rtxcore.multiprocessing)."""
        return self

    def float(self) -> Module:  # noqa: A003
        from .. import dtype as D

        return self.to(D.float32)

    def double(self) -> Module:
        from .. import dtype as D

        return self.to(D.float64)

    def half(self) -> Module:
        from .. import dtype as D

        return self.to(D.float16)

    # -- state ---------------------------------------------------------------------------

    def state_dict(self, destination: Any = None, prefix: str = "", keep_vars: bool = False) -> OrderedDict:
        """Every parameter and persistent buffer by dotted name (detached unless
        ``keep_vars``), in registration order."""
        out = OrderedDict() if destination is None else destination
        for mp, m in self.named_modules(prefix=prefix.rstrip(".")):
            pre = f"{mp}." if mp else ""
            for name, p in m._parameters.items():
                if p is not None:
                    out[pre + name] = p if keep_vars else p.detach()
            for name, b in m._buffers.items():
                if b is not None and name not in m._non_persistent:
                    out[pre + name] = b if keep_vars else b.detach()
        return out

    def load_state_dict(self, state_dict: Any, strict: bool = True, assign: bool = False) -> Any:
        """Copy tensors from ``state_dict`` into this module's parameters and
        buffers (cast and moved to each one's dtype and device). With ``strict``,
        missing keys, unexpected keys and shape mismatches raise one error that
        lists them all; without, mismatched shapes still raise and the key lists
        are returned."""
        from ..autograd.grad_mode import no_grad

        own = self.state_dict(keep_vars=True)
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        bad_shape = []
        for k, v in state_dict.items():
            if k in own:
                if not isinstance(v, Tensor):
                    bad_shape.append(f"{k}: expected a Tensor, got {type(v).__name__}")
                elif tuple(v.shape) != tuple(own[k].shape):
                    bad_shape.append(f"size mismatch for {k}: copying a param with shape "
                                     f"{tuple(v.shape)}, the shape in current model is {tuple(own[k].shape)}")
        errors = list(bad_shape)
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in unexpected) + ".")
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing) + ".")
        if errors:
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t"
                               + "\n\t".join(errors))
        with no_grad():
            for k, v in state_dict.items():
                if k in own:
                    own[k].copy_(v)
        return _IncompatibleKeys(missing, unexpected)

    # -- printing --------------------------------------------------------------------------

    def extra_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        lines = []
        extra = self.extra_repr()
        if extra:
            lines = extra.split("\n")
        children = []
        for name, m in self._modules.items():
            child = repr(m).replace("\n", "\n  ")
            children.append(f"({name}): {child}")
        body = lines + children
        head = type(self).__name__ + "("
        if not body:
            return head + ")"
        if len(lines) == 1 and not children:
            return head + lines[0] + ")"
        return head + "\n  " + "\n  ".join(body) + "\n)"
