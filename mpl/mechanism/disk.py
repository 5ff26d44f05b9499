"""The disk tier and the bounded host cache above it (SPEC §12; docs/offload.md, "Memory
tiers live").

* :class:`RecordLayout`: one expert of a MoE layer as one **record** of bytes: every expert
  parameter's row ``[e]``, in the model's own layout, one after the other, the record padded
  to ``IO_ALIGN`` bytes when that costs no host memory beyond the tier's capacity (so the
  disk can be read with ``O_DIRECT``), else to 64 bytes.
* :class:`DiskStore`: the disk tier's files, written once at attach into a folder of its
  own under the tier's ``path`` (``mpl-experts-XXXXXXXX/layer-NNN.bin``: one file per MoE
  layer, decoder-layer id NNN, its experts' records in expert-id order, no header), read
  record by record with ``os.preadv`` (positional: safe from several threads at once), one
  call per record. The OS page cache keeps no second copy: files are opened with
  ``O_DIRECT`` where the file system takes it and the records are aligned; otherwise they
  are opened buffered with ``POSIX_FADV_RANDOM`` (no readahead: the kernel reads the
  requested bytes and nothing past them) and every read is followed by
  ``posix_fadvise(POSIX_FADV_DONTNEED)`` over the bytes it read (and the write, after
  ``fdatasync``, by the same over the whole file). Readahead with the window past the record
  dropped as well was measured and left pages behind (readahead still in flight when the
  drop runs is not dropped): docs/performance.md, "Disk tier".
* :class:`HostCache`: the host tier: ``slots`` records in one host arena (``Ops.host_arena``:
  page-locked on CUDA, so copies into device slots are DMA transfers; backed by transparent
  huge pages where the kernel has them, so a direct read reaches the device in requests of
  up to ``max_sectors_kb`` instead of ~1 MiB: ``mpl.mechanism.hostmem``), exactly the
  runtime's slots of that tier, so the host memory holding experts is ``slots x stride``
  bytes, never above the tier's capacity. ``tensors[name]`` is a ``[slots, ...]`` view per
  parameter, the shape ``SlotPool.copy_in`` copies from.

Threads: the reader threads (:class:`Readers`) only run :meth:`DiskStore.read`, each into
the one record it was handed, which nothing else touches until its future is waited for;
every other piece of state here (the cache's contents, its pending reads and copy events,
the counters) belongs to the thread that executes Plans (the engine's), and is read and
written by it alone.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import torch

IO_ALIGN = 4096          # bytes: O_DIRECT alignment of buffers, offsets and lengths


class DiskError(RuntimeError):
    """A disk tier's file could not be written or read (the message names the file)."""


def _up(n: int, a: int) -> int:
    return (n + a - 1) // a * a


class RecordLayout:
    """Where each expert parameter's row sits in a record: ``(name, row shape, dtype,
    offset, nbytes)`` per parameter; ``nbytes`` the data, ``stride`` the record. A record is
    ``IO_ALIGN``-aligned (``aligned``: read with O_DIRECT) when its data is a whole number of
    ``IO_ALIGN`` blocks (every real checkpoint: hidden sizes are multiples of 1024), so the
    padding never costs host memory; else it is the data rounded to the largest element
    size, read buffered."""

    def __init__(self, template: dict) -> None:
        self.params = []
        off = 0
        big = 1
        for name, t in template.items():
            row = tuple(t.shape[1:])
            es = t.element_size()
            big = max(big, es)
            off = _up(off, es)
            n = es
            for d in row:
                n *= int(d)
            self.params.append((name, row, t.dtype, off, n))
            off += n
        self.nbytes = off
        self.aligned = off % IO_ALIGN == 0
        self.stride = off if self.aligned else _up(off, big)

    def views(self, arena: torch.Tensor, base: int, count: int) -> dict:
        """``{name: [count, ...]}`` typed views of ``count`` records of ``arena`` (uint8)
        starting at byte ``base``."""
        out = {}
        for name, row, dtype, off, _n in self.params:
            es = torch.empty((), dtype=dtype).element_size()
            flat = arena.view(dtype) if arena.numel() % es == 0 else arena[:arena.numel() // es * es].view(dtype)
            strides = []
            acc = 1
            for d in reversed(row):
                strides.append(acc)
                acc *= int(d)
            strides.reverse()
            out[name] = torch.as_strided(flat, (count, *row), (self.stride // es, *strides),
                                         flat.storage_offset() + (base + off) // es)
        return out


def _buffer(t: torch.Tensor, nbytes: int):
    """A writable ctypes buffer over the first ``nbytes`` bytes of tensor ``t``."""
    return (ctypes.c_char * nbytes).from_address(t.data_ptr())


def no_readahead(fd: int) -> None:
    """No readahead on ``fd`` (``POSIX_FADV_RANDOM``): a buffered read brings into the page
    cache the bytes it asked for and nothing past them, so the ``POSIX_FADV_DONTNEED`` after
    it leaves none of the file there."""
    if hasattr(os, "posix_fadvise"):
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)


class RecordFiles:
    """What every disk tier's store does the same way, however it reads one record
    (``read``, thread-safe): a whole layer read back (detach) and its files closed. A
    subclass sets ``layout`` (:class:`RecordLayout`), ``E`` (experts per layer) and ``fds``
    (its open file descriptors)."""

    def read_layer(self, ordinal: int, template: dict) -> dict:
        """Every expert of a layer as fresh ``[E, ...]`` tensors (detach restores them)."""
        L = self.layout
        arena = torch.empty(L.stride * self.E + IO_ALIGN, dtype=torch.uint8)
        base = (-arena.data_ptr()) % IO_ALIGN
        for e in range(self.E):
            self.read(ordinal, e, arena[base + e * L.stride: base + (e + 1) * L.stride])
        views = L.views(arena, base, self.E)
        return {name: views[name].contiguous() for name in template}

    def read_part(self, ordinal: int, expert: int, pieces, record: torch.Tensor) -> int:
        """Part of expert ``expert`` of MoE layer ``ordinal`` into ``record`` (a part record,
        uint8): ``pieces`` the ``(offset in the expert's record, offset in the part record,
        bytes)`` of each parameter's run (:func:`part_pieces`). This default reads the whole
        expert into a scratch record of the calling thread and copies the runs out (a store
        whose records are composed from other files); :class:`DiskStore` reads the runs
        alone. Thread-safe. Returns the bytes read from the files."""
        local = self.__dict__.setdefault("_part_local", threading.local())
        n = self.layout.stride
        buf = getattr(local, "buf", None)
        if buf is None or buf.numel() < n + IO_ALIGN:
            buf = local.buf = torch.empty(n + IO_ALIGN, dtype=torch.uint8)
        base = (-buf.data_ptr()) % IO_ALIGN
        whole = buf[base:base + n]
        got = self.read(ordinal, expert, whole)
        for src, dst, k in pieces:
            record[dst:dst + k].copy_(whole[src:src + k])
        return got

    def close(self) -> None:
        for fd in self.fds.values():
            try:
                os.close(fd)
            except OSError:
                pass
        self.fds = {}


class KeyedRecords:
    """Which key each of ``slots`` records holds (``content[j]``) and which record holds
    each key (``where[key]``), kept consistent by :meth:`put`: the host tier's records here,
    a low-precision tier's device slots (``mpl.mechanism.lowprec``)."""

    def __init__(self, slots: int) -> None:
        self.content: list = [None] * slots
        self.where: dict = {}

    def put(self, j: int, key) -> None:
        old = self.content[j]
        if old is not None and self.where.get(old) == j:
            del self.where[old]
        self.content[j] = key
        if key is not None:
            self.where[key] = j


class DiskStore(RecordFiles):
    """The disk tier's files (see the module docstring). ``folder``: the tier's ``path``;
    ``layers``: the MoE layers it holds, as (ordinal, decoder-layer id) pairs."""

    def __init__(self, folder: str, layout: RecordLayout, layers, num_experts: int) -> None:
        self.root = os.path.abspath(folder)
        self.layout = layout
        self.E = int(num_experts)
        self.dir = os.path.join(self.root, f"mpl-experts-{uuid.uuid4().hex[:8]}")
        self.fds: dict[int, int] = {}
        self.direct = False
        #: MoE-layer ordinal -> its file (``layers``: (ordinal, decoder-layer id) pairs)
        self.files = {o: os.path.join(self.dir, f"layer-{d:03d}.bin") for o, d in layers}

    @property
    def file_bytes(self) -> int:
        return self.layout.stride * self.E

    @property
    def page_cache(self) -> str:
        """How the OS page cache is kept from holding a second copy."""
        return "O_DIRECT" if self.direct else "posix_fadvise(DONTNEED)"

    # ------------------------------------------------------------------ writing (attach)
    def write(self, layers: dict) -> None:
        """Write every MoE layer's experts (``{ordinal: {name: [E, ...] tensor}}``), each
        file under a temporary name renamed when complete; on any failure every file and
        the folder are removed and :class:`DiskError` says why."""
        need = self.file_bytes * len(self.files)
        try:
            if not os.path.isdir(self.root):
                parent = os.path.dirname(self.root) or "."
                if not os.path.isdir(parent):
                    raise DiskError(f"the folder {self.root} does not exist (nor its parent)")
                os.mkdir(self.root)
            free = shutil.disk_usage(self.root).free
            if free < need:
                raise DiskError(f"{self.root} has {free} bytes free; the experts need {need}")
            os.mkdir(self.dir)
        except OSError as e:
            raise DiskError(f"cannot create the expert files under {self.root}: {e}") from None
        try:
            L = self.layout
            rec = torch.zeros(L.stride, dtype=torch.uint8)
            for o, path in self.files.items():
                params = layers[o]
                tmp = path + ".tmp"
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                try:
                    for e in range(self.E):
                        for name, _row, _dt, off, n in L.params:
                            src = params[name][e].detach().contiguous().reshape(-1).view(torch.uint8)
                            rec[off:off + n].copy_(src)
                        mv = memoryview(_buffer(rec, L.stride)).cast("B")
                        done = 0
                        while done < L.stride:
                            done += os.write(fd, mv[done:])
                    os.fdatasync(fd)
                    if hasattr(os, "posix_fadvise"):
                        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                finally:
                    os.close(fd)
                os.rename(tmp, path)
        except BaseException as e:
            self.remove()
            if isinstance(e, OSError):
                raise DiskError(f"cannot write the expert files under {self.root}: {e}") from None
            raise

    def open(self, direct: bool = True) -> None:
        """Open every file for reading: ``O_DIRECT`` when the records are aligned and the
        file system takes it, else buffered without readahead (``POSIX_FADV_RANDOM``; reads
        then drop their pages). ``direct``: False for a tier read in parts
        (:meth:`read_part`: runs that are not aligned)."""
        flags = os.O_RDONLY
        direct = direct and self.layout.aligned and hasattr(os, "O_DIRECT")
        for o, path in self.files.items():
            fd = -1
            if direct:
                try:
                    fd = os.open(path, flags | os.O_DIRECT)
                except OSError:
                    direct = False
            if fd < 0:
                fd = os.open(path, flags)
            self.fds[o] = fd
        if not direct and self.fds and self.layout.aligned and hasattr(os, "O_DIRECT"):
            # some files opened direct before one refused: make them all buffered
            for o, path in self.files.items():
                os.close(self.fds[o])
                self.fds[o] = os.open(path, flags)
        self.direct = direct
        if not direct:
            for fd in self.fds.values():
                no_readahead(fd)

    # ------------------------------------------------------------------ reading
    def read_part(self, ordinal: int, expert: int, pieces, record: torch.Tensor) -> int:
        """The runs of one part of an expert (``pieces``: :func:`part_pieces`) read straight
        from the file into the part record ``record``, one ``os.preadv`` per run; then the
        pages of the expert's record dropped. The runs are not block-aligned: the files are
        opened buffered (:meth:`open` with ``direct=False``). Thread-safe."""
        fd = self.fds[ordinal]
        at = expert * self.layout.stride
        done = 0
        try:
            for src, dst, k in pieces:
                buf = memoryview(_buffer(record[dst:dst + k], k)).cast("B")
                got = 0
                while got < k:
                    m = os.preadv(fd, [buf[got:]], at + src + got)
                    if m <= 0:
                        raise DiskError(f"{self.files[ordinal]}: expert {expert} is cut short "
                                        f"({src + got} of {self.layout.stride} bytes at offset "
                                        f"{at})")
                    got += m
                done += k
            if hasattr(os, "posix_fadvise"):
                os.posix_fadvise(fd, at, self.layout.stride, os.POSIX_FADV_DONTNEED)
        except OSError as e:
            raise DiskError(f"cannot read expert {expert} from {self.files[ordinal]}: {e}") from None
        return done

    def read(self, ordinal: int, expert: int, record: torch.Tensor) -> int:
        """Read expert ``expert`` of MoE layer ``ordinal`` into ``record`` (a uint8 tensor of
        ``stride`` bytes; IO_ALIGN-aligned for O_DIRECT). Thread-safe. Returns the bytes read."""
        n = self.layout.stride
        fd = self.fds[ordinal]
        off = expert * n
        buf = memoryview(_buffer(record, n)).cast("B")
        done = 0
        try:
            while done < n:
                got = os.preadv(fd, [buf[done:]], off + done)
                if got <= 0:
                    raise DiskError(f"{self.files[ordinal]}: expert {expert} is cut short "
                                    f"({done} of {n} bytes at offset {off})")
                done += got
            if not self.direct and hasattr(os, "posix_fadvise"):
                os.posix_fadvise(fd, off, n, os.POSIX_FADV_DONTNEED)
        except OSError as e:
            raise DiskError(f"cannot read expert {expert} from {self.files[ordinal]}: {e}") from None
        return done

    def remove(self) -> None:
        """Close and delete the files and their folder (detach, or a failed attach)."""
        self.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class Readers:
    """A small pool of reader threads; ``threads = 0``: every read runs in the caller's
    thread when submitted (nothing overlaps)."""

    def __init__(self, threads: int) -> None:
        self.threads = int(threads)
        self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="mpl-disk") \
            if self.threads > 0 else None
        self.busy_ms = 0.0        # time the reads took, summed over threads
        self._lock = threading.Lock()   # guards busy_ms only (written by every reader)

    def _timed(self, fn, *args):
        t0 = time.perf_counter()
        try:
            return fn(*args)
        finally:
            ms = (time.perf_counter() - t0) * 1e3
            with self._lock:
                self.busy_ms += ms

    def submit(self, fn, *args):
        if self._pool is None:
            return _Done(self._timed, fn, *args)
        return self._pool.submit(self._timed, fn, *args)

    def shutdown(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None


class _Done:
    """A read run at once (``Readers(0)``), with a future's ``done``/``result``."""

    def __init__(self, timed, fn, *args) -> None:
        self._exc = None
        self._value = None
        try:
            self._value = timed(fn, *args)
        except BaseException as e:      # re-raised where the result is waited for
            self._exc = e

    def done(self) -> bool:
        return True

    def result(self):
        if self._exc is not None:
            raise self._exc
        return self._value


class HostCache(KeyedRecords):
    """The host tier's ``slots`` records (see the module docstring). ``content[j]``: the key
    record ``j`` holds (as the Plans put it there); ``pending[j]``: the read into it not yet
    waited for; ``users[j]``: device-copy events that read or write it (CUDA), every one
    completed before the host writes into it again. ``huge_pages``: the arena backed by
    transparent huge pages where the kernel has them (the default; False: ordinary pages,
    the layout the read benchmark compares against)."""

    def __init__(self, layout: RecordLayout, slots: int, ops, huge_pages: bool = True) -> None:
        self.layout = layout
        self.slots = int(slots)
        self.ops = ops
        self.arena = ops.host_arena(layout.stride * self.slots + IO_ALIGN, huge_pages=huge_pages)
        self.base = (-self.arena.data_ptr()) % IO_ALIGN if layout.aligned else 0
        self.tensors = layout.views(self.arena, self.base, self.slots)
        KeyedRecords.__init__(self, self.slots)
        self.pending: list = [None] * self.slots
        self.users: list = [[] for _ in range(self.slots)]

    @property
    def nbytes(self) -> int:
        """Host bytes holding experts: the records (``slots x stride``)."""
        return self.layout.stride * self.slots

    @property
    def arena_bytes(self) -> int:
        return 0 if self.arena is None else self.arena.numel()

    def record(self, j: int) -> torch.Tensor:
        s = self.layout.stride
        return self.arena[self.base + j * s: self.base + (j + 1) * s]

    def release(self) -> None:
        if self.arena is not None:
            self.ops.release_arena(self.arena)
            self.arena = None
            self.tensors = {}


class PartLayout:
    """Where part ``p`` of each parameter's row lies: ``ranges[p][name] = (start, end)`` in
    the row's elements (memory order); ``chunk``: elements of the longest part."""

    def __init__(self, template: dict, n: int) -> None:
        self.n = int(n)
        self.chunk: dict = {}
        self.ranges: list = [{} for _ in range(self.n)]
        for name, t in template.items():
            numel = t[0].numel()
            c = max(1, -(-numel // self.n))
            self.chunk[name] = c
            for p in range(self.n):
                self.ranges[p][name] = (min(p * c, numel), min((p + 1) * c, numel))


def part_layout(template: dict, n: int) -> RecordLayout:
    """The record of one part of an expert (``granularity_split = n``,
    ``PartLayout``): per parameter a row of the part's longest run
    (``ceil(numel / n)`` elements), so a host tier over a disk tier holds parts, each
    ``1/n`` of an expert (``template``: ``{name: [E, ...]}``)."""
    chunk = PartLayout(template, n).chunk
    return RecordLayout({name: torch.empty((1, chunk[name]), dtype=t.dtype)
                         for name, t in template.items()})


def part_pieces(layout: RecordLayout, parts: RecordLayout, ranges: dict) -> list:
    """Where part ``ranges`` (``PartLayout.ranges[p]``: name -> element run) of an expert
    lies: ``(offset in the expert's record, offset in the part record, bytes)`` per
    parameter with a non-empty run (``layout``: the expert's record; ``parts``: the part
    record, :func:`part_layout`)."""
    dst = {name: off for name, _row, _dt, off, _n in parts.params}
    out = []
    for name, _row, dtype, off, _n in layout.params:
        a, b = ranges[name]
        if b > a:
            es = torch.empty((), dtype=dtype).element_size()
            out.append((off + a * es, dst[name], (b - a) * es))
    return out
