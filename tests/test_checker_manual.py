"""docs/MANUAL.md is generated from the schema (python -m mpl.manual) and kept in sync."""

import os
import re
import subprocess
import sys

from mpl import schema
from mpl.manual import generate

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_committed_manual_is_generated():
    with open(os.path.join(ROOT, "docs", "MANUAL.md"), encoding="utf-8") as f:
        assert f.read() == generate(), "run: python -m mpl.manual > docs/MANUAL.md"


def test_manual_covers_the_whole_schema():
    page = generate()
    for b in schema.BLOCKS.values():
        assert f"### `{b.name}`" in page
        for p in b.params:
            row = next(line for line in page.splitlines() if line.startswith(f"| `{p.name}` |"))
            assert p.default_text().replace("|", "\\|") in row
            for e in p.enum:
                assert f"| `{e.name}` |" in page
    for name in list(schema.METRICS) + list(schema.UNITS) + list(schema.TRIGGERS):
        assert f"| `{name}` |" in page
    for p in schema.PARAMS.values():
        for alias in p.aliases:
            assert f"| `{alias}` | `{p.key}` |" in page


def test_manual_examples_check_clean(tmp_path):
    """Every complete policy in a moe code block of the manual checks clean."""
    from mpl.checker import analyze
    page = generate()
    blocks = page.split("```moe\n")[1:]
    checked = 0
    for b in blocks:
        code = b.split("```", 1)[0]
        if "policy" not in code or any(not i.startswith("std/") for i in re.findall(r'import "([^"]+)"', code)):
            continue
        a = analyze(code)
        assert a.diagnostics == [], (code, [(d.code, d.message) for d in a.diagnostics])
        checked += 1
    assert checked >= 1   # the opening example (with a std import)


def test_module_prints_the_page():
    out = subprocess.run([sys.executable, "-m", "mpl.manual"], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0 and out.stdout == generate()
