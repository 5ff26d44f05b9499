"""The canonical formatter: layout, idempotence, every comment kept, same meaning."""

import dataclasses
import glob
import os

import pytest
from hypothesis import given
from hypothesis import strategies as st
from property_profiles import prop

from mpl import schema
from mpl.fmt import FormatError, format_text
from mpl.syntax import ast, parse

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
FILES = sorted(glob.glob(os.path.join(HERE, "corpus", "*.moe")) +
               glob.glob(os.path.join(ROOT, "stdlib", "*.moe")))


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def shape(n):
    """A node as plain data without spans (structure and values only)."""
    if isinstance(n, list):
        return [shape(x) for x in n]
    if isinstance(n, ast.Node):
        return (type(n).__name__, {f.name: shape(getattr(n, f.name)) for f in dataclasses.fields(n)
                                   if f.name not in ("span", "comments", "text", "path", "op_span")
                                   or (f.name == "text" and not isinstance(n, ast.Document))})
    return n


def canonical_shape(doc):
    """The document's structure in canonical order, computed independently of mpl.fmt."""
    order = schema.BLOCK_ORDER
    out = [shape(i) for i in doc.items if isinstance(i, ast.Version)]
    out += [shape(i) for i in doc.items if isinstance(i, ast.Import)]
    for p in doc.policies:
        blocks = sorted(enumerate(p.blocks),
                        key=lambda ib: (order.index(ib[1].name.text) if ib[1].name.text in order
                                        else len(order), ib[0]))
        bs = []
        for _, b in blocks:
            names = schema.BLOCKS[b.name.text].param_names() if b.name.text in schema.BLOCKS else ()
            params = sorted(enumerate(b.params), key=lambda ip: (
                names.index(ip[1].name.text) if ip[1].name.text in names else len(names), ip[0]))
            bs.append((b.name.text, [shape(x) for _, x in params] + [shape(r) for r in b.rules]))
        out.append((p.name.text, p.parent.text if p.parent else None, bs))
    return out


def comments(text):
    return [c.text for c in parse(text).document.comments]


@pytest.mark.parametrize("path", FILES, ids=os.path.basename)
def test_corpus_idempotent_comments_kept_meaning_unchanged(path):
    text = read(path)
    out = format_text(text)
    assert format_text(out) == out                       # idempotent
    assert sorted(comments(out)) == sorted(comments(text))  # every comment, same text
    r = parse(out)
    assert r.ok
    assert canonical_shape(r.document) == canonical_shape(parse(text).document)


def test_balanced_canonical_layout():
    out = format_text(read(os.path.join(HERE, "corpus", "balanced.moe")))
    assert out == (
        "policy balanced {\n"
        "    cache {\n"
        "        capacity = 16\n"
        "        eviction = lfu\n"
        "        frequency_decay = 0.9\n"
        "    }\n"
        "    prefetch {\n"
        "        strategy = history\n"
        "        budget = 4\n"
        "    }\n"
        "    schedule {\n"
        "        mode = hybrid\n"
        "    }\n"
        "    adapt {\n"
        "        when hit_rate < 0.4 for 100 accesses {\n"
        "            eviction = lru\n"
        "        }\n"
        "    }\n"
        "}\n")


def test_reordering_moves_comments_with_their_items():
    text = (
        "import \"std/lru_basic\"\n"
        "policy b {}\n"
        "version 1\n"
        "policy a {\n"
        "  adapt { when hit_rate<0.5 {eviction=lru} }\n"
        "  # about the cache\n"
        "  cache {\n"
        "    zeta = 1   # unknown params go last\n"
        "    eviction = lru|lfu   # trailing\n"
        "    # about capacity\n"
        "    capacity = 8GiB;pin=[1,2]\n"
        "    # end of cache\n"
        "  }\n"
        "}\n"
        "# end of file\n")
    out = format_text(text)
    assert out == (
        "version 1\n"
        "\n"
        "import \"std/lru_basic\"\n"
        "\n"
        "policy b {}\n"
        "\n"
        "policy a {\n"
        "    # about the cache\n"
        "    cache {\n"
        "        # about capacity\n"
        "        capacity = 8GiB\n"
        "        eviction = lru | lfu  # trailing\n"
        "        pin = [1, 2]\n"
        "        zeta = 1  # unknown params go last\n"
        "        # end of cache\n"
        "    }\n"
        "    adapt {\n"
        "        when hit_rate < 0.5 {\n"
        "            eviction = lru\n"
        "        }\n"
        "    }\n"
        "}\n"
        "\n"
        "# end of file\n")
    assert format_text(out) == out


def test_literals_kept_units_canonical():
    out = format_text("policy p { cache { a = 0.90  b = 12 GiB  c = 5e-1 d = 100accesses "
                      "e = 3GiG f = 2.5ms g = -1 h = \"s\\\"q\" } }")
    body = [line.strip() for line in out.splitlines()[2:-2]]
    assert body == ["a = 0.90", "b = 12GiB", "c = 5e-1", "d = 100 accesses", "e = 3GiG",
                    "f = 2.5 ms", "g = -1", 'h = "s\\"q"']


def test_conditional_and_fallback_values():
    out = format_text("policy p { cache { eviction = lfu|lru : lru when hit_rate<0.3 } }")
    assert "        eviction = lfu | lru : lru when hit_rate < 0.3\n" in out


def test_several_trailing_comments_on_one_output_line():
    text = "policy p { cache { capacity = # one\n 4 # two\n } }"
    out = format_text(text)
    assert sorted(comments(out)) == ["# one", "# two"]
    assert format_text(out) == out


def test_file_header_stays_on_top():
    text = "# header\n\npolicy p { cache { capacity = 1 } }\nversion 1\n"
    out = format_text(text)
    assert out.startswith("# header\n\nversion 1\n\npolicy p {")
    assert format_text(out) == out


def test_empty_and_comment_only():
    assert format_text("") == ""
    assert format_text("# just this\n") == "# just this\n"
    assert format_text("policy p { cache { } }") == "policy p {\n    cache {}\n}\n"


def test_empty_containers_keep_their_comments():
    cases = {
        "policy a { cache {}  # c\n}": "policy a {\n    cache {}  # c\n}\n",
        "policy a { cache { # a\n } # b\n}": "policy a {\n    cache {  # a\n    }  # b\n}\n",
        "policy a { cache {\n # inside\n} }": "policy a {\n    cache {\n        # inside\n    }\n}\n",
    }
    for text, want in cases.items():
        assert format_text(text) == want
        assert format_text(want) == want


def test_refuses_syntax_errors():
    with pytest.raises(FormatError) as e:
        format_text("policy p { cache { capacity = } }\npolicy q { x = }")
    assert [(d.code, d.span.line) for d in e.value.diagnostics] == [("MPL002", 1), ("MPL002", 2)]
    assert "syntax errors" in str(e.value)


_mutations = st.lists(st.sampled_from([" ", "\n", ";", "\n\n", "  ", "# c\n"]), max_size=6)


@prop(60)
@given(st.sampled_from([f for f in FILES if "corpus" in f]), st.data())
def test_whitespace_and_comment_noise_formats_to_a_fixed_point(path, data):
    """Inserting spaces, newlines, ';' and comments between tokens keeps the meaning, and the
    result is a fixed point."""
    text = read(path)
    r = parse(text)
    from mpl.syntax.lexer import tokenize
    toks = tokenize(text).tokens
    # anywhere between tokens, except between a number and its unit (a unit must follow its
    # number on the same line)
    points = [t.end_pos for t in toks if t.type != "NUMBER"]
    cuts = sorted(set(data.draw(st.lists(st.sampled_from(points), max_size=6))))
    noisy, last = [], 0
    for c in cuts:
        noisy.append(text[last:c])
        noisy.append(" " + data.draw(st.sampled_from([" ", "\n", "\n\n", "  ", "# noise\n"])))
        last = c
    noisy.append(text[last:])
    noisy = "".join(noisy)
    nr = parse(noisy)
    if not nr.ok:  # '# noise' glued before a token can only comment out code, never happens
        pytest.fail(f"noise broke the file: {nr.diagnostics[0].message}")
    out = format_text(noisy)
    assert format_text(out) == out
    assert canonical_shape(parse(out).document) == canonical_shape(r.document)
    assert sorted(comments(out)) == sorted(comments(noisy))


@prop(80)
@given(st.sampled_from(FILES), st.data())
def test_shuffled_lines_format_to_a_fixed_point(path, data):
    """Lines moved around (comments included): whenever the result still parses, formatting
    keeps its meaning and comments and is a fixed point."""
    lines = read(path).splitlines(True)
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(lines) - 1))
        j = data.draw(st.integers(0, len(lines) - 1))
        lines.insert(j, lines.pop(i))
    text = "".join(lines)
    r = parse(text)
    if not r.ok:
        return
    out = format_text(text)
    assert format_text(out) == out
    assert sorted(comments(out)) == sorted(comments(text))
    assert canonical_shape(parse(out).document) == canonical_shape(r.document)


def test_memory_tiers_canonical_layout_keeps_comments():
    text = ("policy p {  # p\n  hierarchy {\n    eviction = weighted_sum(lru=0.5,lfu=0.5)  # default\n"
            "    on demote(hot->warm) { mechanism = copy }\n"
            "    # the fast tier\n    tier hot { capacity = 16; location = gpu:0 }  # hot\n"
            "    tier warm { dtype_ladder = [fp16,int8]; location = gpu capacity = 2GiB\n"
            "      # end of warm\n    }\n  }\n"
            "  per_layer_hierarchy { band layers = 0..7 { eviction = lfu tier hot { capacity = 4 } } }\n}\n")
    out = format_text(text)
    assert out == (
        "policy p {  # p\n"
        "    hierarchy {\n"
        "        # the fast tier\n"
        "        tier hot {\n"
        "            location = gpu:0\n"
        "            capacity = 16\n"
        "        }  # hot\n"
        "        tier warm {\n"
        "            location = gpu\n"
        "            dtype_ladder = [fp16, int8]\n"
        "            capacity = 2GiB\n"
        "            # end of warm\n"
        "        }\n"
        "        on demote(hot -> warm) {\n"
        "            mechanism = copy\n"
        "        }\n"
        "        eviction = weighted_sum(lru = 0.5, lfu = 0.5)  # default\n"
        "    }\n"
        "    per_layer_hierarchy {\n"
        "        band layers = 0..7 {\n"
        "            tier hot {\n"
        "                capacity = 4\n"
        "            }\n"
        "            eviction = lfu\n"
        "        }\n"
        "    }\n"
        "}\n")
    assert format_text(out) == out
    from mpl.checker import analyze
    assert analyze(out).ir == analyze(text).ir


def test_misplaced_and_unknown_items_are_kept():
    # the checker reports them (MPL115); the formatter never drops what it parsed
    text = "policy p { cache { tier x { a = 1 } capacity = 8 } hierarchy { tyer t {} tier h {} } }\n"
    out = format_text(text)
    assert "tier x {\n" in out and "tyer t {}" in out and "tier h {}" in out
    assert out.index("tier h") < out.index("tyer t")        # known kinds first, then unknown ones
    assert format_text(out) == out
