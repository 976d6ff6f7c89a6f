"""Recurrent layers, as ``torch.nn``: ``RNN`` (tanh / relu), ``LSTM`` (with
``proj_size``), ``GRU`` and their single-step cells.

Parameters carry PyTorch's names, shapes and gate order (LSTM i, f, g, o; GRU
r, z, n), so a PyTorch ``state_dict`` loads as is and gives the same outputs.
A layer projects the whole input sequence with one matmul, then runs each
(layer, direction)'s recurrence as one autograd Function (``_recurrence``); a
cell's step is one recorded node (``_rnn_cells``). Both compute the gates with
the backend's fused cell kernels where it has them.
"""

from __future__ import annotations

import numbers
import warnings
from typing import Any

from .. import dtype as D
from ..amp.autocast_mode import regions as _autocast_regions
from ..ops import creation as C
from ..ops.indexing import cat, stack
from ..tensor import Tensor
from . import functional as F
from ._layer_base import _uniform_bound_
from ._recurrence import _GRUSeq, _GRUSeqOps, _LSTMSeq, _SimpleRNNSeq, _one_dtype
from ._rnn_cells import GRUCellStep, LSTMCellStep, RNNCellStep, fused_step_applies
from .module import Module
from .parameter import Parameter

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def _promoted(*ts: Tensor | None) -> list[Tensor | None]:
    """The recurrence's inputs in one dtype (a state of another dtype than the
    input promotes, as the ops would)."""
    dts = {t._dtype for t in ts if t is not None}
    if len(dts) == 1:
        return list(ts)
    dt = D.result_type(*(t for t in ts if t is not None))
    return [None if t is None else t.to(dt) for t in ts]


# -- the layers ---------------------------------------------------------------------------------


class RNNBase(Module):
    """Base of ``RNN``, ``LSTM`` and ``GRU``: PyTorch's constructor, parameters
    ``weight_ih_l{k}{_reverse}``, ``weight_hh_l{k}``, ``bias_ih_l{k}``,
    ``bias_hh_l{k}`` (and ``weight_hr_l{k}`` for a projected LSTM), all
    initialised U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, proj_size: int = 0, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        if mode not in _GATES:
            raise ValueError("Unrecognized RNN mode: " + mode)
        if (not isinstance(dropout, numbers.Number) or isinstance(dropout, bool)
                or not 0 <= dropout <= 1):
            raise ValueError("dropout should be a number in range [0, 1] representing the "
                             "probability of an element being zeroed")
        if dropout > 0 and num_layers == 1:
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so "
                          "non-zero dropout expects num_layers greater than 1, but got "
                          f"dropout={dropout} and num_layers={num_layers}", stacklevel=2)
        for name, v in (("bias", bias), ("batch_first", batch_first)):
            if not isinstance(v, bool):
                raise TypeError(f"{name} should be of type bool, got: {type(v).__name__}")
        for name, v in (("input_size", input_size), ("hidden_size", hidden_size)):
            if not isinstance(v, int) or isinstance(v, bool):
                raise TypeError(f"{name} should be of type int, got: {type(v).__name__}")
            if v <= 0:
                raise ValueError(f"{name} must be greater than zero")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable "
                             "projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        gate_size = _GATES[mode] * hidden_size
        real_hidden = proj_size if proj_size > 0 else hidden_size
        dirs = 2 if bidirectional else 1
        kw = {"device": device, "dtype": dtype}
        self._flat_weights_names: list[str] = []
        self._all_weights: list[list[str]] = []
        for layer in range(num_layers):
            for direction in range(dirs):
                layer_input = input_size if layer == 0 else real_hidden * dirs
                sfx = f"_l{layer}" + ("_reverse" if direction == 1 else "")
                params = [("weight_ih" + sfx, (gate_size, layer_input)),
                          ("weight_hh" + sfx, (gate_size, real_hidden))]
                if bias:
                    params += [("bias_ih" + sfx, (gate_size,)), ("bias_hh" + sfx, (gate_size,))]
                if proj_size > 0:
                    params.append(("weight_hr" + sfx, (proj_size, hidden_size)))
                for name, shape in params:
                    setattr(self, name, Parameter(C.empty(shape, **kw)))
                names = [p[0] for p in params]
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        _uniform_bound_(self.parameters(), self.hidden_size)

    def flatten_parameters(self) -> None:
        """Nothing to do: the weights are used where they are (kept for PyTorch code)."""

    @property
    def _flat_weights(self) -> list[Parameter]:
        return [getattr(self, n) for n in self._flat_weights_names]

    @property
    def all_weights(self) -> list[list[Parameter]]:
        return [[getattr(self, n) for n in names] for names in self._all_weights]

    # -- argument checks, as PyTorch words them ---------------------------------------------

    def _name(self) -> str:
        return {"RNN_TANH": "RNN", "RNN_RELU": "RNN"}.get(self.mode, self.mode)

    def _check_input(self, input: Any) -> None:
        if not isinstance(input, Tensor):
            raise TypeError(f"{self._name()}: expected input to be a Tensor, got "
                            f"{type(input).__name__}")
        if input.ndim not in (2, 3):
            raise ValueError(f"{self._name()}: Expected input to be 2D or 3D, got {input.ndim}D "
                             "tensor instead")
        w = self.weight_ih_l0
        if input._dtype is not w._dtype:
            raise ValueError(f"RNN input dtype ({input._dtype}) does not match weight dtype "
                             f"({w._dtype}). Convert input: input.to({w._dtype}), or convert "
                             f"model: model.to({input._dtype})")
        if input._shape[-1] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected "
                               f"{self.input_size}, got {input._shape[-1]}")

    @staticmethod
    def _check_hidden(hx: Tensor, expected: tuple[int, int, int],
                      msg: str = "Expected hidden size {}, got {}") -> None:
        if tuple(hx._shape) != expected:
            raise RuntimeError(msg.format(expected, list(hx._shape)))

    def _prepare(self, input: Tensor, hx: Any) -> tuple[Tensor, Any, bool, int]:
        """Check the arguments; return the input time-major (T, B, F), hx batched,
        whether the input was batched and the batch size."""
        self._check_input(input)
        batched = input.ndim == 3
        if not batched:
            input = input.unsqueeze(1)
        elif self.batch_first:
            input = input.transpose(0, 1)
        return input, hx, batched, input._shape[1]

    def _run(self, x: Tensor, h0: list[Tensor], c0: list[Tensor] | None
             ) -> tuple[Tensor, list[Tensor], list[Tensor]]:
        """Every layer and direction over the time-major input ``x``; returns the
        last layer's output and each (layer, direction)'s final h (and c)."""
        dirs = 2 if self.bidirectional else 1
        hn: list[Tensor] = []
        cn: list[Tensor] = []
        n_steps, batch = x._shape[0], x._shape[1]
        for layer in range(self.num_layers):
            if layer > 0 and self.dropout > 0 and self.training:
                x = F.dropout(x, self.dropout, True)
            outs = []
            flat = x.reshape(n_steps * batch, x._shape[-1])
            for d in range(dirs):
                k = layer * dirs + d
                w = [getattr(self, n) for n in self._all_weights[k]]
                w_ih, w_hh = w[0], w[1]
                b_ih, b_hh = (w[2], w[3]) if self.bias else (None, None)
                if b_ih is not None and self.mode != "GRU":
                    # both biases add to every gate: one sum, added in the projection
                    b_ih, b_hh = b_ih + b_hh, None
                gi = F.linear(flat, w_ih, b_ih).reshape(n_steps, batch, w_ih._shape[0])
                rev = d == 1
                if self.mode == "GRU":
                    seq = _GRUSeq if _one_dtype(gi, h0[k], w_hh, b_hh) else _GRUSeqOps
                    out, h = seq.apply(gi, h0[k], w_hh, b_hh, rev)
                elif self.mode == "LSTM":
                    w_hr = w[-1] if self.proj_size > 0 else None
                    args = _promoted(gi, h0[k], c0[k], w_hh, w_hr)  # type: ignore[index]
                    out, h, c = _LSTMSeq.apply(*args, rev)
                    cn.append(c)
                else:
                    relu = self.mode == "RNN_RELU"
                    out, h = _SimpleRNNSeq.apply(*_promoted(gi, h0[k], w_hh), relu, rev)
                outs.append(out)
                hn.append(h)
            x = outs[0] if dirs == 1 else cat(outs, -1)
        return x, hn, cn

    def _finish(self, out: Tensor, batched: bool) -> Tensor:
        if not batched:
            return out.squeeze(1)
        return out.transpose(0, 1) if self.batch_first else out

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s


class _HiddenOnly(RNNBase):
    """``RNN`` and ``GRU``: forward(input, hx=None) -> (output, h_n)."""

    def forward(self, input: Tensor, hx: Tensor | None = None) -> tuple[Tensor, Tensor]:
        x, hx, batched, batch = self._prepare(input, hx)
        dirs = 2 if self.bidirectional else 1
        expected = (self.num_layers * dirs, batch, self.hidden_size)
        if hx is None:
            hx = C.zeros(expected, dtype=x._dtype, device=x._device)
        else:
            if not isinstance(hx, Tensor):
                raise TypeError(f"{self._name()}: expected hx to be a Tensor, got "
                                f"{type(hx).__name__}")
            if batched and hx.ndim != 3:
                raise RuntimeError(f"For batched 3-D input, hx should also be 3-D but got "
                                   f"{hx.ndim}-D tensor")
            if not batched:
                if hx.ndim != 2:
                    raise RuntimeError(f"For unbatched 2-D input, hx should also be 2-D but got "
                                       f"{hx.ndim}-D tensor")
                hx = hx.unsqueeze(1)
            self._check_hidden(hx, expected)
        out, hn, _ = self._run(x, list(hx.unbind(0)), None)
        h_n = stack(hn)
        return self._finish(out, batched), (h_n if batched else h_n.squeeze(1))


class RNN(_HiddenOnly):
    """Elman RNN: ``h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)`` (or relu).

    ``RNN(input_size, hidden_size, num_layers=1, nonlinearity='tanh', bias=True,
    batch_first=False, dropout=0.0, bidirectional=False)``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        if len(args) > 3:
            self_nl = args[3]
            args = args[:3] + args[4:]
        else:
            self_nl = kwargs.pop("nonlinearity", "tanh")
        if self_nl == "tanh":
            mode = "RNN_TANH"
        elif self_nl == "relu":
            mode = "RNN_RELU"
        else:
            raise ValueError(f"Unknown nonlinearity '{self_nl}'. Select from 'tanh' or 'relu'.")
        super().__init__(mode, *args, **kwargs)
        self.nonlinearity = self_nl

    def extra_repr(self) -> str:
        s = super().extra_repr()
        return s + (f", nonlinearity={self.nonlinearity}" if self.nonlinearity != "tanh" else "")


class GRU(_HiddenOnly):
    """Gated recurrent unit, PyTorch's equations and gate order (r, z, n):
    ``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))``, ``h' = (1 - z) * n + z * h``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        super().__init__("GRU", *args, **kwargs)


class LSTM(RNNBase):
    """Long short-term memory, gate order (i, f, g, o); forward(input, hx=None)
    -> (output, (h_n, c_n)). With ``proj_size > 0`` h is projected by ``weight_hr``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__("LSTM", *args, **kwargs)

    def forward(self, input: Tensor, hx: Any = None) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        x, hx, batched, batch = self._prepare(input, hx)
        dirs = 2 if self.bidirectional else 1
        real_hidden = self.proj_size if self.proj_size > 0 else self.hidden_size
        exp_h = (self.num_layers * dirs, batch, real_hidden)
        exp_c = (self.num_layers * dirs, batch, self.hidden_size)
        if hx is None:
            h0 = C.zeros(exp_h, dtype=x._dtype, device=x._device)
            c0 = C.zeros(exp_c, dtype=x._dtype, device=x._device)
        else:
            if (not isinstance(hx, (tuple, list)) or len(hx) != 2
                    or not all(isinstance(t, Tensor) for t in hx)):
                raise TypeError("LSTM: expected hx to be a tuple of two Tensors (h_0, c_0)")
            h0, c0 = hx
            want = 3 if batched else 2
            if h0.ndim != want or c0.ndim != want:
                kind = "batched 3-D" if batched else "unbatched 2-D"
                raise RuntimeError(f"For {kind} input, hx and cx should also be {want}-D but got "
                                   f"({h0.ndim}-D, {c0.ndim}-D) tensors")
            if not batched:
                h0, c0 = h0.unsqueeze(1), c0.unsqueeze(1)
            self._check_hidden(h0, exp_h, "Expected hidden[0] size {}, got {}")
            self._check_hidden(c0, exp_c, "Expected hidden[1] size {}, got {}")
        out, hn, cn = self._run(x, list(h0.unbind(0)), list(c0.unbind(0)))
        h_n, c_n = stack(hn), stack(cn)
        if not batched:
            h_n, c_n = h_n.squeeze(1), c_n.squeeze(1)
        return self._finish(out, batched), (h_n, c_n)


# -- cells --------------------------------------------------------------------------------------


class RNNCellBase(Module):
    """Base of the cells: ``weight_ih`` (chunks * hidden, input), ``weight_hh``
    (chunks * hidden, hidden), ``bias_ih``, ``bias_hh``; U(-1/sqrt(hidden), 1/sqrt(hidden))."""

    _chunks = 1

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        kw = {"device": device, "dtype": dtype}
        g = self._chunks * hidden_size
        self.weight_ih = Parameter(C.empty((g, input_size), **kw))
        self.weight_hh = Parameter(C.empty((g, hidden_size), **kw))
        for name in ("bias_ih", "bias_hh"):
            self.register_parameter(name, Parameter(C.empty(g, **kw)) if bias else None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        _uniform_bound_(self.parameters(), self.hidden_size)

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        nl = getattr(self, "nonlinearity", "tanh")
        return s + (f", nonlinearity={nl}" if nl != "tanh" else "")

    def _check(self, input: Any, hxs: list[Any]) -> tuple[Tensor, list[Tensor | None], bool]:
        """PyTorch's cell checks; returns input and the states batched."""
        name = type(self).__name__
        if not isinstance(input, Tensor):
            raise TypeError(f"{name}: expected input to be a Tensor, got {type(input).__name__}")
        if input.ndim not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {input.ndim}D instead")
        for i, h in enumerate(hxs):
            if h is not None and h.ndim not in (1, 2):
                what = "hidden" if len(hxs) == 1 else f"hx[{i}]"
                raise ValueError(f"{name}: Expected {what} to be 1D or 2D, got {h.ndim}D instead")
        batched = input.ndim == 2
        if not batched:
            input = input.unsqueeze(0)
            hxs = [h.unsqueeze(0) if h is not None else None for h in hxs]
        if input._shape[1] != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {input._shape[1]} expected "
                               f"{self.input_size}")
        out: list[Tensor | None] = []
        for i, h in enumerate(hxs):
            if h is None:
                h = C.zeros(input._shape[0], self.hidden_size, dtype=input._dtype,
                            device=input._device)
            if input._shape[0] != h._shape[0]:
                raise RuntimeError(f"Input batch size {input._shape[0]} doesn't match hidden{i} "
                                   f"batch size {h._shape[0]}")
            if h._shape[1] != self.hidden_size:
                raise RuntimeError(f"hidden{i} has inconsistent hidden_size: got {h._shape[1]}, "
                                   f"expected {self.hidden_size}")
            out.append(h)
        return input, out, batched

    def _gates(self, x: Tensor, h: Tensor) -> tuple[Tensor, Tensor]:
        return F.linear(x, self.weight_ih, self.bias_ih), F.linear(h, self.weight_hh, self.bias_hh)

    def _weights(self) -> list[Any]:
        p = self._parameters
        return [p["weight_ih"], p["weight_hh"], p.get("bias_ih"), p.get("bias_hh")]

    def _fused(self, x: Tensor, states: list[Tensor], weights: list[Any]) -> bool:
        """Whether the step runs as one node (``_rnn_cells``): not under autocast,
        one float dtype and device, nothing empty; else op by op."""
        return not _autocast_regions[0] and fused_step_applies(x, states, weights)


class RNNCell(RNNCellBase):
    """One Elman step: ``h' = tanh(W_ih x + b_ih + W_hh h + b_hh)`` (or relu)."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 nonlinearity: str = "tanh", device: Any = None, dtype: Any = None) -> None:
        super().__init__(input_size, hidden_size, bias, device=device, dtype=dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        x, (h,), batched = self._check(input, [hx])
        if self.nonlinearity not in ("tanh", "relu"):
            raise RuntimeError(f"Unknown nonlinearity: {self.nonlinearity}")
        ws = self._weights()
        if self._fused(x, [h], ws):  # type: ignore[list-item]
            out = RNNCellStep.apply(x, h, *ws, self.nonlinearity == "relu")
        else:
            gi, gh = self._gates(x, h)  # type: ignore[arg-type]
            out = (gi + gh).tanh() if self.nonlinearity == "tanh" else (gi + gh).relu()
        return out if batched else out.squeeze(0)


class LSTMCell(RNNCellBase):
    """One LSTM step; forward(input, (h, c)=None) -> (h', c')."""

    _chunks = 4

    def forward(self, input: Tensor, hx: Any = None) -> tuple[Tensor, Tensor]:
        x, (h, c), batched = self._check(input, [None, None] if hx is None else list(hx))
        ws = self._weights()
        if self._fused(x, [h, c], ws):  # type: ignore[list-item]
            h2, c2 = LSTMCellStep.apply(x, h, c, *ws)
        else:
            gi, gh = self._gates(x, h)  # type: ignore[arg-type]
            i, f, g, o = (gi + gh).chunk(4, 1)
            c2 = f.sigmoid() * c + i.sigmoid() * g.tanh()
            h2 = o.sigmoid() * c2.tanh()
        return (h2, c2) if batched else (h2.squeeze(0), c2.squeeze(0))


class GRUCell(RNNCellBase):
    """One GRU step, PyTorch's equations (r, z, n)."""

    _chunks = 3

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        x, (h,), batched = self._check(input, [hx])
        ws = self._weights()
        if self._fused(x, [h], ws):  # type: ignore[list-item]
            out = GRUCellStep.apply(x, h, *ws)
            return out if batched else out.squeeze(0)
        gi, gh = self._gates(x, h)  # type: ignore[arg-type]
        i_r, i_z, i_n = gi.chunk(3, 1)
        h_r, h_z, h_n = gh.chunk(3, 1)
        r = (i_r + h_r).sigmoid()
        z = (i_z + h_z).sigmoid()
        n = (i_n + r * h_n).tanh()
        out = n + z * (h - n)  # type: ignore[operator]
        return out if batched else out.squeeze(0)
