"""QA findings on ``mplc``'s standard streams, checked as a user meets them (``mplc`` as a
subprocess): a closed standard output is quiet and keeps the command's exit status; the
standard input can be read only once; ``mplc fmt --check -`` names ``<stdin>``.
"""

from __future__ import annotations

import os

import pytest

from cli_helpers import BAD, GOOD, UGLY, clean, mplc, trace_dir, work  # noqa: F401  (trace_dir, work: fixtures)


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


