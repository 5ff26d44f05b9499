"""Writing files so that nothing a user has is ever half-written. Every file mplc writes
goes through :func:`atomic_open` (or :func:`write_atomic`), which decides what "the file"
is the way a shell redirection does:

* a **symbolic link** is followed (through a chain of links, even to a target that does not
  exist yet): the link stays a link and its target gets the new content;
* a **regular file** (or a new one) is written through a temporary file in the target's own
  folder, which then replaces it in one ``os.replace``: a failure part-way leaves the old
  file untouched and no partial file. The file's permission bits are kept;
* an existing **FIFO, character or block device** is written through directly (opened for
  writing, no temporary and no rename: there is nothing to make atomic, and replacing a
  device node by a regular file would destroy it);
* a **directory**, or a loop of links, is an error.

Every ``OSError`` raised here names the path the caller gave (never the temporary file), so a
caller can report ``cannot write PATH: <strerror>``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile


def _named(e: OSError, path: str) -> OSError:
    """``e`` naming ``path`` (the user's path, not a temporary or a resolved one)."""
    if e.errno is None:
        return e
    return type(e)(e.errno, e.strerror or os.strerror(e.errno), path)


def resolve_target(path: str) -> tuple[str, os.stat_result | None]:
    """``(real path, its stat or None when it does not exist)``: symbolic links followed.
    OSError (naming ``path``) for a loop of links, a directory, or a target that cannot be
    examined."""
    real = os.path.realpath(path)
    try:
        st = os.stat(real)
    except FileNotFoundError:
        if os.path.islink(real):            # realpath stops inside a loop of links
            raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), path) from None
        return real, None
    except OSError as e:
        raise _named(e, path) from None
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
    return real, st


def write_atomic(path: str, data: str | bytes, *, mode: int | None = None,
                 keep_mode: bool = True, fsync: bool = False) -> None:
    """Replace the content of ``path`` by ``data`` (text is written as UTF-8 with ``\\n``
    line ends); see the module doc for links, FIFOs and devices.

    A new file gets ``mode`` (default 0o644); an existing regular file keeps its permission
    bits unless ``keep_mode`` is False. ``fsync``: flush the new file to disk before it
    replaces the old one. On any failure the target is untouched.
    """
    with atomic_open(path, "w" if isinstance(data, str) else "wb",
                     file_mode=0o644 if mode is None else mode, keep_mode=keep_mode,
                     fsync=fsync) as f:
        f.write(data)


def _open_fd(fd: int, mode: str):
    if mode == "w":
        return os.fdopen(fd, "w", encoding="utf-8", newline="\n")
    return os.fdopen(fd, "wb")


@contextlib.contextmanager
def atomic_open(path: str, mode: str = "w", *, file_mode: int = 0o644, keep_mode: bool = True,
                fsync: bool = False):
    """``with atomic_open(path, "wb") as f: ...``: write ``path`` so that it changes only
    when the block ends without an exception (a failure part-way leaves no partial file, and
    an existing file untouched). ``mode`` is "w" (UTF-8 text, ``\\n`` line ends) or "wb".
    Links, FIFOs and devices: see the module doc."""
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_open: mode must be 'w' or 'wb', got {mode!r}")
    real, st = resolve_target(path)
    if st is not None and not stat.S_ISREG(st.st_mode):
        with _write_through(real, path, mode) as f:
            yield f
        return
    if st is not None and keep_mode:
        file_mode = stat.S_IMODE(st.st_mode)
    directory = os.path.dirname(real)
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".mpl-", suffix=".tmp")
    except OSError as e:
        raise _named(e, path) from None
    try:
        try:
            with _open_fd(fd, mode) as f:
                yield f
                f.flush()
                if fsync:
                    os.fsync(f.fileno())
            os.chmod(tmp, file_mode)
            os.replace(tmp, real)
        except OSError as e:
            if e.filename in (None, tmp, real):
                raise _named(e, path) from None
            raise
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


@contextlib.contextmanager
def _write_through(real: str, path: str, mode: str):
    """An existing FIFO or device: open it for writing and write (errors name ``path``)."""
    try:
        f = open(real, mode, **({"encoding": "utf-8", "newline": "\n"} if mode == "w" else {}))
    except OSError as e:
        raise _named(e, path) from None
    try:
        with f:
            yield f
            f.flush()
    except OSError as e:
        if e.filename in (None, real):
            raise _named(e, path) from None
        raise
