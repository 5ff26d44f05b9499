"""QA findings on ``mplc``'s standard streams, checked as a user meets them (``mplc`` as a
subprocess): a closed standard output is quiet and keeps the command's exit status; the
standard input can be read only once; ``mplc fmt --check -`` names ``<stdin>``.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from mpl.sim import synth, traceio

GOOD = "policy a {\n    cache {\n        capacity = 8\n    }\n}\n"
UGLY = "policy   a { cache { capacity = 8 } }\n"
BAD = "policy p { cache { capcity = 4 } }\n"


def mplc(*args, cwd, stdin=None, stdout=subprocess.PIPE, env=None, timeout=300):
    return subprocess.run([sys.executable, "-m", "mpl.cli.main", *map(str, args)],
                          input=stdin, stdout=stdout, stderr=subprocess.PIPE, text=True,
                          cwd=cwd, timeout=timeout,
                          env={**os.environ, "NO_COLOR": "1", **(env or {})})


def clean(r) -> None:
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr


@pytest.fixture(scope="module")
def trace_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("qa")
    traceio.save(synth.synthesize("olmoe", steps=6, seed=3), str(d / "m.mpltrace"))
    return d


@pytest.fixture
def work(tmp_path, trace_dir):
    (tmp_path / "a.moe").write_text(GOOD)
    os.symlink(trace_dir / "m.mpltrace", tmp_path / "m.mpltrace")
    return tmp_path


# ------------------------------------------------------------------ closed stdout
def run_into_closed_pipe(args, cwd, unbuffered: str):
    rfd, wfd = os.pipe()
    os.close(rfd)                                    # the reader has gone
    try:
        return mplc(*args, cwd=cwd, stdout=wfd, env={"PYTHONUNBUFFERED": unbuffered})
    finally:
        os.close(wfd)


@pytest.mark.parametrize("unbuffered", ["1", ""])
@pytest.mark.parametrize("args,code", [
    (["trace", "info", "m.mpltrace"], 0),
    (["check", "bad.moe"], 1),
    (["check", "a.moe"], 0),
    (["check", "--json"] + ["bad.moe"] * 200, 1),    # more than a pipe buffer: fails mid-output
    (["explain", "MPL102"], 0),
    (["fmt", "--check", "ugly.moe"], 1),
])
def test_a_closed_stdout_is_quiet_and_keeps_the_exit_status(work, args, code, unbuffered):
    (work / "bad.moe").write_text(BAD)
    (work / "ugly.moe").write_text(UGLY)
    r = run_into_closed_pipe(args, work, unbuffered)
    assert r.returncode == code, r.stderr
    assert "Broken pipe" not in r.stderr and "BrokenPipeError" not in r.stderr
    clean(r)


# ------------------------------------------------------------------ stdin once
@pytest.mark.parametrize("args", [["check", "-", "-"], ["fmt", "-", "-"], ["fmt", "-", "a.moe"],
                                  ["fmt", "--check", "a.moe", "-"]])
def test_the_standard_input_is_read_once(work, args):
    (work / "a.moe").write_text(UGLY)
    r = mplc(*args, cwd=work, stdin=BAD)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert ("the standard input can be read only once" in r.stderr
            or "must be the only FILE" in r.stderr)
    assert (work / "a.moe").read_text() == UGLY      # nothing rewritten


def test_check_stdin_once_keeps_its_snippet(work):
    r = mplc("check", "-", "a.moe", cwd=work, stdin=BAD)
    assert r.returncode == 1
    assert "1 | policy p { cache { capcity = 4 } }" in r.stdout


# ------------------------------------------------------------------ fmt --check -
def test_fmt_check_stdin_names_stdin(work):
    r = mplc("fmt", "--check", "-", cwd=work, stdin=UGLY)
    assert r.returncode == 1 and r.stdout == "would reformat <stdin>\n"
    r = mplc("fmt", "--check", "-", cwd=work, stdin=GOOD)
    assert r.returncode == 0 and r.stdout == ""
    r = mplc("fmt", "--check", "--diff", "-", cwd=work, stdin=UGLY)
    assert r.returncode == 1 and r.stdout.startswith("--- <stdin>")
    assert r.stdout.endswith("would reformat <stdin>\n")


