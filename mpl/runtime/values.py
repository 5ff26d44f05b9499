"""Plain value types compiled policy modules use for IR values that are not Python literals
(the runtime never imports the compiler's ``mpl.ir``, so it has its own)."""

from __future__ import annotations

from typing import NamedTuple


class Size(NamedTuple):
    """A capacity given as a memory size: as many experts as fit."""
    bytes: int


class Count(NamedTuple):
    """A count with its unit (``cache.ttl``)."""
    n: int
    unit: str = "accesses"
