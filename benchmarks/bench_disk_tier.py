"""The disk tier's read throughput and its overlap with compute, measured in one run.

1. Read throughput: every record of one layer file written by a disk tier, read in a
   shuffled order by the tier's reader threads into its host cache, exactly as a live run
   reads (``DiskStore.read``: O_DIRECT where the file system takes it, into a host cache in
   transparent huge pages), against the sequential read of the same file, alternating
   ``--reps`` times (the order of the two sides flips every repetition). The sequential
   speed of a repetition is the faster of two reads of the whole file in 8 MiB requests:
   buffered with the kernel's readahead (what ``cat`` and ``dd`` do) and ``O_DIRECT`` into a
   huge-page buffer (the fastest sequential read found on the development VM). The page
   cache is dropped for the file before every read, either side; the host records are
   touched once before any timing (a live tier reuses its records; the sequential side
   reuses its buffer). Prints each repetition, the median ratio (target >= 0.70) and the
   bytes of the file left in the page cache after the tier's reads (mincore).
   ``--compare`` also measures other read designs the same way (each against the
   sequential read of its own repetition): see ``DESIGNS``.
2. Decode time per token of a model whose experts do not fit the host tier, with reads
   overlapped (reader threads; prefetch reads run while the layer before computes) and not
   (readers=0: every read in the engine's thread, when its copy is issued).

Usage: python benchmarks/bench_disk_tier.py [--folder DIR] [--hidden 1024] [--tokens 12]
       [--reps 7] [--compare] [--no-decode]
"""

from __future__ import annotations

import argparse
import mmap
import os
import random
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

BLOCK = 8 << 20        # bytes per request of the sequential reads
READAHEAD = 8 << 20    # the window dropped past a record by the "readahead+drop" design


def drop(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def _view(t, n: int) -> memoryview:
    import ctypes
    return memoryview((ctypes.c_char * n).from_address(t.data_ptr())).cast("B")


def sequential_mb_s(path: str, direct_buf=None) -> float:
    """One read of the whole file in ``BLOCK`` requests, page cache dropped first: buffered
    (kernel readahead), or ``O_DIRECT`` into ``direct_buf`` (an aligned uint8 tensor)."""
    drop(path)
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECT if direct_buf is not None else 0))
    try:
        mv = _view(direct_buf, BLOCK) if direct_buf is not None else memoryview(bytearray(BLOCK))
        n = 0
        t0 = time.perf_counter()
        while True:
            got = os.preadv(fd, [mv], n)
            if got <= 0:
                break
            n += got
        dt = time.perf_counter() - t0
    finally:
        os.close(fd)
    drop(path)
    return n / dt / 1e6


def _full(fd: int, mv: memoryview, off: int) -> None:
    done = 0
    while done < len(mv):
        got = os.preadv(fd, [mv[done:]], off + done)
        if got <= 0:
            raise EOFError(f"short read at {off + done}")
        done += got


class RawDesign:
    """A read design over one open file: ``read(e, record)`` fills ``record`` with expert
    ``e`` (thread-safe); ``queued(e)`` runs in the submitting thread when the read is queued."""

    def __init__(self, path: str, stride: int, flags: int = 0, advice=None) -> None:
        self.path, self.n = path, stride
        self.fd = os.open(path, os.O_RDONLY | flags)
        if advice is not None:
            os.posix_fadvise(self.fd, 0, 0, advice)

    def queued(self, e: int) -> None:
        pass

    def close(self) -> None:
        os.close(self.fd)


class ReadaheadDrop(RawDesign):
    """Buffered, the kernel's readahead on; after a read, DONTNEED over the record and the
    readahead window past it."""

    def read(self, e, record):
        _full(self.fd, _view(record, self.n), e * self.n)
        os.posix_fadvise(self.fd, e * self.n, self.n + READAHEAD, os.POSIX_FADV_DONTNEED)


class WillneedAhead(RawDesign):
    """Buffered without readahead; WILLNEED over a record when its read is queued (the
    kernel starts it at once), read when a reader takes it, then DONTNEED."""

    def __init__(self, path, stride):
        super().__init__(path, stride, advice=os.POSIX_FADV_RANDOM)

    def queued(self, e):
        os.posix_fadvise(self.fd, e * self.n, self.n, os.POSIX_FADV_WILLNEED)

    def read(self, e, record):
        _full(self.fd, _view(record, self.n), e * self.n)
        os.posix_fadvise(self.fd, e * self.n, self.n, os.POSIX_FADV_DONTNEED)


class MmapCopy(RawDesign):
    """A shared read-only mapping of the file: MADV_WILLNEED over the record, a copy out,
    then MADV_DONTNEED and DONTNEED (the mapping and the page cache both let go)."""

    def __init__(self, path, stride):
        super().__init__(path, stride)
        import numpy as np
        self.m = mmap.mmap(self.fd, os.path.getsize(path), prot=mmap.PROT_READ)
        self.arr = np.frombuffer(self.m, dtype=np.uint8)

    def read(self, e, record):
        import ctypes
        off = e * self.n
        self.m.madvise(mmap.MADV_WILLNEED, off, self.n)
        ctypes.memmove(record.data_ptr(), self.arr.ctypes.data + off, self.n)
        self.m.madvise(mmap.MADV_DONTNEED, off, self.n)
        os.posix_fadvise(self.fd, off, self.n, os.POSIX_FADV_DONTNEED)

    def close(self):
        del self.arr
        self.m.close()
        super().close()


class StoreDesign:
    """The tier's own store (``DiskStore.read``), opened as attach opens it, or buffered."""

    def __init__(self, disk, direct: bool) -> None:
        self.disk = disk
        disk.close()
        disk.open(direct=direct)

    def queued(self, e):
        pass

    def read(self, e, record):
        self.disk.read(0, e, record)

    def close(self):
        pass


def tier_mb_s(design, cache, threads: int, experts: int, seed: int, coalesce: bool = False) -> float:
    """Every record once, in a shuffled order, by ``threads`` readers into the host cache's
    records in turn (a record is reused once its read is done, as the tier waits). With
    ``coalesce``: the order is taken ``cache.slots`` at a time, each batch sorted by offset
    and runs of adjacent records read with one ``preadv`` into their records (O_DIRECT)."""
    from mpl.mechanism.disk import Readers

    order = list(range(experts))
    random.Random(seed).shuffle(order)
    stride = cache.layout.stride
    pool = Readers(threads)                   # the tier's reader threads
    futs: list = []
    t0 = time.perf_counter()
    if coalesce:
        for b in range(0, experts, cache.slots):
            batch = sorted(order[b:b + cache.slots])
            for f in futs:
                f.result()
            futs = []
            run: list = []
            for j, e in enumerate(batch):
                run.append((e, j))
                if j + 1 == len(batch) or batch[j + 1] != e + 1:
                    mvs = [_view(cache.record(k), stride) for _e, k in run]
                    futs.append(pool.submit(os.preadv, design.fd, mvs, run[0][0] * stride))
                    run = []
    else:
        for i, e in enumerate(order):
            j = i % cache.slots
            if len(futs) >= cache.slots:          # the record is reused: its read must be done
                futs.pop(0).result()
            design.queued(e)
            futs.append(pool.submit(design.read, e, cache.record(j)))
    for f in futs:
        f.result()
    dt = time.perf_counter() - t0
    pool.shutdown()
    return experts * stride / dt / 1e6


def throughput(args, folder, params) -> None:
    import torch

    from mpl.mechanism.device import SyncOps
    from mpl.mechanism.disk import DiskStore, HostCache, RecordLayout
    from mpl.mechanism.hostmem import huge_resident, page_cache_bytes, thp_mode

    layout = RecordLayout(params)
    disk = DiskStore(folder, layout, [(0, 0)], args.experts)
    disk.write({0: params})
    disk.open()
    path = disk.files[0]
    ops = SyncOps(torch.device("cpu"))
    slots = max(2, args.readers * 2)
    cache = HostCache(layout, slots, ops)
    cache.arena.fill_(0)                   # the records touched once, as a running tier's are
    plain = HostCache(layout, slots, ops, huge_pages=False)
    plain.arena.fill_(0)
    seqbuf = HostCache(layout, 1 + BLOCK // layout.stride, ops)   # >= BLOCK, aligned, huge pages
    seqbuf.arena.fill_(0)
    seqrec = seqbuf.arena[seqbuf.base:]
    direct = disk.direct
    designs = [("tier", lambda: StoreDesign(disk, True), cache, False)]
    if args.compare:
        designs += [
            ("O_DIRECT, 4 KiB-page records", lambda: StoreDesign(disk, True), plain, False),
            ("buffered, no readahead (the tier's fallback)", lambda: StoreDesign(disk, False), cache, False),
            ("buffered, readahead + drop record and 8 MiB past it", lambda: ReadaheadDrop(path, layout.stride), cache, False),
            ("buffered, WILLNEED when queued", lambda: WillneedAhead(path, layout.stride), cache, False),
            ("mmap + WILLNEED + copy + DONTNEED", lambda: MmapCopy(path, layout.stride), cache, False),
            ("O_DIRECT, batches sorted by offset, adjacent coalesced",
             lambda: RawDesign(path, layout.stride, os.O_DIRECT if direct else 0), cache, True),
        ]
    print(f"file: {args.experts} experts x {layout.stride / (1 << 20):.1f} MiB; tier: "
          f"{disk.page_cache}, {args.readers} readers, host cache of {slots} records; "
          f"transparent huge pages: {thp_mode()}, host cache in huge pages: "
          f"{huge_resident(cache.arena.data_ptr(), cache.arena.numel()) >> 20} MiB")
    rows = {name: [] for name, *_ in designs}
    left = {name: 0 for name, *_ in designs}
    for r in range(args.reps):
        for name, make, records, coalesce in designs:
            seq = {}

            def sequential():
                seq["buffered"] = sequential_mb_s(path)
                seq["direct"] = sequential_mb_s(path, seqrec) if direct else 0.0

            if r % 2 == 0:
                sequential()
            drop(path)
            d = make()
            try:
                mb = tier_mb_s(d, records, args.readers, args.experts, seed=r, coalesce=coalesce)
                left[name] = max(left[name], page_cache_bytes(path))
            finally:
                d.close()
            drop(path)
            if r % 2 == 1:
                sequential()
            best = max(seq.values())
            rows[name].append((mb, seq["buffered"], seq["direct"], mb / best, mb / seq["buffered"]))
            if name == "tier":
                print(f"rep {r}: {'tier first' if r % 2 else 'sequential first'}: sequential "
                      f"buffered {seq['buffered']:7.0f} MB/s, O_DIRECT {seq['direct']:7.0f} MB/s; "
                      f"tier {mb:7.0f} MB/s; ratio {mb / best:.2f} (to buffered {mb / seq['buffered']:.2f})")
    disk.close()
    disk.open()
    print(f"{'design':58s} {'MB/s':>6s} {'ratio':>6s} {'to buffered':>11s}  page cache left  per repetition")
    for name, rs in rows.items():
        print(f"{name:58s} {statistics.median(x[0] for x in rs):6.0f} "
              f"{statistics.median(x[3] for x in rs):6.2f} {statistics.median(x[4] for x in rs):11.2f}  "
              f"{left[name] / (1 << 20):9.1f} MiB   [{', '.join(f'{x[3]:.2f}' for x in rs)}]")
    print(f"median ratio of the tier's reads to the sequential read: "
          f"{statistics.median(x[3] for x in rows['tier']):.2f} (target >= 0.70)")
    disk.remove()
    for c in (cache, plain, seqbuf):
        c.release()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--folder", default=None, help="where the disk tier writes (default: a temp dir)")
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--experts", type=int, default=16)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=12)
    ap.add_argument("--readers", type=int, default=4)
    ap.add_argument("--strategy", default="history,lookahead",
                    help="the policy's prefetch strategies to measure, comma-separated")
    ap.add_argument("--budget", type=int, default=2, help="the policy's prefetch budget")
    ap.add_argument("--batch", type=int, default=1, help="sequences decoded together")
    ap.add_argument("--host-share", type=float, default=0.25,
                    help="the host tier's share of the experts")
    ap.add_argument("--no-throughput", action="store_true", help="skip the read-throughput part")
    ap.add_argument("--no-decode", action="store_true", help="skip the decode part")
    ap.add_argument("--reps", type=int, default=7, help="repetitions of the read comparison")
    ap.add_argument("--compare", action="store_true",
                    help="also measure the other read designs (DESIGNS in the source)")
    args = ap.parse_args()

    import torch

    import mpl
    from mpl.mechanism.disk import RecordLayout
    from mpl.offload.models import build_model, encode

    torch.set_num_threads(max(1, (os.cpu_count() or 2) // 2))
    folder = args.folder or tempfile.mkdtemp(prefix="mpl-bench-disk-")
    H = args.hidden
    model = build_model("tiny-mixtral", layers=args.layers, hidden_size=H, intermediate_size=2 * H,
                        num_local_experts=args.experts, num_experts_per_tok=2,
                        num_attention_heads=8, num_key_value_heads=4)
    layers = [m for n, m in model.named_modules() if n.endswith("mlp.experts")]
    params = {n: p.data for n, p in layers[0].named_parameters(recurse=False)}

    # ---- 1. read throughput: the tier's readers against a sequential read of the same file
    layout = RecordLayout(params)
    if not args.no_throughput:
        throughput(args, folder, params)
    if args.no_decode:
        return

    # ---- 2. decode time per token, reads overlapped vs not
    eb = layout.nbytes
    total = eb * args.experts * args.layers
    host = max(4, int(total * args.host_share) // eb)
    g = torch.Generator().manual_seed(0)
    prompt = torch.cat([torch.tensor([encode("Decode from the disk.")]),
                        torch.randint(0, model.config.vocab_size, (args.batch - 1, 21), generator=g)])
    with torch.no_grad():
        model.generate(prompt, max_new_tokens=2, do_sample=False)     # warm-up
    for strategy in args.strategy.split(","):
        text = f'''policy big {{
    hierarchy {{
        tier gpu {{ location = gpu  capacity = 4 }}
        tier ram {{ location = cpu  capacity = {host} }}
        tier ssd {{ location = disk  path = "{folder}" }}
        eviction = lru
    }}
    prefetch {{ strategy = {strategy}  budget = {args.budget} }}
}}'''
        policy = mpl.loads(text)
        per_token = {}
        for readers_n, label in ((args.readers, "overlapped"), (0, "not overlapped")):
            h = policy.attach(model, readers=readers_n)
            with torch.no_grad():
                model.generate(prompt, max_new_tokens=2, do_sample=False)
                t0 = time.perf_counter()
                model.generate(prompt, max_new_tokens=args.tokens, do_sample=False)
                dt = time.perf_counter() - t0
            s = h.get_stats()["mechanism"]["tiers"]
            h.detach()
            per_token[label] = dt / args.tokens * 1e3
            print(f"{strategy:9s} decode, reads {label:15s} {per_token[label]:8.1f} ms/token  "
                  f"(disk reads {s['disk_reads']}, deferred copies {s['deferred_copies']}, "
                  f"waited {s['read_wait_ms']:.0f} ms)")
        print(f"{strategy:9s} not overlapped / overlapped: "
              f"{per_token['not overlapped'] / per_token['overlapped']:.2f}x")
    print(f"experts {total / (1 << 20):.0f} MiB, host tier {host} experts "
          f"({host * eb / (1 << 20):.0f} MiB), device tier 4 experts")


if __name__ == "__main__":
    main()
