"""QA findings on the files ``mplc`` writes, checked as a user meets them (``mplc`` as a
subprocess): a symbolic link is followed (the link stays, its target is rewritten in its own
folder, keeping its mode), an existing FIFO or device node is written through (never
replaced), a directory or a loop of links is a clear error, a failed write names the file and
leaves the old one; ``mplc compile std/NAME`` writes ``NAME_policy.py`` in the current folder.

Device nodes are created in the test's own folder (never /dev/null or /dev/full).
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading

import pytest

from mpl import traceio

from cli_helpers import GOOD, UGLY, clean, mplc, trace_dir, work  # noqa: F401  (trace_dir, work: fixtures)


def leftovers(d) -> list[str]:
    return [n for n in os.listdir(d) if n.startswith(".mpl-")]


def mknod_or_skip(path, major: int, minor: int) -> None:
    """A character device node of our own (e.g. 1,3 = null, 1,7 = full) in the test folder."""
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(major, minor))
    except (PermissionError, OSError) as e:
        pytest.skip(f"cannot create a device node here: {e}")


# ------------------------------------------------------------------ links, FIFOs, devices
def test_fmt_through_a_symlink_rewrites_the_target_and_keeps_the_link(work):
    (work / "real.moe").write_text(UGLY)
    os.chmod(work / "real.moe", 0o600)
    os.symlink("real.moe", work / "link.moe")
    r = mplc("fmt", "link.moe", cwd=work)
    assert r.returncode == 0, r.stderr
    assert os.path.islink(work / "link.moe") and os.readlink(work / "link.moe") == "real.moe"
    assert (work / "real.moe").read_text() == GOOD
    assert stat.S_IMODE(os.stat(work / "real.moe").st_mode) == 0o600
    assert leftovers(work) == []


def test_compile_to_a_symlink_writes_the_target_in_its_own_folder(work):
    (work / "sub").mkdir()
    (work / "sub" / "target.py").write_text("old\n")
    os.symlink("sub/target.py", work / "link.py")
    r = mplc("compile", "a.moe", "-o", "link.py", cwd=work)
    assert r.returncode == 0, r.stderr
    assert os.path.islink(work / "link.py")
    assert "make_runtime" in (work / "sub" / "target.py").read_text()
    assert leftovers(work) == [] and leftovers(work / "sub") == []


def test_compile_to_a_dangling_symlink_creates_its_target(work):
    os.symlink("made.py", work / "link.py")
    r = mplc("compile", "a.moe", "-o", "link.py", cwd=work)
    assert r.returncode == 0, r.stderr
    assert os.path.islink(work / "link.py") and (work / "made.py").is_file()


def test_trace_synth_and_convert_follow_symlinks(work):
    os.symlink("real.mpltrace", work / "l.mpltrace")
    os.symlink("real.jsonl", work / "l.jsonl")
    r = mplc("trace", "synth", "--preset", "olmoe", "--steps", "3", "-o", "l.mpltrace", cwd=work)
    assert r.returncode == 0, r.stderr
    r = mplc("trace", "convert", "l.mpltrace", "l.jsonl", cwd=work)
    assert r.returncode == 0, r.stderr
    assert os.path.islink(work / "l.mpltrace") and os.path.islink(work / "l.jsonl")
    assert len(traceio.load(str(work / "real.jsonl"))) == len(traceio.load(str(work / "real.mpltrace"))) == 48


def test_compile_to_a_fifo_writes_through_it(work):
    os.mkfifo(work / "ff")
    got = {}

    def reader():
        with open(work / "ff", "rb") as f:
            got["data"] = f.read()

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    r = mplc("compile", "a.moe", "-o", "ff", cwd=work, timeout=120)
    t.join(60)
    assert r.returncode == 0, r.stderr
    assert stat.S_ISFIFO(os.lstat(work / "ff").st_mode)
    expected = mplc("compile", "a.moe", "-o", "-", cwd=work).stdout
    assert got["data"].decode() == expected
    assert leftovers(work) == []


def test_compile_to_a_character_device_writes_through_it(work):
    mknod_or_skip(work / "mynull", 1, 3)
    r = mplc("compile", "a.moe", "-o", "mynull", cwd=work)
    assert r.returncode == 0, r.stderr
    assert stat.S_ISCHR(os.lstat(work / "mynull").st_mode)
    assert leftovers(work) == []


def test_a_full_device_is_a_clear_write_error_and_stays_a_device(work):
    mknod_or_skip(work / "myfull", 1, 7)          # our own node with /dev/full's numbers
    for args in (["compile", "a.moe", "-o", "myfull"],
                 ["trace", "synth", "--preset", "olmoe", "--steps", "2", "-o", "myfull.jsonl"]):
        if args[0] == "trace":
            os.rename(work / "myfull", work / "myfull.jsonl")
        r = mplc(*args, cwd=work)
        assert r.returncode == 1, (r.stdout, r.stderr)
        assert f"cannot write {args[-1]}: No space left on device" in r.stderr
        clean(r)
        assert stat.S_ISCHR(os.lstat(work / args[-1]).st_mode)


_FULL_DISK = """
import errno, sys
import mpl.fileio as fileio
from mpl.cli.main import main

real = fileio._open_fd

class Full:
    def __init__(self, f): self.f = f
    def write(self, data): raise OSError(errno.ENOSPC, "No space left on device")
    def __getattr__(self, n): return getattr(self.f, n)
    def __enter__(self): return self
    def __exit__(self, *a): self.f.close()

fileio._open_fd = lambda fd, mode: Full(real(fd, mode))
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("args,out", [
    (["compile", "a.moe", "-o", "out.py"], "out.py"),
    (["fmt", "ugly.moe"], "ugly.moe"),
    (["trace", "synth", "--preset", "olmoe", "--steps", "2", "-o", "t.mpltrace"], "t.mpltrace"),
])
def test_a_failed_write_names_the_file_and_leaves_the_old_one(work, args, out):
    """ENOSPC simulated in the writer: one line naming the file, exit 1, old content kept."""
    (work / "ugly.moe").write_text(UGLY)
    (work / out).write_text(UGLY if out == "ugly.moe" else "old\n")
    before = (work / out).read_bytes()
    r = subprocess.run([sys.executable, "-c", _FULL_DISK, *args], capture_output=True,
                       text=True, cwd=work, timeout=300)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert f"cannot write {out}: No space left on device" in r.stderr
    clean(r)
    assert (work / out).read_bytes() == before and leftovers(work) == []


def test_directory_and_link_loop_targets_are_clear_errors(work):
    (work / "d.py").mkdir()
    os.symlink("loop2", work / "loop1")
    os.symlink("loop1", work / "loop2")
    r = mplc("compile", "a.moe", "-o", "d.py", cwd=work)
    assert r.returncode == 1 and "cannot write d.py: Is a directory" in r.stderr
    r = mplc("compile", "a.moe", "-o", "loop1", cwd=work)
    assert r.returncode == 1 and "cannot write loop1: Too many levels of symbolic links" in r.stderr
    assert os.path.islink(work / "loop1") and leftovers(work) == []


# ------------------------------------------------------------------ compile std/NAME
def test_compile_std_policy_writes_name_policy_py_in_the_current_folder(work):
    from mpl.stdlib_path import stdlib_dir

    r = mplc("compile", "std/balanced", cwd=work)
    assert r.returncode == 0, r.stderr
    assert "-> balanced_policy.py" in r.stdout
    assert "make_runtime" in (work / "balanced_policy.py").read_text()
    assert not os.path.exists(os.path.join(stdlib_dir(), "balanced_policy.py"))
    r = mplc("compile", "std/balanced", "--policy", "balanced", cwd=work)
    assert r.returncode == 0 and (work / "balanced_balanced_policy.py").is_file()


