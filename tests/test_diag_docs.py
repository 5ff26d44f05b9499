"""docs/diagnostics.md: every code explained, every wrong example triggers exactly its code,
every fixed example is clean, the committed page equals the generated one, and
`mplc explain` prints the same text."""

import os
import subprocess
import sys

import pytest

from mpl.checker import analyze
from mpl.diagnostic_docs import EXPLANATIONS, generate, normalize_code, section
from mpl.rules import CODES
from mpl.shapes import resolve

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _analyze_example(tmp_path, e, text):
    model = resolve(e.model) if e.model else None
    if model is not None and e.device_memory_gb:
        model = model.with_device_memory(int(e.device_memory_gb * 1e9))
    path = tmp_path / e.filename
    path.write_text(text)
    return analyze(text, str(path), model=model)


def test_every_code_is_explained():
    assert set(EXPLANATIONS) == set(CODES)


@pytest.mark.parametrize("code", list(CODES))
def test_examples(tmp_path, code):
    e = EXPLANATIONS[code]
    wrong = _analyze_example(tmp_path, e, e.wrong)
    assert {d.code for d in wrong.diagnostics} == {code}, [(d.code, d.message) for d in wrong.diagnostics]
    fixed = _analyze_example(tmp_path, e, e.fixed)
    assert fixed.diagnostics == [], [(d.code, d.message) for d in fixed.diagnostics]
    assert fixed.ir, "a fixed example must load"


def test_committed_page_is_generated():
    with open(os.path.join(ROOT, "docs", "diagnostics.md"), encoding="utf-8") as f:
        committed = f.read()
    assert committed == generate(), "run: python -m mpl.diagnostic_docs > docs/diagnostics.md"


def test_page_has_an_anchor_per_code():
    page = generate()
    for code in CODES:
        assert f'<a id="{code.lower()}"></a>' in page
        assert section(code) in page


def test_explain_prints_the_docs_section():
    out = subprocess.run([sys.executable, "-m", "mpl.cli.main", "explain", "mpl306"],
                         capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout == section("MPL306") + "\n"
    assert "Wrong:" in out.stdout and "Fixed:" in out.stdout


def test_explain_unknown_code_is_a_usage_error():
    out = subprocess.run([sys.executable, "-m", "mpl.cli.main", "explain", "MPL999"],
                         capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 2
    assert "unknown code 'MPL999'" in out.stderr and "MPL102" in out.stderr
    assert "Traceback" not in out.stderr


def test_normalize_code():
    assert normalize_code("102") == "MPL102"
    assert normalize_code(" mpl001 ") == "MPL001"
    assert normalize_code("1") == "MPL001"
