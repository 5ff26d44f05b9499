"""Transparent huge pages for host memory that the disk tier reads into with ``O_DIRECT``
(docs/offload.md, "Memory tiers live"; docs/performance.md, "Disk tier").

A direct read goes to the device as requests of at most ``max_segments`` physically
contiguous runs of the destination buffer (``/sys/block/DEV/queue/max_segments``: 254 on a
virtio disk, 127-128 on most NVMe drives). Over ordinary 4 KiB pages a request therefore
carries at most about 1 MiB; over 2 MiB huge pages it reaches the queue's ``max_sectors_kb``
(4 MiB here), a quarter of the requests for the same bytes. :func:`advise_huge` asks for huge
pages (``madvise(MADV_HUGEPAGE)``) over the whole huge pages inside a buffer not yet touched,
and nothing past its ends, so the buffer's resident memory stays its own size.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os

_THP = "/sys/kernel/mm/transparent_hugepage"
MADV_HUGEPAGE = getattr(mmap, "MADV_HUGEPAGE", 14)


def thp_mode() -> str:
    """The kernel's transparent-huge-page setting (``always``, ``madvise``, ``never``), or
    ``unavailable`` where there is none (not Linux, or THP compiled out)."""
    try:
        with open(os.path.join(_THP, "enabled")) as f:
            words = f.read().split()
    except OSError:
        return "unavailable"
    for w in words:
        if w.startswith("[") and w.endswith("]"):
            return w[1:-1]
    return "unavailable"


def huge_page_bytes() -> int:
    """The size of one transparent huge page (2 MiB on x86-64), 0 where there is none."""
    try:
        with open(os.path.join(_THP, "hpage_pmd_size")) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return 0


_libc = None


def _lib():
    """The C library, with the prototypes of the calls used here."""
    global _libc
    if _libc is None:
        lib = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        lib.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        lib.madvise.restype = ctypes.c_int
        lib.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                             ctypes.c_int, ctypes.c_long]
        lib.mmap.restype = ctypes.c_void_p
        lib.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        lib.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
        _libc = lib
    return _libc


def advise_huge(ptr: int, nbytes: int) -> int:
    """Ask for huge pages over the whole huge pages inside ``[ptr, ptr + nbytes)`` (memory
    not yet touched: pages already faulted in stay as they are). Returns the bytes advised:
    0 where the kernel has no huge pages or refuses, or the buffer holds no whole one."""
    if thp_mode() not in ("always", "madvise"):
        return 0
    h = huge_page_bytes()
    if h <= 0:
        return 0
    start = (ptr + h - 1) // h * h
    end = (ptr + nbytes) // h * h
    if end <= start:
        return 0
    try:
        rc = _lib().madvise(start, end - start, MADV_HUGEPAGE)
    except (OSError, AttributeError):
        return 0
    return end - start if rc == 0 else 0


def huge_resident(ptr: int, nbytes: int) -> int:
    """Bytes of ``[ptr, ptr + nbytes)`` backed by huge pages now (``AnonHugePages`` of the
    mappings it overlaps, in ``/proc/self/smaps``; the mappings' totals, so an upper bound
    where a mapping extends past the range). 0 where smaps is not there."""
    total = 0
    lo, hi = ptr, ptr + nbytes
    inside = False
    try:
        with open("/proc/self/smaps") as f:
            for line in f:
                head = line.split(None, 1)[0]
                if "-" in head and not head.endswith(":"):
                    a, b = (int(x, 16) for x in head.split("-"))
                    inside = a < hi and b > lo
                elif inside and head == "AnonHugePages:":
                    total += int(line.split()[1]) * 1024
    except OSError:
        return 0
    return total


def page_cache_bytes(path: str) -> int:
    """Bytes of file ``path`` in the OS page cache now (``mincore`` over a read-only mapping
    of it, which faults nothing in): what the disk tier's reads left there. -1 where it
    cannot be told (not Linux)."""
    n = os.path.getsize(path)
    if n == 0:
        return 0
    page = mmap.PAGESIZE
    try:
        libc = _lib()
    except (OSError, AttributeError):
        return -1
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = libc.mmap(None, n, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            return -1
        try:
            vec = (ctypes.c_ubyte * ((n + page - 1) // page))()
            if libc.mincore(addr, n, vec) != 0:
                return -1
            return sum(v & 1 for v in vec) * page
        finally:
            libc.munmap(addr, n)
    finally:
        os.close(fd)
