"""A lone surrogate (U+D800-U+DFFF) in policy text given as a ``str`` (mpl.loads, the DSL,
an editor buffer, an imported buffer) is not valid text: MPL100 located at it, like a file
that is not UTF-8, and never a UnicodeEncodeError."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import mpl
from mpl import dsl
from mpl.checker import analyze

CLEAN = "policy p { cache { capacity = 8 } }"


def test_loads_reports_the_surrogate_at_its_place():
    text = CLEAN + " # \ud800"
    with pytest.raises(mpl.PolicyError) as e:
        mpl.loads(text)
    (d,) = e.value.diagnostics
    assert d.code == "MPL100" and "lone surrogate U+D800" in d.message
    assert (d.span.line, d.span.column, d.span.offset, d.span.end_offset) == (1, 39, 38, 39)
    assert "1:39" in str(e.value)


def test_every_policy_of_the_text_is_refused_and_more_are_counted():
    text = CLEAN + "\npolicy q { cache { capacity = 8 } }  # \udfff and \ud800\n"
    a = analyze(text)
    assert [(d.code, d.span.line) for d in a.diagnostics] == [("MPL100", 2)]
    assert "U+DFFF (and 1 more)" in a.diagnostics[0].message
    assert a.ir == {}


def test_surrogate_in_code_and_in_an_import_path():
    a = analyze("policy p\ud800 { cache { capacity = 8 } }")
    assert "MPL100" in {d.code for d in a.diagnostics} and not a.ir
    a = analyze('import "lib\ud800.moe"\n' + CLEAN)
    assert [(d.code, d.span.offset) for d in a.diagnostics] == [("MPL100", 11)]


def test_surrogate_in_an_imported_buffer(tmp_path):
    main, lib = str(tmp_path / "main.moe"), str(tmp_path / "lib.moe")
    buffers = {lib: "policy base { cache { capacity = 8 } } # \udc80\n"}
    text = 'import "lib"\npolicy p { cache { capacity = 4 } }\npolicy q extends base { }\n'
    a = analyze(text, main, read_file=buffers.get)
    assert [(d.code, d.file) for d in a.diagnostics] == [("MPL100", lib)]
    assert set(a.ir) == {"p"}           # q inherits from the refused text
    assert len(a.source_hash) == 64


def test_a_path_that_is_not_encodable_is_only_a_name():
    assert mpl.loads(CLEAN, path=os.path.join(os.sep, "tmp", "a\ud800.moe")).name == "p"


def test_dsl_string_with_a_surrogate():
    b = dsl.policy("p").cache(capacity=8, eviction="\ud800")
    with pytest.raises(mpl.PolicyError) as e:
        b.build()
    assert "MPL100" in str(e.value)


def test_language_server_diagnostics():
    pytest.importorskip("pygls")
    from lsp.diagnostics import lsp_diagnostics
    from lsp.workspace import Store

    store = Store()
    doc = store.open("file:///virtual/s.moe", CLEAN + " # \ud800", 1)
    (d,) = lsp_diagnostics(store, doc, "utf-16")
    assert d.code == "MPL100"
    assert (d.range.start.line, d.range.start.character, d.range.end.character) == (0, 38, 39)


def test_cli_stdin_bytes_of_a_surrogate_are_not_utf8():
    """The same input as bytes (CESU-style ED A0 80) is refused by the reader, also MPL100."""
    r = subprocess.run([sys.executable, "-m", "mpl", "check", "-"], capture_output=True,
                       input=CLEAN.encode() + b" # \xed\xa0\x80\n")
    out = (r.stdout + r.stderr).decode()
    assert r.returncode == 1 and "MPL100" in out and "not UTF-8" in out, out
