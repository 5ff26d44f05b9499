"""A disk tier read from the checkpoint's own safetensors files (SPEC §12: a ``disk`` tier
without ``path``), so attaching writes no second copy of the experts.

A checkpoint does not store experts the way the model holds them: transformers fuses a
layer's experts into ``[E, ...]`` parameters at load (Mixtral's ``w1``/``w3`` of each expert
become one row of ``gate_up_proj``), and the mapping differs per family and per version.
Instead of a table per family, :func:`recipes` finds it from the values: for each expert
parameter of a MoE layer, the checkpoint tensors of that layer's experts (one per expert,
``...layers.N....experts.E.NAME``, or one fused ``[E, ...]`` tensor) are tried alone or two
at a time, each as stored or transposed, concatenated along the first or the last dimension,
until one composition equals the model's row of expert 0 exactly; it must then equal every
expert's row (checked once at attach, reading the files). A parameter that no composition
reproduces, or a checkpoint whose dtype is not the model's, is a refusal naming it.

Reading (:meth:`CheckpointStore.read`, thread-safe, as :class:`mpl.mechanism.disk.DiskStore`):
each part is read with ``os.preadv`` at its offset in its file, straight into the record
when the composition keeps the stored layout (parts concatenated along the first
dimension), else into a per-thread scratch buffer (allocated once per reader thread) and
copied into place; the files are opened buffered without readahead (``POSIX_FADV_RANDOM``)
and after each read ``posix_fadvise(DONTNEED)`` drops the pages it read (the files are the
user's: never written, never removed).
"""

from __future__ import annotations

import json
import os
import re
import struct
import threading

import torch

from .disk import DiskError, RecordFiles, RecordLayout, _buffer, no_readahead

_DTYPES = {"F16": torch.float16, "BF16": torch.bfloat16, "F32": torch.float32,
           "F64": torch.float64, "I8": torch.int8, "U8": torch.uint8, "I32": torch.int32,
           "I64": torch.int64}
_HEADER_MAX = 100 << 20          # bytes: a safetensors header larger than this is refused


class Tensor:
    """One tensor of a safetensors file: where its bytes are."""
    __slots__ = ("file", "key", "dtype", "shape", "offset", "nbytes")

    def __init__(self, file, key, dtype, shape, offset, nbytes) -> None:
        self.file, self.key, self.dtype = file, key, dtype
        self.shape, self.offset, self.nbytes = tuple(shape), offset, nbytes


def read_header(path: str) -> dict[str, Tensor]:
    """The tensors of one safetensors file (DiskError when it is not one)."""
    try:
        with open(path, "rb") as f:
            raw = f.read(8)
            if len(raw) != 8:
                raise DiskError(f"{path}: not a safetensors file (no header)")
            (n,) = struct.unpack("<Q", raw)
            if n > _HEADER_MAX:
                raise DiskError(f"{path}: not a safetensors file (a header of {n} bytes)")
            head = json.loads(f.read(n))
            size = os.fstat(f.fileno()).st_size
    except (OSError, ValueError) as e:
        raise DiskError(f"cannot read the safetensors header of {path}: {e}") from None
    out = {}
    base = 8 + n
    for key, v in head.items():
        if key == "__metadata__" or not isinstance(v, dict):
            continue
        dt = _DTYPES.get(v.get("dtype"))
        try:
            a, b = (int(x) for x in v["data_offsets"])
            shape = [int(d) for d in v["shape"]]
        except (KeyError, TypeError, ValueError):
            raise DiskError(f"{path}: tensor {key!r} has no valid shape or offsets") from None
        if dt is None or not 0 <= a <= b or base + b > size:
            continue            # a dtype the experts never have, or a broken entry: not used
        out[key] = Tensor(path, key, dt, shape, base + a, b - a)
    return out


def checkpoint_files(folder: str) -> list[str]:
    """The ``*.safetensors`` files of a model folder, sorted (empty: none)."""
    try:
        return sorted(os.path.join(folder, f) for f in os.listdir(folder)
                      if f.endswith(".safetensors"))
    except OSError:
        return []


class _Part:
    """One checkpoint tensor as a part of an expert parameter's row: ``tensors[e]`` (per
    expert) or one fused tensor whose row ``e`` is read; ``t``: transposed; ``name``: the
    tensor's name after ``experts.[E.]`` in its key (what :func:`recipes_like` looks up in
    another layer)."""
    __slots__ = ("per_expert", "t", "name")

    def __init__(self, per_expert: list[Tensor], t: bool, name: str = "") -> None:
        self.per_expert, self.t, self.name = per_expert, t, name

    def shape(self) -> tuple:
        s = self.per_expert[0].shape
        return tuple(reversed(s)) if self.t else s


class Recipe:
    """How one expert parameter's row is made from the checkpoint: ``parts`` concatenated
    along ``dim`` (0 or -1; one part: as it is)."""
    __slots__ = ("name", "parts", "dim", "direct")

    def __init__(self, name: str, parts: list[_Part], dim: int) -> None:
        self.name, self.parts, self.dim = name, parts, dim
        # stored layout kept: every part as stored, stacked along the first dimension
        self.direct = all(not p.t for p in parts) and (dim == 0 or len(parts) == 1)


def _expert_tensors(tensors: dict[str, Tensor], layer_id: int, E: int) -> dict[str, list[Tensor]]:
    """``{name: [tensor of expert 0 .. E-1]}`` for the MoE layer ``layer_id``: per-expert
    keys (``...layers.N.<...>experts.<e>.<name>``) and fused ``[E, ...]`` tensors
    (``...layers.N.<...>experts.<name>``, one row per expert)."""
    per: dict[str, dict[int, Tensor]] = {}
    fused: dict[str, list[Tensor]] = {}
    pat = re.compile(rf"(?:^|\.)layers\.{layer_id}\.(?:.*\.)?experts\.(?:(\d+)\.)?(.+)$")
    for key, t in tensors.items():
        m = pat.search(key)
        if m is None:
            continue
        if m.group(1) is not None:
            per.setdefault(m.group(2), {})[int(m.group(1))] = t
        elif t.shape and t.shape[0] == E:
            rows = []
            row_bytes = t.nbytes // E
            for e in range(E):
                rows.append(Tensor(t.file, f"{key}[{e}]", t.dtype, t.shape[1:],
                                   t.offset + e * row_bytes, row_bytes))
            fused[m.group(2)] = rows
    out = {name: [d[e] for e in range(E)] for name, d in per.items() if set(d) == set(range(E))}
    out.update(fused)
    return out


def _load(t: Tensor) -> torch.Tensor:
    with open(t.file, "rb") as f:
        f.seek(t.offset)
        raw = bytearray(f.read(t.nbytes))
    if len(raw) != t.nbytes:
        raise DiskError(f"{t.file}: tensor {t.key} is cut short")
    return torch.frombuffer(raw, dtype=t.dtype).reshape(t.shape) if t.nbytes else \
        torch.empty(t.shape, dtype=t.dtype)


def _compose(parts: list[torch.Tensor], ts: tuple, dim: int) -> torch.Tensor:
    xs = [p.t() if t else p for p, t in zip(parts, ts)]
    return xs[0] if len(xs) == 1 else torch.cat(xs, dim=dim)


def recipes(tensors: dict[str, Tensor], layer_id: int, params: dict[str, torch.Tensor],
            where: str) -> list[Recipe]:
    """The recipe of every expert parameter of MoE layer ``layer_id`` (``params``: the
    model's ``[E, ...]`` tensors, still holding the weights), checked against every expert
    (DiskError naming the parameter when none reproduces it)."""
    E = next(iter(params.values())).shape[0]
    cands = _expert_tensors(tensors, layer_id, E)
    out = []
    cache: dict = {}

    def row(name: str, e: int) -> torch.Tensor:
        k = (name, e)
        if k not in cache:
            cache[k] = _load(cands[name][e])
        return cache[k]

    for pname, p in params.items():
        target = p[0].detach()
        found = None
        names = sorted(cands)
        shapes = {n: cands[n][0].shape for n in names}
        options = [((n,),) for n in names] + [((a, b),) for a in names for b in names if a != b]
        for (combo,) in options:
            if any(cands[n][0].dtype != target.dtype for n in combo):
                continue
            for ts in ([(False,), (True,)] if len(combo) == 1 else
                       [(False, False), (True, True)]):
                if any(t and len(shapes[n]) != 2 for n, t in zip(combo, ts)):
                    continue
                for dim in ((0,) if len(combo) == 1 else (0, -1)):
                    shp = [tuple(reversed(shapes[n])) if t else shapes[n] for n, t in zip(combo, ts)]
                    if len(combo) == 1:
                        if shp[0] != tuple(target.shape):
                            continue
                    else:
                        a, b = shp
                        if len(a) != len(b) or len(a) != target.dim():
                            continue
                        d = dim % len(a)
                        joined = list(a)
                        joined[d] = a[d] + b[d]
                        if any(x != y for i, (x, y) in enumerate(zip(a, b)) if i != d) \
                                or tuple(joined) != tuple(target.shape):
                            continue
                    if torch.equal(_compose([row(n, 0) for n in combo], ts, dim), target):
                        found = Recipe(pname, [_Part(cands[n], t, n) for n, t in zip(combo, ts)],
                                       dim)
                        break
                if found:
                    break
            if found:
                break
        if found is None:
            dtypes = sorted({str(cands[n][0].dtype).replace("torch.", "") for n in names})
            raise DiskError(
                f"{where}: the checkpoint's tensors of MoE layer {layer_id} do not make the "
                f"model's expert parameter '{pname}' ({tuple(target.shape)}, "
                f"{str(target.dtype).replace('torch.', '')}); its experts' tensors there: "
                f"{', '.join(names) or 'none'} ({', '.join(dtypes) or '-'}). A model converted "
                f"at load (another dtype, quantized) cannot read its checkpoint as a disk "
                f"tier: give the tier a path (the experts are written there once)")
        for e in range(1, E):
            names_ = [pt.per_expert[e] for pt in found.parts]
            got = _compose([_load(t) for t in names_], tuple(pt.t for pt in found.parts), found.dim)
            if not torch.equal(got, p[e].detach()):
                raise DiskError(f"{where}: expert {e} of MoE layer {layer_id} in the checkpoint "
                                f"differs from the model's ('{pname}'): the model's weights "
                                f"were changed after loading; give the disk tier a path")
        out.append(found)
    return out


def recipes_like(tensors: dict[str, Tensor], layer_id: int, ref: list[Recipe],
                 layout: RecordLayout, E: int, where: str) -> list[Recipe]:
    """The recipes of MoE layer ``layer_id`` made as ``ref`` (another layer's, found from the
    values by :func:`recipes`), for a model whose experts were never loaded: every expert's
    parts must exist in the checkpoint and compose, by shape and dtype, exactly the record's
    row of each parameter (``layout``); DiskError naming the layer, the expert and the
    parameter otherwise. The values are not compared (there are none to compare with)."""
    cands = _expert_tensors(tensors, layer_id, E)
    rows = {name: (row, dt) for name, row, dt, _off, _n in layout.params}
    out = []
    for r in ref:
        row, dt = rows[r.name]
        parts = []
        for pt in r.parts:
            per = cands.get(pt.name)
            if per is None:
                raise DiskError(
                    f"{where}: MoE layer {layer_id} has no checkpoint tensors "
                    f"'experts.*.{pt.name}' for every one of its {E} experts (the model's "
                    f"'{r.name}' is made from them in the layer the loader checked)")
            parts.append(_Part(per, pt.t, pt.name))
        for e in range(E):
            shapes = [tuple(reversed(p.per_expert[e].shape)) if p.t else p.per_expert[e].shape
                      for p in parts]
            if len(shapes) == 1:
                got = shapes[0]
            else:
                d = r.dim % len(shapes[0])
                got = list(shapes[0])
                got[d] = sum(s[d] for s in shapes)
                if any(len(s) != len(shapes[0]) or any(x != y for i, (x, y) in
                       enumerate(zip(s, shapes[0])) if i != d) for s in shapes):
                    got = None
            bad = [p.per_expert[e] for p in parts if p.per_expert[e].dtype != dt]
            if got is None or tuple(got) != tuple(row) or bad:
                have = ", ".join(f"{p.per_expert[e].key} {tuple(p.per_expert[e].shape)} "
                                 f"{str(p.per_expert[e].dtype).replace('torch.', '')}"
                                 for p in parts)
                raise DiskError(
                    f"{where}: expert {e} of MoE layer {layer_id} in the checkpoint does not "
                    f"make the model's '{r.name}' ({tuple(row)}, "
                    f"{str(dt).replace('torch.', '')}): {have}")
        out.append(Recipe(r.name, parts, r.dim))
    return out


class CheckpointStore(RecordFiles):
    """The disk tier over the checkpoint's files: the interface of
    :class:`mpl.mechanism.disk.DiskStore` (``read``, ``read_layer``, ``open``, ``close``,
    ``remove``, ``files``, ``page_cache``), read-only."""

    direct = False
    page_cache = "posix_fadvise(DONTNEED)"

    def __init__(self, folder: str, layout: RecordLayout, layers, num_experts: int,
                 known: dict | None = None) -> None:
        self.root = os.path.abspath(folder)
        #: decoder-layer id -> its recipes, found when the model was loaded without its
        #: experts (``mpl.offload.skeleton``): ``write`` then compares no values
        self.known = known
        self.layout = layout
        self.E = int(num_experts)
        self.layers = list(layers)         # (ordinal, decoder-layer id)
        self.recipes: dict[int, list[Recipe]] = {}
        self.fds: dict[str, int] = {}
        self._local = threading.local()
        self.files: dict[int, str] = {}

    def write(self, params: dict) -> None:
        """Find and check every layer's recipes (``params``: ``{ordinal: {name: [E, ...]}}``,
        the model's weights, still in place). Nothing is written: the name keeps the
        interface of the store that writes its files here."""
        files = checkpoint_files(self.root)
        if not files:
            raise DiskError(f"the model's folder {self.root} has no .safetensors files")
        tensors: dict[str, Tensor] = {}
        for f in files:
            tensors.update(read_header(f))
        for o, lid in self.layers:
            if self.known is not None:
                if lid not in self.known:
                    raise DiskError(f"{self.root}: MoE layer {lid} was not checked when the "
                                    f"model was loaded")
                rs = self.known[lid]
            else:
                rs = recipes(tensors, lid, params[o], self.root)
            order = {n: i for i, (n, *_r) in enumerate(self.layout.params)}
            self.recipes[o] = sorted(rs, key=lambda r: order[r.name])
            self.files[o] = ", ".join(sorted({pt.per_expert[0].file for r in rs for pt in r.parts}))

    def open(self, direct: bool = True) -> None:
        """Open the checkpoint's files, buffered whatever ``direct`` says (the user's files:
        reads drop their pages instead)."""
        for rs in self.recipes.values():
            for r in rs:
                for pt in r.parts:
                    f = pt.per_expert[0].file
                    if f not in self.fds:
                        try:
                            self.fds[f] = os.open(f, os.O_RDONLY)
                            no_readahead(self.fds[f])      # nothing past a read stays cached
                        except OSError as e:
                            raise DiskError(f"cannot open {f}: {e}") from None

    def _pread(self, t: Tensor, buf: memoryview) -> None:
        fd = self.fds[t.file]
        done = 0
        try:
            while done < t.nbytes:
                got = os.preadv(fd, [buf[done:t.nbytes]], t.offset + done)
                if got <= 0:
                    raise DiskError(f"{t.file}: tensor {t.key} is cut short")
                done += got
            if hasattr(os, "posix_fadvise"):
                os.posix_fadvise(fd, t.offset, t.nbytes, os.POSIX_FADV_DONTNEED)
        except OSError as e:
            raise DiskError(f"cannot read {t.key} from {t.file}: {e}") from None

    def _scratch(self, n: int) -> torch.Tensor:
        s = getattr(self._local, "buf", None)
        if s is None or s.numel() < n:
            s = self._local.buf = torch.empty(n, dtype=torch.uint8)
        return s

    def read(self, ordinal: int, expert: int, record: torch.Tensor) -> int:
        """Expert ``expert`` of MoE layer ``ordinal`` into ``record`` (uint8, ``stride``
        bytes). Thread-safe. Returns the bytes read."""
        L = self.layout
        total = 0
        for r, (_name, row, dt, off, n) in zip(self.recipes[ordinal], L.params):
            dst = record[off:off + n]
            if r.direct:
                at = 0
                mv = memoryview(_buffer(dst, n)).cast("B")
                for pt in r.parts:
                    t = pt.per_expert[expert]
                    self._pread(t, mv[at:at + t.nbytes])
                    at += t.nbytes
                total += n
                continue
            scratch = self._scratch(n)
            pieces, at = [], 0
            mv = memoryview(_buffer(scratch, n)).cast("B")
            for pt in r.parts:
                t = pt.per_expert[expert]
                self._pread(t, mv[at:at + t.nbytes])
                pieces.append(scratch[at:at + t.nbytes].view(t.dtype).view(t.shape))
                at += t.nbytes
            out = dst.view(dt).view(row)
            xs = [x.t() if pt.t else x for x, pt in zip(pieces, r.parts)]
            if len(xs) == 1:
                out.copy_(xs[0])
            else:
                torch.cat(xs, dim=r.dim, out=out)
            total += n
        return total

    def remove(self) -> None:
        """Close the files; they are the checkpoint's, never removed."""
        self.close()
