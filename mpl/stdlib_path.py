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


def resolve(path: str) -> str:
    """A policy path as a user gives it: ``std/NAME`` (when no such local file exists) names
    the shipped policy and becomes its file path; an unknown ``std/NAME`` and every other
    path come back unchanged (the reader then says what is wrong)."""
    if path.startswith("std/") and not os.path.exists(path):
        found = stdlib_file(path)
        if found is not None:
            return found
    return path


def unknown_std_message(path: str) -> str | None:
    """For a ``std/NAME`` that names no shipped policy (and no local file): the message."""
    if path.startswith("std/") and not os.path.exists(path) and stdlib_file(path) is None:
        return (f"no standard policy '{path}': the standard library has "
                + ", ".join("std/" + n for n in stdlib_names()))
    return None


def stdlib_names() -> list[str]:
    d = stdlib_dir()
    try:
        return sorted(f[:-4] for f in os.listdir(d) if f.endswith(".moe"))
    except OSError:
        return []


def policy_file(spec: str) -> str | None:
    """The policy file a command line names: an existing file, or ``std/NAME``'s shipped
    file; None when it is neither."""
    if os.path.isfile(spec):
        return spec
    if spec.startswith("std/"):
        return stdlib_file(spec)
    return None
