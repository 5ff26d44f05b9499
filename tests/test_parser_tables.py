"""The shipped LALR table is Lark's analysis of grammar.lark, and parsing never imports Lark."""

import glob
import os
import subprocess
import sys

from mpl.syntax import lalr, parse, tablegen
from mpl.syntax import _tables

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CORPUS = sorted(glob.glob(os.path.join(HERE, "corpus", "*.moe")))


def test_shipped_table_matches_the_grammar():
    assert _tables.GRAMMAR_SHA256 == tablegen.grammar_hash(tablegen.grammar_text()), \
        "grammar.lark changed: run  python -m mpl.syntax.tablegen"


def test_table_from_lark_parses_the_corpus_like_the_shipped_one(monkeypatch):
    from parser_helpers import dump

    shipped = {p: dump(parse(open(p).read()).document.items) for p in CORPUS}
    fresh = tablegen.build_tables(tablegen.grammar_text())
    assert len(fresh["states"]) == len(_tables.STATES) and len(fresh["rules"]) == len(_tables.RULES)
    monkeypatch.setattr(lalr, "_TABLE", lalr._Table(fresh, lalr.AstBuilder()))
    for p in CORPUS:
        assert dump(parse(open(p).read()).document.items) == shipped[p]


def test_stale_table_is_rebuilt_with_lark(monkeypatch):
    monkeypatch.setattr(_tables, "GRAMMAR_SHA256", "stale")
    monkeypatch.setattr(lalr, "_TABLE", None)
    data = lalr._load_data()
    assert data["states"] is not _tables.STATES
    monkeypatch.setattr(lalr, "_TABLE", lalr._Table(data, lalr.AstBuilder()))
    assert parse("policy a { cache { capacity = 4 } }").ok


def test_render_round_trips(tmp_path):
    out = tmp_path / "t.py"
    tablegen.write_tables(str(out))
    ns = {}
    exec(out.read_text(), ns)
    assert ns["GRAMMAR_SHA256"] == _tables.GRAMMAR_SHA256
    assert len(ns["STATES"]) == len(_tables.STATES)


def test_parsing_does_not_import_lark():
    code = ("import sys; from mpl.syntax import parse; from mpl.fmt import format_text; "
            "r = parse(open(sys.argv[1]).read()); format_text(r.document.text); "
            "print(r.ok, 'lark' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code, CORPUS[0]], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "False"]


def test_missing_grammar_file_trusts_the_shipped_table(monkeypatch):
    def missing():
        raise FileNotFoundError("grammar.lark")

    monkeypatch.setattr(tablegen, "grammar_text", missing)
    data = lalr._load_data()
    assert data["states"] is _tables.STATES


def test_balanced_flag_decides_the_lalr_attempt():
    from mpl.syntax.lexer import tokenize

    for p in CORPUS:
        assert tokenize(open(p).read()).balanced
    for text in ("policy a {", "policy a { } }", "x = [1", "x = 1]", "}{", "]["):
        assert not tokenize(text).balanced, text
    # kind-blind: '[{]}' counts as balanced, and the LALR parser rejects it
    assert tokenize("[{]}").balanced and not parse("[{]}").ok


def test_may_be_valid_is_a_necessary_condition():
    """Whatever the LALR parser accepts passes the pre-check (so skipping is exact)."""
    from mpl.syntax.lexer import tokenize
    from mpl.syntax.parser import _may_be_valid

    text = open(os.path.join(HERE, "corpus", "full_syntax.moe")).read()
    for i in range(len(text) + 1):
        lexed = tokenize(text[:i])
        if not lexed.diagnostics:
            try:
                lalr.parse_tokens(lexed.tokens)
            except lalr.SyntaxFailure:
                continue
            assert _may_be_valid(lexed), text[:i]
    assert not _may_be_valid(tokenize("policy a { } x"))
    assert not _may_be_valid(tokenize("cache { }"))


def test_grammar_declares_exactly_the_lexer_token_types():
    import re

    from mpl.syntax.lexer import TOKEN_TYPES

    declared = set()
    for line in tablegen.grammar_text().splitlines():
        m = re.match(r"%declare\s+(.*)", line)
        if m:
            declared.update(m.group(1).split())
    assert declared == set(TOKEN_TYPES)
    # and every shipped table symbol is a declared token or a rule
    terminals = {sym for row in _tables.STATES for sym in row if sym.isupper() or sym.startswith("_S")}
    assert terminals - {"$END"} <= declared
