"""``mplc check --fix`` applies the machine-applicable fixes the diagnostics carry (as the
language server's quick fixes), ``--diff`` previews them; both through the CLI on real
files."""

from __future__ import annotations

import pytest

from cli_helpers import clean, mplc

BROKEN = """\
policy p {
    cache {
        capcity = 8
        eviction = lru
        frequency_decay = 0.9
        pin = [1, 1]
    }
    prefetch { strategy = histroy }
    adapt {
        when hit_rate < 0.4 { lfu_decay = 0.8 }
    }
}
"""

FIXED = """\
policy p {
    cache {
        capacity = 8
        eviction = lru
        pin = [1]
    }
    prefetch { strategy = history }
    adapt {
        when hit_rate < 0.4 { frequency_decay = 0.8 }
    }
}
"""


def test_diff_previews_and_writes_nothing(tmp_path):
    (tmp_path / "p.moe").write_text(BROKEN)
    r = mplc("check", "--diff", "p.moe", cwd=tmp_path)
    clean(r)
    assert r.returncode == 1
    assert r.stdout.startswith("--- p.moe\n+++ p.moe (fixed)\n")
    assert "-        capcity = 8\n+        capacity = 8\n" in r.stdout
    assert "-        frequency_decay = 0.9\n" in r.stdout
    assert (tmp_path / "p.moe").read_text() == BROKEN


def test_fix_applies_every_fix_then_reports_what_remains(tmp_path):
    (tmp_path / "p.moe").write_text(BROKEN)
    r = mplc("check", "--fix", "p.moe", cwd=tmp_path)
    clean(r)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "fixed 5 problems in p.moe" in r.stderr
    assert r.stdout.strip() == "1 file checked: no problems"
    assert (tmp_path / "p.moe").read_text() == FIXED
    r = mplc("check", "--diff", "p.moe", cwd=tmp_path)          # nothing left to fix
    assert r.returncode == 0 and r.stdout == "" and "no fixes to apply" in r.stderr


def test_fix_leaves_what_has_no_single_fix(tmp_path):
    text = "policy p {\n    cache {\n        capacity = 8\n        colour = 3\n    }\n}\n"
    (tmp_path / "p.moe").write_text(text)
    r = mplc("check", "--fix", "p.moe", cwd=tmp_path)
    assert r.returncode == 1 and "error[MPL102]: unknown parameter 'colour'" in r.stdout
    assert (tmp_path / "p.moe").read_text() == text and "fixed" not in r.stderr


def test_fix_never_writes_the_standard_library_or_the_standard_input(tmp_path):
    r = mplc("check", "--fix", "-", cwd=tmp_path, stdin=BROKEN)
    assert r.returncode == 2 and "mplc check: error: --fix cannot write the standard input" in r.stderr
    r = mplc("check", "--diff", "-", cwd=tmp_path, stdin=BROKEN)
    assert r.returncode == 1 and "+        capacity = 8" in r.stdout
    r = mplc("check", "--fix", "std/balanced", cwd=tmp_path)
    assert r.returncode == 0 and "fixed" not in r.stderr


@pytest.mark.parametrize("flags", [["--fix", "--diff"]])
def test_fix_and_diff_exclude_each_other(tmp_path, flags):
    (tmp_path / "p.moe").write_text(BROKEN)
    r = mplc("check", *flags, "p.moe", cwd=tmp_path)
    assert r.returncode == 2 and "not allowed with argument" in r.stderr
