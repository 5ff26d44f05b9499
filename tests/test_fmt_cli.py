"""``mplc fmt`` as a user runs it: a subprocess on real files."""

import os
import shutil
import stat
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BALANCED = os.path.join(HERE, "corpus", "balanced.moe")


def mplc(*args, cwd, stdin=None):
    return subprocess.run([sys.executable, "-m", "mpl.cli.main", "fmt", *args], cwd=cwd,
                          capture_output=True, text=True, input=stdin,
                          env={**os.environ, "NO_COLOR": "1"})


def test_rewrites_in_place_then_check_passes(tmp_path):
    f = tmp_path / "balanced.moe"
    shutil.copy(BALANCED, f)
    os.chmod(f, 0o640)
    before = f.read_text()
    r = mplc("--check", "balanced.moe", cwd=tmp_path)
    assert r.returncode == 1 and "would reformat balanced.moe" in r.stdout
    assert f.read_text() == before                                   # --check writes nothing
    r = mplc("balanced.moe", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "reformatted balanced.moe" in r.stderr
    after = f.read_text()
    assert after != before and "    schedule {\n        mode = hybrid\n    }\n" in after
    assert stat.S_IMODE(os.stat(f).st_mode) == 0o640                 # mode kept
    assert [p.name for p in tmp_path.iterdir()] == ["balanced.moe"]  # no temp file left
    r = mplc("--check", "balanced.moe", cwd=tmp_path)
    assert r.returncode == 0 and r.stdout == ""
    assert "0 files would be reformatted, 1 already formatted" in r.stderr


def test_byte_order_mark_and_crlf_are_not_canonical(tmp_path):
    """A canonical policy saved with a byte-order mark, CRLF or lone CR line ends is
    reformatted to the same text without them (the file is read once and compared as it is on disk)."""
    canon = tmp_path / "canon.moe"
    shutil.copy(BALANCED, canon)
    assert mplc("canon.moe", cwd=tmp_path).returncode == 0
    text = canon.read_bytes()
    for name, data in (("bom.moe", b"\xef\xbb\xbf" + text), ("crlf.moe", text.replace(b"\n", b"\r\n")),
                       ("cr.moe", text.replace(b"\n", b"\r"))):
        f = tmp_path / name
        f.write_bytes(data)
        r = mplc("--check", name, cwd=tmp_path)
        assert r.returncode == 1 and f"would reformat {name}" in r.stdout, r.stderr
        assert mplc(name, cwd=tmp_path).returncode == 0
        assert f.read_bytes() == text
    assert mplc("--check", "canon.moe", cwd=tmp_path).returncode == 0


def test_diff_prints_without_writing(tmp_path):
    f = tmp_path / "b.moe"
    shutil.copy(BALANCED, f)
    before = f.read_text()
    r = mplc("--diff", "b.moe", cwd=tmp_path)
    assert r.returncode == 0
    assert r.stdout.startswith("--- b.moe\n+++ b.moe (formatted)\n")
    assert "-    schedule { mode = hybrid }\n" in r.stdout and "+        mode = hybrid\n" in r.stdout
    assert f.read_text() == before
    r = mplc("--diff", "--check", "b.moe", cwd=tmp_path)
    assert r.returncode == 1 and "would reformat b.moe" in r.stdout


def test_refuses_a_file_with_syntax_errors(tmp_path):
    f = tmp_path / "bad.moe"
    text = "policy a {\n  cache { capacity = }\n}\n"
    f.write_text(text)
    r = mplc("bad.moe", cwd=tmp_path)
    assert r.returncode == 1
    assert "not formatting 'bad.moe': it has syntax errors" in r.stderr
    assert "bad.moe:2:22: error[MPL002]: expected a value after 'capacity =', found '}'" in r.stderr
    assert "Traceback" not in r.stderr
    assert f.read_text() == text


def test_missing_file_and_directory(tmp_path):
    r = mplc("nope.moe", cwd=tmp_path)
    assert r.returncode == 1 and "no such file: 'nope.moe'" in r.stderr
    r = mplc(str(tmp_path), cwd=tmp_path)
    assert r.returncode == 1 and "is a directory" in r.stderr
    assert "Traceback" not in r.stderr


def test_several_files_one_bad(tmp_path):
    good = tmp_path / "good.moe"
    good.write_text("policy g { cache { capacity = 2 } }")
    (tmp_path / "bad.moe").write_text("policy b { cache { capacity = 2 }")
    r = mplc("good.moe", "bad.moe", cwd=tmp_path)
    assert r.returncode == 1
    assert good.read_text() == "policy g {\n    cache {\n        capacity = 2\n    }\n}\n"
    assert "MPL003" in r.stderr


def test_stdin_to_stdout(tmp_path):
    r = mplc("-", cwd=tmp_path, stdin="policy a{cache{capacity=1}}")
    assert r.returncode == 0 and r.stdout == "policy a {\n    cache {\n        capacity = 1\n    }\n}\n"
    r = mplc("-", cwd=tmp_path, stdin="policy a{")
    assert r.returncode == 1 and "<stdin>:1:10: error[MPL003]" in r.stderr


def test_usage_errors_exit_2(tmp_path):
    assert mplc(cwd=tmp_path).returncode == 2
    assert mplc("--bogus", "x.moe", cwd=tmp_path).returncode == 2
