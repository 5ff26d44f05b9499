"""Writing files so that nothing a user has is ever half-written: the new content goes to a
temporary file in the same folder, which then replaces the target in one ``os.replace``."""

from __future__ import annotations

import os
import tempfile


def write_atomic(path: str, data: str | bytes, *, mode: int | None = None,
                 keep_mode: bool = False, fsync: bool = False) -> None:
    """Replace ``path`` by ``data`` (text is written as UTF-8 with ``\\n`` line ends).

    ``keep_mode`` keeps the permission bits of an existing file; otherwise ``mode`` (or
    0o644) is used. On any failure the temporary file is removed and the target is untouched.
    """
    directory = os.path.dirname(os.path.abspath(path))
    if keep_mode and os.path.exists(path):
        mode = os.stat(path).st_mode & 0o7777
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".mpl-", suffix=".tmp")
    try:
        if isinstance(data, str):
            f = os.fdopen(fd, "w", encoding="utf-8", newline="\n")
        else:
            f = os.fdopen(fd, "wb")
        with f:
            f.write(data)
            if fsync:
                f.flush()
                os.fsync(f.fileno())
        os.chmod(tmp, 0o644 if mode is None else mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
