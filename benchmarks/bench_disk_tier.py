"""The disk tier's read throughput and its overlap with compute, measured in one run.

1. Read throughput: every record of one layer file written by a disk tier, read in a
   shuffled order by the tier's reader threads into a host cache (O_DIRECT or fadvise, as
   attach does), against one sequential read of the same file (large reads, page cache
   dropped first), in the same run. Prints the ratio (target >= 0.70).
2. Decode time per token of a model whose experts do not fit the host tier, with reads
   overlapped (reader threads; prefetch reads run while the layer before computes) and not
   (readers=0: every read in the engine's thread, when its copy is issued).

Usage: python benchmarks/bench_disk_tier.py [--folder DIR] [--hidden 1024] [--tokens 12]
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import time


def sequential_mb_s(path: str, block: int = 8 << 20) -> float:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        buf = bytearray(block)
        mv = memoryview(buf)
        n = 0
        t0 = time.perf_counter()
        while True:
            got = os.readv(fd, [mv])
            if got <= 0:
                break
            n += got
        dt = time.perf_counter() - t0
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    return n / dt / 1e6


def tier_mb_s(disk, cache, readers, ordinal: int, experts: int) -> float:
    order = list(range(experts))
    random.Random(0).shuffle(order)
    t0 = time.perf_counter()
    futs = []
    for i, e in enumerate(order):
        j = i % cache.slots
        if len(futs) >= cache.slots:           # the record is reused: its read must be done
            futs.pop(0).result()
        futs.append(readers.submit(disk.read, ordinal, e, cache.record(j)))
    for f in futs:
        f.result()
    dt = time.perf_counter() - t0
    return experts * disk.layout.stride / dt / 1e6


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
    args = ap.parse_args()

    import torch

    import mpl
    from mpl.mechanism.device import SyncOps
    from mpl.mechanism.disk import DiskStore, HostCache, Readers, RecordLayout
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
        disk = DiskStore(folder, layout, [(0, 0)], args.experts)
        disk.write({0: params})
        disk.open()
        ops = SyncOps(torch.device("cpu"))
        cache = HostCache(layout, max(2, args.readers * 2), ops)
        readers = Readers(args.readers)
        seq = sequential_mb_s(disk.files[0])
        tier = tier_mb_s(disk, cache, readers, 0, args.experts)
        seq2 = sequential_mb_s(disk.files[0])
        readers.shutdown()
        disk.remove()
        seqm = (seq + seq2) / 2
        mib = layout.stride / (1 << 20)
        print(f"file: {args.experts} experts x {mib:.1f} MiB; page cache: {disk.page_cache}; "
              f"readers: {args.readers}")
        print(f"sequential read   {seqm:8.1f} MB/s  (before {seq:.1f}, after {seq2:.1f})")
        print(f"disk tier reads   {tier:8.1f} MB/s  (shuffled records)")
        print(f"ratio             {tier / seqm:8.2f}  (target >= 0.70)")

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
