"""Where the shipped standard-library policies (``import "std/NAME"``) live."""

from __future__ import annotations

import os
from functools import lru_cache


@lru_cache(maxsize=1)
def stdlib_dir() -> str:
    """The folder holding ``stdlib/*.moe``: the installed ``mpl.stdlib`` package data, or the
    ``stdlib/`` folder of a source checkout."""
    here = os.path.dirname(os.path.abspath(__file__))
    installed = os.path.join(here, "stdlib")
    if os.path.isdir(installed):
        return installed
    return os.path.join(os.path.dirname(here), "stdlib")


def stdlib_file(name: str) -> str | None:
    """Path of ``std/NAME`` (with or without the .moe extension), or None."""
    base = name[4:] if name.startswith("std/") else name
    if not base.endswith(".moe"):
        base += ".moe"
    path = os.path.join(stdlib_dir(), base)
    return path if os.path.isfile(path) else None


def stdlib_names() -> list[str]:
    d = stdlib_dir()
    try:
        return sorted(f[:-4] for f in os.listdir(d) if f.endswith(".moe"))
    except OSError:
        return []
