"""Weight-only quantisation of one expert matrix (SPEC §12: a ``gpu`` tier at ``int8`` or
``int4`` holds copies made from the checkpoint's weights).

A matrix is seen as ``[rows, cols]``: rows are output channels, cols the input dimension
(the layout ``F.linear`` reads; a transposed family passes its matrix transposed).

* ``int8``: one scale per output channel, ``scale = max|w| / 127`` over the row,
  ``q = round(w / scale)`` in ``[-127, 127]`` (int8).
* ``int4``: one scale per group of ``group`` consecutive input columns of a row
  (``group`` clamped to ``cols``; a last group shorter than the others when ``group`` does
  not divide ``cols``: its missing columns count as zeros), ``scale = max|w| / 7`` over the
  group, ``q = round(w / scale)`` in ``[-7, 7]``, stored as ``q + 8`` (1..15) in the low and
  high nibbles of a byte: column ``2j`` in the low nibble, ``2j + 1`` in the high one (uint8,
  ``ceil(cols_padded / 2)`` bytes a row).

Both are symmetric (no zero point: an exact zero stays zero), scales are float32 (a row or
group of zeros gets scale 1 and codes 0), rounding is ``torch.round`` (half to even), every
operation a plain elementwise or reduction torch op: deterministic, the same on the CPU and
CUDA builds, and no CUDA-only kernel. Dequantisation computes ``q * scale`` in float32 and
casts to the expert's dtype. Error bound per element: ``scale / 2`` (plus float32 rounding).
Weights must be finite (an infinite weight gives NaN scales).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

INT8, INT4 = "int8", "int4"
DTYPES = (INT8, INT4)
#: int4 columns sharing one scale (clamped to the input dimension)
DEFAULT_GROUP = 64
_QMAX = {INT8: 127, INT4: 7}


class QuantError(ValueError):
    """A matrix or a setting quantisation cannot take (the message says which)."""


@dataclass(frozen=True)
class QuantSpec:
    """How a ``[rows, cols]`` matrix is quantised: the shapes and dtypes of its codes and
    scales (see the module docstring)."""

    dtype: str
    rows: int
    cols: int
    group: int          # int4: columns per scale (clamped to cols); int8: cols

    @property
    def groups(self) -> int:
        return -(-self.cols // self.group)

    @property
    def padded(self) -> int:
        """Columns after padding the last group (int4)."""
        return self.groups * self.group

    @property
    def qshape(self) -> tuple[int, int]:
        if self.dtype == INT8:
            return (self.rows, self.cols)
        return (self.rows, (self.padded + 1) // 2)

    @property
    def qdtype(self) -> torch.dtype:
        return torch.int8 if self.dtype == INT8 else torch.uint8

    @property
    def sshape(self) -> tuple[int, ...]:
        return (self.rows,) if self.dtype == INT8 else (self.rows, self.groups)

    @property
    def nbytes(self) -> int:
        """Bytes of the codes and the scales."""
        q = self.qshape[0] * self.qshape[1]
        s = 1
        for n in self.sshape:
            s *= n
        return q + 4 * s


def spec(rows: int, cols: int, dtype: str, group: int = DEFAULT_GROUP) -> QuantSpec:
    """The :class:`QuantSpec` of a ``[rows, cols]`` matrix at ``dtype`` (``int8``/``int4``);
    ``group``: int4 columns per scale, clamped to ``cols``."""
    if dtype not in DTYPES:
        raise QuantError(f"cannot quantise to {dtype!r}: weight-only quantisation is "
                         f"{' or '.join(DTYPES)}")
    for name, v in (("rows", rows), ("cols", cols), ("group", group)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise QuantError(f"{name} must be a positive integer, got {v!r}")
    return QuantSpec(dtype, rows, cols, cols if dtype == INT8 else min(group, cols))


def _check(w: torch.Tensor, s: QuantSpec) -> None:
    if w.dim() != 2 or tuple(w.shape) != (s.rows, s.cols):
        raise QuantError(f"expected a [{s.rows}, {s.cols}] matrix, got shape {tuple(w.shape)}")
    if not w.is_floating_point():
        raise QuantError(f"can only quantise floating-point weights, got {w.dtype}")


def _scale(absmax: torch.Tensor, qmax: int) -> torch.Tensor:
    return torch.where(absmax > 0, absmax / qmax, torch.ones_like(absmax))


def quantize(w: torch.Tensor, s: QuantSpec) -> tuple[torch.Tensor, torch.Tensor]:
    """``(codes, scales)`` of matrix ``w`` (``[rows, cols]``, any floating dtype), on
    ``w``'s device."""
    _check(w, s)
    x = w.float()
    if s.dtype == INT8:
        scale = _scale(x.abs().amax(dim=1), _QMAX[INT8])
        q = torch.round(x / scale[:, None]).clamp_(-127, 127).to(torch.int8)
        return q, scale
    if s.padded != s.cols:
        x = torch.nn.functional.pad(x, (0, s.padded - s.cols))
    g = x.view(s.rows, s.groups, s.group)
    scale = _scale(g.abs().amax(dim=2), _QMAX[INT4])
    q = (torch.round(g / scale[:, :, None]).clamp_(-7, 7) + 8).to(torch.uint8)
    q = q.view(s.rows, s.padded)
    if s.padded % 2:
        q = torch.nn.functional.pad(q, (0, 1), value=8)
    packed = q[:, 0::2] | (q[:, 1::2] << 4)
    return packed, scale


def dequantize(q: torch.Tensor, scale: torch.Tensor, s: QuantSpec,
               dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The ``[rows, cols]`` matrix ``codes x scales`` in ``dtype``, on ``q``'s device."""
    if tuple(q.shape) != s.qshape or q.dtype != s.qdtype:
        raise QuantError(f"codes must be {s.qdtype} of shape {s.qshape}, got {q.dtype} of "
                         f"shape {tuple(q.shape)}")
    if tuple(scale.shape) != s.sshape:
        raise QuantError(f"scales must have shape {s.sshape}, got {tuple(scale.shape)}")
    if s.dtype == INT8:
        return (q.float() * scale[:, None]).to(dtype)
    lo = q & 15
    hi = q >> 4
    codes = torch.stack((lo, hi), dim=2).reshape(s.rows, -1)[:, :s.padded]
    x = (codes.float() - 8.0).reshape(s.rows, s.groups, s.group) * scale[:, :, None]
    return x.reshape(s.rows, s.padded)[:, :s.cols].to(dtype)
