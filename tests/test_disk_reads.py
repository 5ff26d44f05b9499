"""How the disk tier reads (docs/offload.md, "Memory tiers live", "Page cache"): every record
read back exactly, by the reader threads into the host cache, and nothing of the file left
in the OS page cache afterwards (mincore), whether the files are read with O_DIRECT or
buffered; the host cache's arena in transparent huge pages, never past its own bytes."""

from __future__ import annotations

import os
import random

import pytest

torch = pytest.importorskip("torch")

from mpl.mechanism.device import SyncOps  # noqa: E402
from mpl.mechanism.disk import (DiskStore, HostCache, PartLayout, Readers, RecordLayout,  # noqa: E402
                                part_layout, part_pieces)
from mpl.mechanism.hostmem import (advise_huge, huge_page_bytes, huge_resident,  # noqa: E402
                                   page_cache_bytes, thp_mode)

E = 12
OPS = SyncOps(torch.device("cpu"))


def experts(rows: int, cols: int, seed: int = 0) -> dict:
    g = torch.Generator().manual_seed(seed)
    return {"w_in": torch.randn(E, rows, cols, generator=g),
            "w_out": torch.randn(E, cols, rows, generator=g).to(torch.float16)}


def written(folder, params) -> DiskStore:
    disk = DiskStore(str(folder), RecordLayout(params), [(0, 3)], E)
    disk.write({0: params})
    return disk


def droppable(disk) -> bool:
    """The file system drops a file's clean pages on DONTNEED (not tmpfs, whose pages are
    the file): the write drops them, so none are there now."""
    return page_cache_bytes(disk.files[0]) == 0


def expected(params, e: int) -> dict:
    return {n: t[e] for n, t in params.items()}


def check_exact(params, cache, e: int, j: int) -> None:
    views = cache.tensors
    for name, want in expected(params, e).items():
        assert torch.equal(views[name][j], want), (name, e)


@pytest.mark.parametrize("direct", [True, False])
@pytest.mark.parametrize("threads", [0, 4])
def test_every_record_read_exactly_and_no_page_left(tmp_path, direct, threads):
    params = experts(128, 256)                  # 192 KiB records: 4 KiB-aligned
    disk = written(tmp_path, params)
    try:
        assert disk.layout.aligned
        disk.open(direct=direct)
        assert disk.page_cache == ("O_DIRECT" if disk.direct else "posix_fadvise(DONTNEED)")
        cache = HostCache(disk.layout, 3, OPS)
        order = list(range(E))
        random.Random(1).shuffle(order)
        readers = Readers(threads)
        try:
            pending = []
            for i, e in enumerate(order):
                j = i % cache.slots
                if len(pending) >= cache.slots:   # the record is reused: check it first
                    pe, pj, f = pending.pop(0)
                    assert f.result() == disk.layout.stride
                    check_exact(params, cache, pe, pj)
                pending.append((e, j, readers.submit(disk.read, 0, e, cache.record(j))))
            for pe, pj, f in pending:
                assert f.result() == disk.layout.stride
                check_exact(params, cache, pe, pj)
        finally:
            readers.shutdown()
        if droppable(disk):
            assert page_cache_bytes(disk.files[0]) == 0
        cache.release()
    finally:
        disk.remove()


def test_buffered_reads_leave_nothing_past_the_record(tmp_path):
    # with the kernel's readahead a buffered read also brings in the file past the record,
    # which the read's DONTNEED over its own bytes does not drop: after each read, none of
    # the file is cached, the record itself included
    params = experts(512, 1024)                 # 3 MiB records, 36 MiB file
    disk = written(tmp_path, params)
    try:
        disk.open(direct=False)
        if not droppable(disk):
            pytest.skip("the file system keeps its pages (tmpfs)")
        cache = HostCache(disk.layout, 1, OPS)
        order = list(range(E))
        random.Random(2).shuffle(order)
        for e in order:
            assert disk.read(0, e, cache.record(0)) == disk.layout.stride
            check_exact(params, cache, e, 0)
            assert page_cache_bytes(disk.files[0]) == 0, e
        cache.release()
    finally:
        disk.remove()


def test_unaligned_records_read_buffered_exactly(tmp_path):
    params = {"w": torch.randn(E, 7, 33), "b": torch.randn(E, 5).to(torch.bfloat16)}
    disk = written(tmp_path, params)
    try:
        assert not disk.layout.aligned
        disk.open()
        assert not disk.direct
        cache = HostCache(disk.layout, 2, OPS)
        for i, e in enumerate(reversed(range(E))):
            disk.read(0, e, cache.record(i % 2))
            check_exact(params, cache, e, i % 2)
        if droppable(disk):
            assert page_cache_bytes(disk.files[0]) == 0
        back = disk.read_layer(0, params)
        assert all(torch.equal(back[n], params[n]) for n in params)
        cache.release()
    finally:
        disk.remove()


def test_parts_read_exactly_and_leave_no_page(tmp_path):
    params = experts(256, 512)
    disk = written(tmp_path, params)
    try:
        disk.open(direct=False)                 # as attach opens a tier read in parts
        parts = PartLayout(params, 4)
        prec = part_layout(params, 4)
        cache = HostCache(prec, 1, OPS)
        for e in (5, 0, 11):
            for p in range(4):
                pieces = part_pieces(disk.layout, prec, parts.ranges[p])
                got = disk.read_part(0, e, pieces, cache.record(0))
                assert got == sum(k for _s, _d, k in pieces)
                for name, t in params.items():
                    a, b = parts.ranges[p][name]
                    assert torch.equal(cache.tensors[name][0][:b - a], t[e].reshape(-1)[a:b])
                if droppable(disk):
                    assert page_cache_bytes(disk.files[0]) == 0
        cache.release()
    finally:
        disk.remove()


def test_a_short_file_is_a_located_error(tmp_path):
    from mpl.mechanism.disk import DiskError
    params = experts(128, 256)
    disk = written(tmp_path, params)
    try:
        os.truncate(disk.files[0], disk.layout.stride * (E - 1) + 4096)
        disk.open()
        cache = HostCache(disk.layout, 1, OPS)
        with pytest.raises(DiskError, match=r"layer-003\.bin: expert 11 is cut short"):
            disk.read(0, E - 1, cache.record(0))
        cache.release()
    finally:
        disk.remove()


def test_huge_pages_are_advised_inside_the_buffer_only():
    h = huge_page_bytes()
    if thp_mode() not in ("always", "madvise") or h <= 0:
        assert advise_huge(1 << 30, 64 << 20) == 0
        pytest.skip(f"no transparent huge pages here ({thp_mode()})")
    # the range advised is the whole huge pages inside the buffer, never past its ends
    buf = torch.empty(6 * h, dtype=torch.uint8)
    p = buf.data_ptr() + 12345
    n = 3 * h + 777
    got = advise_huge(p, n)
    start = -(-p // h) * h
    assert got == (p + n) // h * h - start and 0 < got <= n
    assert advise_huge(p, h // 2) == 0          # no whole huge page inside: nothing advised


def test_the_host_cache_arena_is_in_huge_pages_and_no_bigger(tmp_path):
    if thp_mode() not in ("always", "madvise"):
        pytest.skip(f"no transparent huge pages here ({thp_mode()})")
    h = huge_page_bytes()
    params = experts(1024, 1024)                # 6 MiB records
    disk = written(tmp_path, params)
    try:
        disk.open()
        cache = HostCache(disk.layout, 4, OPS)
        plain = HostCache(disk.layout, 4, OPS, huge_pages=False)
        for j in range(4):
            disk.read(0, j, cache.record(j))
            disk.read(0, j, plain.record(j))
            check_exact(params, cache, j, j)
            check_exact(params, plain, j, j)
        ptr, n = cache.arena.data_ptr(), cache.arena.numel()
        assert n == cache.nbytes + 4096
        # the huge pages lie inside the arena: its mapping's huge-page bytes are at most the
        # whole huge pages the arena holds (the kernel may refuse some: fragmented memory)
        inside = ((ptr + n) // h * h - (-(-ptr // h) * h))
        assert 0 < huge_resident(ptr, n) <= inside + 2 * h
        assert huge_resident(plain.arena.data_ptr(), plain.arena.numel()) == 0
        cache.release()
        plain.release()
    finally:
        disk.remove()
