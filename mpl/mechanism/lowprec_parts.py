"""A low-precision ``gpu`` tier of parts (SPEC §12 ``granularity_split = N`` with an ``int8`` /
``int4`` tier; docs/offload.md, "Parts in a low-precision tier"): the tier holds quantised
copies of parts (``(layer, expert, part)`` keys, ``mpl.mechanism.parts``), one part a slot,
in the device area of :class:`mpl.mechanism.lowprec.LowPrecArea`.

A part is, for every expert parameter, a run of its row's elements in memory order
(``mpl.mechanism.disk.PartLayout``), which need not start or end on a row of the stored
matrix. :class:`PartQuantLayout` quantises, per part and 2-D floating parameter, the stored
rows the run touches (rows ``floor(a / C)`` to ``ceil(b / C)`` of the ``[R, C]`` row, ``C``
its last dimension), the elements outside the run read as zeros, as the ``[output, input]``
matrix ``mpl.mechanism.quant`` takes (a transposed family's block transposed); every other
parameter's run (biases) is kept at its own precision. Where the runs are whole stored rows
(``C`` divides the part's length: every split of the tested families) a part of a
non-transposed family is quantised exactly as the whole expert's rows are (int8: a scale a
row; int4: a scale a group of a row).

:class:`PartArea` (a :class:`LowPrecArea` over the part pool,
``mpl.mechanism.parts.PartPool``): ``requant`` quantises a part slot on the device (the
device cache's victim, in place), ``fill_runs`` quantises a part's runs on the host (the
host store's row, or the host tier's part record over a disk tier) into the staging record
and copies it to the device, ``requant_down`` moves a ladder's part a rung down where it is,
and ``dequant_runs`` gives a part's runs dequantised on the device, which the gather copies
into the transient entry the expert is put together in (``PartPool.gather``'s ``LOWER``
places). CUDA ordering as :class:`LowPrecArea`'s, the part slot in place of the pool entry.
"""

from __future__ import annotations

import torch

from . import quant
from .disk import PartLayout
from .lowprec import LowPrecArea, _place_quant, _up
from .gpu_tier import DeviceArea


class _Run:
    """One parameter's run in one part's quantised record."""

    __slots__ = ("name", "spec", "dtype", "length", "rows", "cols", "offset", "q", "s", "raw")

    def __init__(self, name, spec, dtype, length, rows, cols, offset) -> None:
        self.name, self.spec, self.dtype = name, spec, dtype
        self.length, self.rows, self.cols, self.offset = length, rows, cols, offset
        self.q = self.s = self.raw = None


class PartQuantLayout:
    """Where each part's runs sit in a quantised part record (see the module docstring).
    ``template``: the ``[E, ...]`` expert tensors of one MoE layer; ``n``: the split;
    ``dtype``: ``int8`` or ``int4``; ``transposed``: the family applies ``x @ w``."""

    def __init__(self, template: dict, n: int, dtype: str, *, transposed: bool = False,
                 group: int = quant.DEFAULT_GROUP) -> None:
        from .lowprec import _ALIGN

        self.dtype = dtype
        self.transposed = bool(transposed)
        self.parts = PartLayout(template, n)
        self.runs: list[list[_Run]] = []
        stride = _ALIGN
        for p in range(self.parts.n):
            off = 0
            runs = []
            for name, t in template.items():
                a, b = self.parts.ranges[p][name]
                if b <= a:
                    continue
                row = t[0]
                if row.dim() == 2 and row.is_floating_point():
                    C = int(row.shape[1])
                    r0, r1 = a // C, -(-b // C)
                    rows, cols = (C, r1 - r0) if self.transposed else (r1 - r0, C)
                    r = _Run(name, quant.spec(rows, cols, dtype, group), row.dtype, b - a,
                             r1 - r0, C, a - r0 * C)
                    r.q, r.s, off = _place_quant(r.spec, off)
                else:
                    r = _Run(name, None, row.dtype, b - a, 0, 0, 0)
                    r.raw = off
                    off = _up(off + (b - a) * row.element_size())
                runs.append(r)
            self.runs.append(runs)
            stride = max(stride, off)
        self.stride = stride

    def views(self, record: torch.Tensor, p: int) -> list[tuple]:
        """Per run of part ``p`` in ``record`` (a uint8 ``[stride]`` tensor): ``(run, codes,
        scales)``, or ``(run, tensor, None)`` for a run kept whole."""
        out = []
        for r in self.runs[p]:
            if r.spec is None:
                size = torch.tensor([], dtype=r.dtype).element_size()
                out.append((r, record[r.raw:r.raw + r.length * size].view(r.dtype), None))
                continue
            s = r.spec
            q = record[r.q:r.q + s.qshape[0] * s.qshape[1]].view(s.qdtype).view(s.qshape)
            k = 1
            for d in s.sshape:
                k *= d
            out.append((r, q, record[r.s:r.s + 4 * k].view(torch.float32).view(s.sshape)))
        return out

    def matrix(self, r: _Run, run: torch.Tensor) -> torch.Tensor:
        """The ``[output, input]`` matrix of the stored rows run ``r`` touches, from its
        elements ``run`` (the elements outside it zeros)."""
        blk = run.new_zeros(r.rows * r.cols)
        blk[r.offset:r.offset + r.length] = run[:r.length]
        m = blk.view(r.rows, r.cols)
        return m.t() if self.transposed else m

    def run_of(self, r: _Run, w: torch.Tensor) -> torch.Tensor:
        """The run's elements of the dequantised matrix ``w`` (as :meth:`matrix` gave it)."""
        m = w.t() if self.transposed else w
        return m.reshape(-1)[r.offset:r.offset + r.length]


class PartArea(LowPrecArea):
    """The device area of a low-precision tier of parts (see the module docstring).
    ``layouts``: one :class:`PartQuantLayout` per rung (highest precision first); ``pool``:
    the part pool (``mpl.mechanism.parts.PartPool``), whose part slots the tier's
    requants read and whose copy streams its copies share."""

    def __init__(self, layouts, slots: int, pool, *, label: str, tier: str, index: int) -> None:
        layouts = list(layouts)
        self.layouts = {q.dtype: q for q in layouts}
        self.layout = max(layouts, key=lambda q: q.stride)
        self.stride = self.layout.stride
        self.slots = int(slots)
        self.pool = pool
        self.ops = ops = pool.ops
        self.label, self.tier, self.index = label, tier, index
        self.dtype = layouts[0].dtype
        self.ladder = [q.dtype for q in layouts] if len(layouts) > 1 else None
        self.data = ops.alloc((self.slots, self.stride), torch.uint8)
        DeviceArea.__init__(self, self.slots)
        self.held: list = [None] * self.slots
        self.ready: list = [None] * self.slots
        self.free: list = [None] * self.slots
        self._staging = None
        self._staging_ev = None
        self.requants = self.rung_requants = self.host_fills = self.host_bytes = 0
        self.dequants = 0              # experts computed with a part dequantised from here
        self.dequants_at: dict = {}    # ... by the lowest precision among their parts
        self.dequantized_parts = 0
        # (a ladder of parts has no full-precision rung: not_live_yet refuses one)
        self.full = self.full_dtype = None
        self._full_of, self._loading, self._full_free = {}, set(), []
        self.full_serves = 0

    def _record_views(self, slot: int, dtype: str) -> list:
        """The runs of the part in ``slot`` (its key's part) laid out at ``dtype``."""
        return self.layouts[dtype].views(self.data[slot], self.content[slot][2])

    def _staged_views(self, lay, key) -> list:
        return lay.views(self._staging, key[2])

    def requant(self, slot: int, entry: int, key, dtype=None) -> None:
        """Part slot ``entry`` (the part's full-precision copy, about to be reused) quantised
        into ``slot`` on the device at ``dtype`` (a rung; None: the tier's precision)."""
        self._requant_entry(slot, entry, key, dtype, reads_entry=False)

    @staticmethod
    def _write(views, lay, runs: dict, copy, tag) -> None:
        for r, a, b in views:
            run = runs[r.name]
            if r.spec is None:
                copy(a, run[:r.length], tag=tag)
                continue
            q, s = quant.quantize(lay.matrix(r, run), r.spec)
            copy(a, q, tag=tag)
            copy(b, s, tag=tag)

    def fill_runs(self, slot: int, runs: dict, key, kind=None, dtype=None) -> None:
        """Part ``key[2]``'s runs ``runs`` (name -> its elements on the host: the host
        store's row, or the host tier's part record) quantised on the host into the staging
        record at ``dtype``, then copied into ``slot`` (:meth:`LowPrecArea.fill_staged`; a
        ladder's step down is :meth:`LowPrecArea.requant_down`, through the part's views)."""
        self.fill_staged(slot, runs, key, kind, dtype)

    def dequant_runs(self, slot: int, count: bool = True) -> dict:
        """The part in ``slot`` dequantised on the device, in the experts' dtype: name -> its
        run (what the gather copies into the transient entry). Computed on the demand stream
        after the write into the slot; the gather's event becomes the slot's free event.
        ``count``: False for the same gather made again in the same dispatch."""
        pool, ops = self.pool, self.ops
        lay = self._layout(self.held[slot])
        self.dequantized_parts += count
        out = {}
        with ops.use(pool.demand_stream):
            if pool.cuda and self.ready[slot] is not None:
                ops.wait(pool.demand_stream, self.ready[slot])
            for r, a, b in self._record_views(slot, lay.dtype):
                if r.spec is None:
                    out[r.name] = a
                    continue
                out[r.name] = lay.run_of(r, quant.dequantize(a, b, r.spec, r.dtype))
        return out

    def release(self) -> None:
        self.data = None
        self.held = [None] * self.slots
        self._staging = self._staging_ev = None
        self.ready = [None] * self.slots
        self.free = [None] * self.slots
