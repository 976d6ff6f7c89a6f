"""``torch.nn.utils.rnn``: ``pad_sequence`` (packed sequences are not supported;
the recurrent layers take padded batches)."""

from __future__ import annotations

from collections.abc import Sequence

from ...ops import creation as C
from ...ops.indexing import cat, stack
from ...tensor import Tensor

__all__ = ["pad_sequence"]


def pad_sequence(sequences: Sequence[Tensor] | Tensor, batch_first: bool = False,
                 padding_value: float = 0.0, padding_side: str = "right") -> Tensor:
    """Stack tensors of shapes (L_i, *) into (L_max, B, *) (or (B, L_max, *) with
    ``batch_first``), filling with ``padding_value`` on ``padding_side``."""
    if padding_side not in ("left", "right"):
        raise ValueError(f"pad_sequence: padding_side should be 'left' or 'right', but got "
                         f"{padding_side!r}")
    seqs = list(sequences.unbind(0)) if isinstance(sequences, Tensor) else list(sequences)
    if not seqs:
        raise RuntimeError("pad_sequence: received an empty list of sequences")
    for i, s in enumerate(seqs):
        if not isinstance(s, Tensor):
            raise TypeError(f"pad_sequence: expected a sequence of Tensors, got "
                            f"{type(s).__name__} at index {i}")
        if s.ndim < 1 or tuple(s.shape[1:]) != tuple(seqs[0].shape[1:]):
            raise RuntimeError(f"pad_sequence: every sequence must have shape (L, *) with the "
                               f"same trailing dims; got {tuple(seqs[0].shape)} and "
                               f"{tuple(s.shape)} (index {i})")
    longest = max(s.shape[0] for s in seqs)
    padded = []
    for s in seqs:
        n = longest - s.shape[0]
        if n == 0:
            padded.append(s)
            continue
        fill = C.full((n, *s.shape[1:]), padding_value, dtype=s.dtype, device=s.device)
        padded.append(cat([s, fill] if padding_side == "right" else [fill, s], 0))
    return stack(padded, 0 if batch_first else 1)
