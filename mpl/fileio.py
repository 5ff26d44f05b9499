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
  device node by a regular file would destroy it); so is ``/dev/stdout`` (or ``/dev/fd/N``)
  when it is a pipe, which only the kernel can resolve;
* a **directory**, or a loop of links, is an error.

Every ``OSError`` raised here names the path the caller gave (never the temporary file), so a
caller can report ``cannot write PATH: <strerror>``.

Reading is bounded the same way for every user-named text file (policies, imports, the
standard input, model configs, hardware profiles): :func:`read_capped` reads in chunks and
stops at the first NUL byte or past a size cap (``/dev/zero`` or an endless pipe cannot hang a
command), :func:`decode_text` refuses binary and non-UTF-8 data; both raise :class:`ReadError`
with a one-line reason. :func:`read_text_file` is a policy file's text as the checker, the
formatter, the CLI and the language server read it.
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
        real, st = _kernel_target(path, real)
        if st is None:
            return real, None
    except OSError as e:
        raise _named(e, path) from None
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
    return real, st


def _kernel_target(path: str, real: str) -> tuple[str, os.stat_result | None]:
    """For a path whose links only the kernel can follow (``/dev/stdout`` ->
    ``/proc/self/fd/1`` -> ``pipe:[N]``, which ``realpath`` leaves unresolved): ``(path, its
    stat)``, so it is opened as the user named it; otherwise ``(real, None)``, a file to
    create."""
    try:
        return path, os.stat(path)
    except OSError:
        return real, None


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


# ---------------------------------------------------------------- bounded reading
class ReadError(Exception):
    """A file that exists but cannot be used (the message says why)."""


def read_text_file(path: str, *, keep_bom: bool = False) -> str:
    """The text of a policy file. FileNotFoundError when absent; ReadError with a clear
    reason for a directory, a binary or non-UTF-8 file, or an OS error. A leading byte-order
    mark is dropped unless ``keep_bom`` (the formatter compares the file as it is on disk)."""
    if os.path.isdir(path):
        raise ReadError(f"'{path}' is a directory, not a policy file")
    try:
        with open(path, "rb") as f:
            data = read_capped(f, f"'{path}'")
    except FileNotFoundError:
        raise
    except IsADirectoryError:
        raise ReadError(f"'{path}' is a directory, not a policy file") from None
    except OSError as e:
        raise ReadError(f"cannot read '{path}': {e.strerror or e}") from None
    except ValueError as e:                     # open() refuses the path (a NUL character)
        raise ReadError(f"cannot read {path!r}: not a usable file path ({e})") from None
    return decode_text(data, f"'{path}'", keep_bom=keep_bom)


MAX_POLICY_BYTES = 16 << 20      # no policy file is this large; stops /dev/zero and friends
_CHUNK = 1 << 16


def read_text_or_none(path: str) -> str | None:
    """A file's text for showing source lines (diagnostic rendering, editors): None when
    it cannot be read as a policy file (reads are bounded like read_text_file's)."""
    try:
        return read_text_file(path)
    except (OSError, ReadError):
        return None


def read_capped(f, what: str, *, limit: int = MAX_POLICY_BYTES,
                kind: str = "a policy file") -> bytes:
    """Read a binary stream in chunks; ReadError as soon as a chunk holds a NUL byte (a
    binary file: ``/dev/zero`` stops at once) or the data passes ``limit`` bytes (an
    endless or huge non-regular file), so a read always ends. ``kind`` names what the file
    should have been in the message (other readers of user-named text files, e.g. model
    configs and hardware profiles, pass their own ``limit`` and ``kind``)."""
    parts = []
    total = 0
    while True:
        chunk = f.read(_CHUNK)
        if not chunk:
            return b"".join(parts)
        if b"\x00" in chunk:
            raise ReadError(f"{what} is a binary file, not {kind}")
        total += len(chunk)
        if total > limit:
            raise ReadError(f"{what} is larger than {_size(limit)}: not {kind}")
        parts.append(chunk)


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 and not n & ((1 << 20) - 1) else f"{n} bytes"


def decode_text(data: bytes, what: str, *, keep_bom: bool = False,
                kind: str = "a policy file") -> str:
    """Policy text from bytes (a file's, or the standard input's: ``what`` names it);
    ReadError for binary or non-UTF-8 data. A leading byte-order mark is dropped unless
    ``keep_bom``. ``kind`` as for :func:`read_capped`."""
    if b"\x00" in data:
        raise ReadError(f"{what} is a binary file, not {kind}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ReadError(f"{what} is not UTF-8 text (byte {e.start})") from None
    if text.startswith("\ufeff") and not keep_bom:
        text = text[1:]
    return text


def read_stdin_text(stream=None) -> str:
    """The standard input as policy text (ReadError when it is binary or not UTF-8), with
    universal newlines (as ``sys.stdin`` in text mode gives them)."""
    import sys

    stream = sys.stdin if stream is None else stream
    buf = getattr(stream, "buffer", None)
    if buf is None:                 # a text stream without bytes underneath (tests, IDEs)
        data = stream.read().encode("utf-8", "surrogateescape")
    else:
        data = read_capped(buf, "the standard input")
    text = decode_text(data, "the standard input")
    return text.replace("\r\n", "\n").replace("\r", "\n")
