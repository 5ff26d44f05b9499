"""Compile generated policy source into a module object, once.

Modules are cached by the SHA-256 of their source: in memory for the process, and on disk
(``$XDG_CACHE_HOME/mpl/modules`` or ``~/.cache/mpl/modules``) as marshalled code objects
tagged with the Python version, written atomically (temporary file + ``os.replace``) so
concurrent processes never see a half-written entry. ``MPL_NO_CACHE=1`` disables the disk
cache. Only source produced by :func:`mpl.codegen.generate` is ever compiled here.
"""

from __future__ import annotations

import hashlib
import linecache
import marshal
import os
import sys
import threading
import types

from mpl.fileio import write_atomic

_MEMORY: dict[str, types.ModuleType] = {}
_LOCK = threading.Lock()
_MAGIC = b"MPLC1" + sys.implementation.cache_tag.encode()


def source_hash(source: str) -> str:
    return hashlib.sha256(source.encode("utf-8")).hexdigest()


def cache_dir() -> str | None:
    """The disk cache directory, or None when disabled (``MPL_NO_CACHE=1``)."""
    if os.environ.get("MPL_NO_CACHE", "") not in ("", "0"):
        return None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "mpl", "modules")


def _disk_path(h: str) -> str | None:
    d = cache_dir()
    return None if d is None else os.path.join(d, f"{h}.{sys.implementation.cache_tag}.mplc")


def _read_disk(h: str):
    path = _disk_path(h)
    if path is None:
        return None
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    head = _MAGIC + h.encode()
    if not data.startswith(head):
        return None
    try:
        return marshal.loads(data[len(head):])
    except (ValueError, EOFError, TypeError):
        return None


def _write_disk(h: str, code) -> None:
    path = _disk_path(h)
    if path is None:
        return
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        write_atomic(path, _MAGIC + h.encode() + marshal.dumps(code))
    except OSError:
        pass            # a read-only or full cache directory only costs a recompile


def load_source(source: str, *, name: str | None = None) -> types.ModuleType:
    """The module for generated ``source`` (cached by its hash)."""
    h = source_hash(source)
    with _LOCK:
        mod = _MEMORY.get(h)
        if mod is not None:
            return mod
    filename = f"<mpl-policy {h[:16]}>"
    code = _read_disk(h)
    if code is None:
        code = compile(source, filename, "exec", dont_inherit=True)
        _write_disk(h, code)
    mod = types.ModuleType(name or f"mpl_policy_{h[:16]}")
    mod.__file__ = filename
    mod.__dict__["__mpl_source__"] = source
    # tracebacks and inspect show the generated source
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(code, mod.__dict__)
    with _LOCK:
        mod = _MEMORY.setdefault(h, mod)
        # registered like any imported module: tools that resolve a function's module by name
        # (torch.compile's Dynamo, pickle, inspect) find it
        sys.modules.setdefault(mod.__name__, mod)
        return mod


def clear_memory_cache() -> None:
    with _LOCK:
        _MEMORY.clear()
