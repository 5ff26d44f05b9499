"""Outputs that would destroy a policy file, as a user meets them (``mplc`` as a subprocess):
``mplc compile -o b.moe`` (a Python module over a policy) is a usage error, and ``mplc tune
-o FILE`` does not replace an existing file without ``--force``; both are refused before any
work, and the file is left as it was."""

from __future__ import annotations

import os

import pytest

from cli_helpers import GOOD, clean, mplc, trace_dir, work  # noqa: F401  (trace_dir, work: fixtures)

HAND = "# my hand-written policy\npolicy mine {\n    cache {\n        capacity = 4\n    }\n}\n"


@pytest.mark.parametrize("out", ["b.moe", "B.MOE", "x.policy", "sub/../b.moe", ".moe"])
def test_compile_refuses_a_policy_file_as_output(work, out):
    (work / "b.moe").write_text(HAND)
    (work / "x.policy").write_text(HAND)
    (work / "sub").mkdir()
    r = mplc("compile", "a.moe", "-o", out, cwd=work)
    clean(r)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "not a policy file" in r.stderr and ".py" in r.stderr and out in r.stderr
    assert (work / "b.moe").read_text() == HAND and (work / "x.policy").read_text() == HAND
    assert sorted(os.listdir(work)) == ["a.moe", "b.moe", "m.mpltrace", "sub", "x.policy"]


def test_compile_refuses_a_new_moe_output_too(work):
    r = mplc("compile", "a.moe", "-o", "new.moe", cwd=work)
    assert r.returncode == 2 and not (work / "new.moe").exists()


def test_compile_still_writes_python_outputs(work):
    r = mplc("compile", "a.moe", "-o", "a_policy.py", cwd=work)
    clean(r)
    assert r.returncode == 0 and "POLICY_NAME" in (work / "a_policy.py").read_text()
    r = mplc("compile", "a.moe", "-o", "a_policy.py", cwd=work)      # regenerating is fine
    assert r.returncode == 0
    r = mplc("compile", "a.moe", "-o", "-", cwd=work)
    assert r.returncode == 0 and "POLICY_NAME" in r.stdout


def test_tune_does_not_replace_an_existing_file_without_force(work):
    (work / "mine.moe").write_text(HAND)
    r = mplc("tune", "--trace", "m.mpltrace", "--budget", "16", "-j", "1", "-o", "mine.moe",
             cwd=work)
    clean(r)
    assert r.returncode == 2
    assert "mine.moe" in r.stderr and "exists" in r.stderr and "--force" in r.stderr
    assert (work / "mine.moe").read_text() == HAND
    assert "tuned for" not in r.stdout                  # refused before the search

    r = mplc("tune", "--trace", "m.mpltrace", "--budget", "16", "-j", "1", "-o", "mine.moe",
             "--force", cwd=work)
    clean(r)
    assert r.returncode == 0, r.stderr
    text = (work / "mine.moe").read_text()
    assert text != HAND and "Tuned by mplc tune" in text


def test_tune_writes_a_new_file_and_through_a_link_to_nothing(work):
    r = mplc("tune", "--trace", "m.mpltrace", "--budget", "16", "-j", "1", "-o", "new.moe",
             cwd=work)
    assert r.returncode == 0, r.stderr
    assert "Tuned by mplc tune" in (work / "new.moe").read_text()
    # a link to an existing policy is an existing file: refused as well
    (work / "mine.moe").write_text(HAND)
    os.symlink("mine.moe", work / "link.moe")
    r = mplc("tune", "--trace", "m.mpltrace", "--budget", "16", "-j", "1", "-o", "link.moe",
             cwd=work)
    assert r.returncode == 2 and (work / "mine.moe").read_text() == HAND


def test_tune_over_its_trace_is_refused_even_with_force(work):
    r = mplc("tune", "--trace", "m.mpltrace", "--budget", "16", "-j", "1", "-o", "m.mpltrace",
             "--force", cwd=work)
    clean(r)
    assert r.returncode == 1 and "over the trace" in r.stderr
