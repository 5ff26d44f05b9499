"""Writing files so that nothing a user has is ever half-written: the new content goes to a
temporary file in the same folder, which then replaces the target in one ``os.replace``."""

from __future__ import annotations

import contextlib
import os
import tempfile


def _temp_in(directory: str, path: str) -> tuple[int, str]:
    """A temporary file next to ``path``; an OSError names ``path`` (not the temporary)."""
    try:
        return tempfile.mkstemp(dir=directory, prefix=".mpl-", suffix=".tmp")
    except OSError as e:
        raise type(e)(e.errno, e.strerror, path) from None


def write_atomic(path: str, data: str | bytes, *, mode: int | None = None,
                 keep_mode: bool = False, fsync: bool = False) -> None:
    """Replace ``path`` by ``data`` (text is written as UTF-8 with ``\\n`` line ends).

    ``keep_mode`` keeps the permission bits of an existing file; otherwise ``mode`` (or
    0o644) is used. On any failure the temporary file is removed and the target is untouched.
    """
    if keep_mode and os.path.exists(path):
        mode = os.stat(path).st_mode & 0o7777
    with atomic_open(path, "w" if isinstance(data, str) else "wb",
                     file_mode=0o644 if mode is None else mode) as f:
        f.write(data)
        if fsync:
            f.flush()
            os.fsync(f.fileno())


@contextlib.contextmanager
def atomic_open(path: str, mode: str = "w", *, file_mode: int = 0o644):
    """``with atomic_open(path, "wb") as f: ...``: write a new ``path`` through a temporary
    file in the same folder that replaces it only when the block ends without an exception
    (so a failure part-way leaves no partial file, and an existing file untouched).
    ``mode`` is "w" (UTF-8 text, ``\\n`` line ends) or "wb"."""
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_open: mode must be 'w' or 'wb', got {mode!r}")
    directory = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise IsADirectoryError(21, "Is a directory", path)
    fd, tmp = _temp_in(directory, path)
    try:
        if mode == "w":
            f = os.fdopen(fd, "w", encoding="utf-8", newline="\n")
        else:
            f = os.fdopen(fd, "wb")
        with f:
            yield f
        os.chmod(tmp, file_mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
