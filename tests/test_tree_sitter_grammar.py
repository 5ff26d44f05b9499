"""The tree-sitter grammar (editors/tree-sitter-moe, for Neovim, Helix and Zed) through the
tree-sitter Python bindings: its committed parser (src/parser.c, generated from grammar.js by
the tree-sitter CLI) is compiled here and parses every .moe file of the repository the way
mpl's own parser does — no ERROR or MISSING node in a file mpl parses without a syntax error,
an ERROR in one it rejects —; its queries (highlights, folds, indents) compile against it and
capture what they say; its keywords and units are mpl.schema's.

Needs ``pip install tree-sitter`` and a C compiler (editors/tree-sitter-moe/ci.sh installs
the bindings); skipped without them."""

from __future__ import annotations

import ctypes
import re
import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest

ts = pytest.importorskip("tree_sitter")

from mpl import schema  # noqa: E402
from mpl.syntax import parse  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TSM = ROOT / "editors" / "tree-sitter-moe"
QUERIES = TSM / "queries"
_LIBS: list = []


@pytest.fixture(scope="module")
def language(tmp_path_factory):
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    cc = shutil.which(cc) or shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build the parser")
    so = tmp_path_factory.mktemp("ts") / "moe.so"
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-I", str(TSM / "src"), str(TSM / "src" / "parser.c"),
                    "-o", str(so)], check=True, capture_output=True, timeout=300)
    lib = ctypes.CDLL(str(so))
    fn = lib.tree_sitter_moe
    fn.restype = ctypes.c_void_p
    capsule_new = ctypes.pythonapi.PyCapsule_New
    capsule_new.restype = ctypes.py_object
    capsule_new.argtypes = (ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)
    _LIBS.append(lib)           # the library must outlive the language
    return ts.Language(capsule_new(fn(), b"tree_sitter.Language", None))


def _moe_files() -> list[Path]:
    dirs = [ROOT / "stdlib", ROOT / "tests" / "corpus", ROOT / "docs",
            ROOT / "vscode-extension" / "e2e" / "workspace", ROOT / "vscode-extension" / "test" / "grammar"]
    return sorted(p for d in dirs for p in d.rglob("*.moe"))


def _errors(node, out=None) -> list:
    out = [] if out is None else out
    if node.is_error or node.is_missing:
        out.append(node)
    for c in node.children:
        _errors(c, out)
    return out


def test_every_repository_policy_parses_as_mpl_parses_it(language):
    parser = ts.Parser(language)
    files = _moe_files()
    assert len(files) >= 30 and any(p.parent.name == "stdlib" for p in files)
    disagree = []
    valid = 0
    for path in files:
        text = path.read_text(encoding="utf-8")
        mpl_ok = not any(d.code.startswith("MPL0") for d in parse(text).diagnostics)
        tree = parser.parse(text.encode("utf-8"))
        errs = _errors(tree.root_node)
        if mpl_ok:
            valid += 1
            if errs:
                disagree.append(f"{path.relative_to(ROOT)}: ERROR/MISSING at {[e.start_point for e in errs[:3]]}")
        elif not tree.root_node.has_error:
            disagree.append(f"{path.relative_to(ROOT)}: mpl reports a syntax error, tree-sitter none")
    assert not disagree, "\n".join(disagree)
    assert valid >= 30


def test_stdlib_parses_without_error_nodes(language):
    parser = ts.Parser(language)
    for path in sorted((ROOT / "stdlib").glob("*.moe")):
        root = parser.parse(path.read_bytes()).root_node
        assert not root.has_error, path.name
        assert [c.type for c in root.children if c.type == "policy"], path.name


def test_half_typed_file_keeps_the_rest(language):
    text = b"policy a { cache { capacity = } }\npolicy b { cache { capacity = 4 } }\n"
    root = ts.Parser(language).parse(text).root_node
    assert root.has_error
    names = [n.text for n in _walk(root) if n.type == "policy" for n in [n.child_by_field_name("name")] if n]
    assert b"b" in names


def _walk(node):
    yield node
    for c in node.children:
        yield from _walk(c)


def _captures(language, query_file: str, text: bytes) -> dict[str, list[bytes]]:
    q = ts.Query(language, (QUERIES / query_file).read_text(encoding="utf-8"))
    tree = ts.Parser(language).parse(text)
    return {k: [n.text for n in v] for k, v in ts.QueryCursor(q).captures(tree.root_node).items()}


def test_highlights_capture_each_kind(language):
    text = (b'version 1\nimport "std/lru_basic"  # note\npolicy p extends lru_basic {\n'
            b'  cache { capacity = 12GiB  eviction = lfu | lru  pin = [0] }\n'
            b'  schedule { overlap = true }\n'
            b'  adapt { when hit_rate < 0.4 for 50 accesses { cache.capacity = 8 trigger flush rebalance entropy } }\n}\n')
    c = _captures(language, "highlights.scm", text)
    assert {b"version", b"import", b"policy", b"extends", b"when", b"for", b"trigger", b"rebalance"} <= set(c["keyword"])
    assert c["type.definition"] == [b"p"] and c["type"] == [b"lru_basic"]
    assert {b"cache", b"schedule", b"adapt"} <= set(c["module"])
    assert {b"capacity", b"eviction", b"pin", b"overlap"} <= set(c["property"])
    assert {b"lfu", b"lru", b"entropy"} <= set(c["constant"])
    assert c["variable.builtin"] == [b"hit_rate"] and c["function.builtin"] == [b"flush"]
    assert set(c["type.builtin"]) == {b"GiB", b"accesses"} and c["boolean"] == [b"true"]
    assert c["string"] == [b'"std/lru_basic"'] and c["comment"] == [b"# note"]


def test_folds_and_indents_compile_and_mark_blocks(language):
    text = b"policy p {\n  cache {\n    pin = [\n      1,\n    ]\n  }\n  adapt { when hit_rate < 1 {\n  } }\n}\n"
    folds = _captures(language, "folds.scm", text)["fold"]
    assert len(folds) == 5          # policy, cache, list, adapt, rule
    ind = _captures(language, "indents.scm", text)
    assert len(ind["indent.begin"]) == 5 and ind["indent.end"].count(b"}") == 4


def test_keywords_and_units_are_the_schemas():
    js = (TSM / "grammar.js").read_text(encoding="utf-8")

    def const(name: str) -> list[str]:
        m = re.search(rf"const {name} = \[([^\]]*)\]", js)
        return re.findall(r'"([^"]+)"', m.group(1))

    assert const("KEYWORDS") == list(schema.KEYWORDS)
    assert const("UNITS") == list(schema.UNITS)
    assert const("COMPARISON") == list(schema.COMPARISON_OPS)


def test_committed_parser_is_generated_from_this_grammar():
    """src/grammar.json is what the CLI wrote from grammar.js: the names of its rules are the
    grammar's (a rule added to grammar.js without regenerating fails here; ci.sh regenerates
    with the CLI and compares byte for byte where the CLI can be had)."""
    import json

    js = (TSM / "grammar.js").read_text(encoding="utf-8")
    body = js[js.index("rules: {"):]
    rules = re.findall(r"^\s{4}(\w+): \(", body, re.M)
    generated = json.loads((TSM / "src" / "grammar.json").read_text(encoding="utf-8"))
    assert list(generated["rules"]) == rules
    parser_c = (TSM / "src" / "parser.c").read_text(encoding="utf-8")
    assert '"tree_sitter_moe"' in parser_c or "tree_sitter_moe(void)" in parser_c


def test_memory_tiers_parse_and_highlight(language):
    text = (b"policy p {\n  hierarchy {\n    tier hot { location = gpu:1  capacity = 8 }\n"
            b"    on demote(hot -> warm) { mechanism = copy }\n"
            b"    eviction = weighted_sum(lru = 0.5, lfu = 0.5)\n  }\n"
            b"  per_layer_hierarchy { band layers = 0..7 { tier hot { capacity = 4 } } }\n}\n")
    root = ts.Parser(language).parse(text).root_node
    assert not root.has_error and parse(text.decode()).ok
    c = _captures(language, "highlights.scm", text)
    assert {b"tier", b"on", b"band"} <= set(c["keyword"])
    assert {b"hot", b"warm"} <= set(c["label"]) and b"weighted_sum" in c["function.builtin"]
    assert {b"demote", b"gpu:1", b"lru", b"lfu", b"copy"} <= set(c["constant"])
    assert b"0..7" in c["number"] and {b"location", b"layers", b"eviction"} <= set(c["property"])
    assert {b"->", b"="} <= set(c["operator"]) and {b"(", b")"} <= set(c["punctuation.bracket"])
    folds = _captures(language, "folds.scm", text)["fold"]
    assert sum(f.startswith((b"tier", b"on ", b"band")) for f in folds) == 4
