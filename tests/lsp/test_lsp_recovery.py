"""The server reads a broken file as the checker's recovering parser does: a top-level keyword
ends whatever is left open (the usual state while a policy is typed above another one), a
';' that does not separate two items is read as if it were not there, and a '{' on the line
after its header opens what the parser opens there, so definition, references, rename,
hover, completion and semantic tokens see the policies as the checker does, and a rename
leaves the check result as it was."""

from __future__ import annotations

import os

import pytest
from hypothesis import example, given, strategies as st
from lsprotocol import types

from mpl.checker import analyze
from mpl.syntax import ast, parse

from lsp import context
from lsp.tokens import AS_COMMA, STRAY, tokenize
from property_profiles import prop
from lsp_harness import (client, diagnostics, hover, labels_at, no_internal_errors, open_doc,  # noqa: F401
                         pos_of, tdi)

UNCLOSED_ABOVE = """policy base {
    cache { capacity = 8

policy tuned extends base {
    cache { capacity = 4 }
}
"""


def _apply(text: str, edits: list[types.TextEdit]) -> str:
    """``text`` with single-line edits applied (ASCII text: a character is a code point)."""
    lines = text.split("\n")
    for e in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        s, end = e.range.start, e.range.end
        assert s.line == end.line
        line = lines[s.line]
        lines[s.line] = line[:s.character] + e.new_text + line[end.character:]
    return "\n".join(lines)


def _codes(text: str, path: str) -> list[str]:
    return [d.code for d in analyze(text, path).diagnostics]


async def _semantic_lines(client, uri: str, text: str) -> dict[int, list[tuple[str, str]]]:
    """The server's semantic tokens of the open document ``uri`` (whose text is ``text``) per
    line: (text, token type)."""
    data = (await client.text_document_semantic_tokens_full_async(
        types.SemanticTokensParams(text_document=tdi(uri)))).data
    legend = client.init_result.capabilities.semantic_tokens_provider.legend
    lines = text.split("\n")
    line = col = 0
    got: dict[int, list[tuple[str, str]]] = {}
    for i in range(0, len(data), 5):
        dl, dc, n, tt, _ = data[i:i + 5]
        line += dl
        col = col + dc if dl == 0 else dc
        got.setdefault(line, []).append((lines[line][col:col + n], legend.token_types[tt]))
    return got


@pytest.mark.asyncio(loop_scope="module")
async def test_navigation_after_an_unclosed_block_sees_the_next_policy(client):
    uri = open_doc(client, "unclosed_above.moe", UNCLOSED_ABOVE)
    assert [d.code for d in await diagnostics(client, uri)] == ["MPL003"]
    enc = client.encoding
    definition = pos_of(UNCLOSED_ABOVE, "base", enc)
    reference = pos_of(UNCLOSED_ABOVE, "base", enc, nth=1)
    locs = await client.text_document_definition_async(types.DefinitionParams(
        text_document=tdi(uri), position=reference))
    assert [x.range.start for x in locs] == [definition]
    refs = await client.text_document_references_async(types.ReferenceParams(
        text_document=tdi(uri), position=definition, context=types.ReferenceContext(include_declaration=True)))
    assert sorted((r.range.start.line, r.range.start.character) for r in refs) == [
        (definition.line, definition.character), (reference.line, reference.character)]
    edit = await client.text_document_rename_async(types.RenameParams(
        text_document=tdi(uri), position=definition, new_name="renamed"))
    renamed = _apply(UNCLOSED_ABOVE, edit.changes[uri])
    assert "policy tuned extends renamed {" in renamed
    path = str(client.root / "unclosed_above.moe")
    assert _codes(renamed, path) == _codes(UNCLOSED_ABOVE, path) == ["MPL003"]
    no_internal_errors(client)


@pytest.mark.asyncio(loop_scope="module")
async def test_semantic_tokens_after_an_unclosed_block_colour_the_next_policy(client):
    uri = open_doc(client, "unclosed_tokens.moe", UNCLOSED_ABOVE)
    await diagnostics(client, uri)
    got = await _semantic_lines(client, uri, UNCLOSED_ABOVE)
    assert got[3] == [("policy", "keyword"), ("tuned", "class"), ("extends", "modifier"), ("base", "class")]
    assert got[4] == [("cache", "namespace"), ("capacity", "parameter"), ("=", "operator"), ("4", "number")]


# ------------------------------------------------------------------ roles and the parser
WORDS = ["policy", "policy", "extends", "import", "version", "{", "}", "{", "}", "cache",
         "capacity", "=", "8", "a", "b", "base", "\n", "\n", " ", "when", "hit_rate", "<", "0.5",
         "adapt", "[", "]", "tier", "hot", "#c\n", "(", ")", '"x"', "true", ";", ";"]
TEXTS = st.lists(st.sampled_from(WORDS), max_size=25).map(" ".join)


def _names(text: str) -> tuple[list, list]:
    """(where policies are named, where parents are named) as the server's roles say."""
    toks = tokenize(text)
    infos = context.classify(toks)
    return ([(t.start, t.text) for t, i in zip(toks, infos) if i.role == context.POLICY_DEF],
            [(t.start, t.text) for t, i in zip(toks, infos) if i.role == context.POLICY_REF])


def _parsed_names(text: str) -> tuple[list, list]:
    """(where policies are named, where parents are named) in the parser's document."""
    pols = parse(text).document.policies
    return ([(p.name.span.offset, p.name.text) for p in pols if p.name is not None],
            [(p.parent.span.offset, p.parent.text) for p in pols if p.parent is not None])


@given(TEXTS)
@example(UNCLOSED_ABOVE)
@example("policy a { cache { capacity = 8 policy b extends a { } }")   # not at a line start
@example('import "x" policy p extends a {')                            # after a complete item
@example("policy policy policy {")              # a keyword names a policy where it reads as one
@example("policy true a {")                     # ... and only there
@example("policy p extends\n  base {")          # a header read across lines
@example("policy p # c\n  extends base {")
@example("policy b a {")                        # 'extends' missing: the parser takes the parent
@example("cache { extends policy {")            # 'extends' outside a header names nothing
@example("policy a ; extends ; b {")            # a ';' inside a header is read as not there
@example("policy ; policy ; {")                 # ... also before a keyword that names a policy
@prop(300)
def test_policy_names_and_parents_are_the_parsers(text):
    assert sorted(_names(text)[0]) == sorted(_parsed_names(text)[0])
    assert sorted(_names(text)[1]) == sorted(_parsed_names(text)[1])


@given(TEXTS)
@example(UNCLOSED_ABOVE)
@example("policy policy policy {")
@example("policy policy ; { } policy ; policy {")
@prop(300)
def test_a_scan_from_any_checkpoint_gives_the_roles_of_the_whole_scan(text):
    """Hover and completion scan from the last top-level item before the cursor: the roles
    from there are those of a scan from the start."""
    toks = tokenize(text)
    whole = context.classify(toks)
    for c in context.checkpoints(toks):
        assert context.Scanner(toks, c).run().infos == whole[c:], c


def test_an_unclosed_frame_ends_where_the_next_policy_starts():
    toks = tokenize(UNCLOSED_ABOVE)
    base_open = next(i for i, t in enumerate(toks) if t.text == "{")
    second = [i for i, t in enumerate(toks) if t.text == "policy"][1]
    assert context.frame_end(toks, base_open) == second
    assert context.blocks_in(toks, base_open) == {"cache"}
    ctx = context.context_at(UNCLOSED_ABOVE, UNCLOSED_ABOVE.index("= 4") + 2)
    assert (ctx.policy, ctx.block, ctx.kind, ctx.param) == ("tuned", "cache", "value", "cache.capacity")


# ------------------------------------------------------------------ ';' as the parser reads it
STRAY_SEMICOLONS = """policy base ; {
    cache ; { capacity = ; 8 }
}
policy tuned ; extends ; base {
    cache { capacity = 4 ; eviction = lru }
}
"""


@pytest.mark.asyncio(loop_scope="module")
async def test_a_stray_semicolon_leaves_navigation_and_tokens_as_the_parser_reads_them(client):
    """Each ';' here but the one between the two parameters is reported and read as if it were
    not there: the policies, their parent, the block and its parameters are the parser's."""
    uri = open_doc(client, "stray_semicolons.moe", STRAY_SEMICOLONS)
    assert [d.code for d in await diagnostics(client, uri)] == ["MPL002"] * 5
    enc = client.encoding
    definition = pos_of(STRAY_SEMICOLONS, "base", enc)
    reference = pos_of(STRAY_SEMICOLONS, "base", enc, nth=1)
    locs = await client.text_document_definition_async(types.DefinitionParams(
        text_document=tdi(uri), position=reference))
    assert [x.range.start for x in locs] == [definition]
    edit = await client.text_document_rename_async(types.RenameParams(
        text_document=tdi(uri), position=reference, new_name="renamed"))
    renamed = _apply(STRAY_SEMICOLONS, edit.changes[uri])
    assert renamed.startswith("policy renamed ; {") and "extends ; renamed {" in renamed
    path = str(client.root / "stray_semicolons.moe")
    assert _codes(renamed, path) == _codes(STRAY_SEMICOLONS, path) == ["MPL002"] * 5
    got = await _semantic_lines(client, uri, STRAY_SEMICOLONS)
    assert got[1] == [("cache", "namespace"), ("capacity", "parameter"), ("=", "operator"), ("8", "number")]
    assert got[3] == [("policy", "keyword"), ("tuned", "class"), ("extends", "modifier"), ("base", "class")]
    assert got[4][:2] == [("cache", "namespace"), ("capacity", "parameter")]
    assert ("eviction", "parameter") in got[4]
    no_internal_errors(client)


def _parsed_roles(text: str) -> dict[int, str]:
    """The offset of each name the parser reads as a policy, a parent, a block, a parameter,
    a rule's metric or target or a nested item's kind and head, with the server's role for
    it."""
    out: dict[int, str] = {}

    def items(its: list) -> None:
        for item in its:
            if isinstance(item, ast.Param):
                out[item.name.span.offset] = context.PARAM
            elif isinstance(item, ast.Rule):
                if item.condition is not None and item.condition.metric is not None:
                    out[item.condition.metric.span.offset] = context.METRIC
                out.update((a.target.span.offset, context.TARGET)
                           for a in item.actions if isinstance(a, ast.SetAction))
            elif isinstance(item, ast.Section):
                out[item.kind.span.offset] = context.SECTION_R
                head = item.head
                if isinstance(head, ast.Name):
                    out[head.span.offset] = context.LABEL_R
                elif isinstance(head, ast.Param):
                    out[head.name.span.offset] = context.PARAM
                elif isinstance(head, ast.Edge):
                    out[head.event.span.offset] = context.EVENT_R
                    out.update((n.span.offset, context.LABEL_REF)
                               for n in (head.source, head.target) if n is not None)
                items(item.items)

    for p in parse(text).document.policies:
        if p.name is not None:
            out[p.name.span.offset] = context.POLICY_DEF
        if p.parent is not None:
            out[p.parent.span.offset] = context.POLICY_REF
        for b in p.blocks:
            if not isinstance(b, ast.Block):
                continue
            out[b.name.span.offset] = context.BLOCK
            items(b.items)
    return out


SEMICOLON_BASES = [
    'import "std/base"\nversion 1\npolicy tuned extends base {\n'
    '    cache { capacity = 8  eviction = lru }\n    adapt {\n'
    '        when hit_rate < 0.5 for 100 accesses { cache.capacity = 16  trigger memory_pressure }\n'
    '    }\n}\npolicy other extends tuned { cache { ttl = 5 } }\n',
    "policy a { cache { capacity = 12GiB ; eviction = lfu } prefetch { lookahead = [1, 2] } }\n"
    "policy b extends a { }\n",
    # each '{' on the line after its header, and nested items
    "policy c\n{\n    cache\n    {\n        capacity = 8\n    }\n    hierarchy\n    {\n"
    "        tier hot\n        { capacity = 4 }\n        on demote(hot -> warm)\n"
    "        { mechanism = copy }\n    }\n    adapt {\n        when hit_rate < 0.4 for 100 accesses\n"
    "        { eviction = lru }\n    }\n}\n",
]


@pytest.mark.parametrize("base", SEMICOLON_BASES)
def test_a_semicolon_anywhere_gives_names_the_parsers_roles(base):
    """A ';' put at every token boundary in turn (a separator there, a ',' or nothing, as the
    parser reads it): every name the parser places keeps the role the server gives it."""
    cuts = sorted({t.start for t in tokenize(base)} | {t.end for t in tokenize(base)})
    for cut in cuts:
        for semicolon in (";", " ; "):
            text = base[:cut] + semicolon + base[cut:]
            toks = tokenize(text)
            roles = {t.start: i.role for t, i in zip(toks, context.classify(toks))}
            want = _parsed_roles(text)
            assert {o: roles.get(o) for o in want} == want, text


def test_the_tokens_say_how_the_parser_reads_each_semicolon():
    text = "policy p ; { cache { a = 1 ; b = [1 ; 2] ; c = gpu:1 ; gpu:2 ; } }"
    kinds = [t.kind for t in tokenize(text) if t.text == ";"]
    # dropped after a name before '{'; a separator; a ',' in a list; a separator; dropped
    # before a device (one value, not the start of an item); a separator before '}'
    assert kinds == [STRAY, "punct", AS_COMMA, "punct", STRAY, "punct"]


# ------------------------------------------------------------------ a policy without its '{'
NO_BRACE = """policy p
  cache { capacity = 8 }
}
"""


@pytest.mark.asyncio(loop_scope="module")
async def test_a_policy_without_its_brace_is_read_from_its_first_block(client):
    """``policy p`` with its body on the next line and no '{': one error, the parser's, where
    the brace is missing; outline, hover, completion and semantic tokens read the block as
    the parser does (inside the policy), as if the brace were there."""
    uri = open_doc(client, "no_brace.moe", NO_BRACE)
    enc = client.encoding
    diags = await diagnostics(client, uri)
    assert [(d.code, d.message) for d in diags] == [
        ("MPL002", "expected '{' after policy 'p', found name 'cache'")]
    assert diags[0].range.start == pos_of(NO_BRACE, "cache", enc)
    syms = await client.text_document_document_symbol_async(types.DocumentSymbolParams(text_document=tdi(uri)))
    assert [(s.name, [(c.name, [g.name for g in c.children]) for c in s.children]) for s in syms] == [
        ("p", [("cache", ["capacity"])])]
    assert "cache.capacity" in await hover(client, uri, NO_BRACE, "capacity")
    assert "block" in await hover(client, uri, NO_BRACE, "cache")
    labels, _ = await labels_at(client, uri, NO_BRACE, NO_BRACE.index("capacity"))
    assert "eviction" in labels and "adapt" not in labels        # the parameters of cache
    labels, _ = await labels_at(client, uri, NO_BRACE, NO_BRACE.index("}\n}") + 1)
    assert "adapt" in labels and not labels & {"cache", "policy"}  # the blocks of a policy
    got = await _semantic_lines(client, uri, NO_BRACE)
    assert got[1] == [("cache", "namespace"), ("capacity", "parameter"), ("=", "operator"), ("8", "number")]
    no_internal_errors(client)


@pytest.mark.parametrize("text", [
    NO_BRACE,
    "policy p cache { capacity = 8 } }",
    "policy p # c\n  cache { capacity = 8 }\n  prefetch { lookahead = 2 }\n",
    "policy p extends base\n  cache { capacity = 8 }\n  adapt { when hit_rate < 0.5 { cache.capacity = 4 } }\n}\n"
    "policy q { cache { ttl = 1 } }\n",
    "policy p 5\n  cache { capacity = 8 }\n}\n",          # not a complete header: no body
])
def test_a_policy_without_its_brace_gives_names_the_parsers_roles(text):
    toks = tokenize(text)
    whole = context.classify(toks)
    roles = {t.start: i.role for t, i in zip(toks, whole)}
    want = _parsed_roles(text)
    assert {o: roles.get(o) for o in want} == want
    for c in context.checkpoints(toks):
        assert context.Scanner(toks, c).run().infos == whole[c:], c


def test_a_policy_without_its_brace_ends_at_its_closing_brace():
    toks = tokenize(NO_BRACE)
    name = next(i for i, t in enumerate(toks) if t.text == "p")
    assert context.frame_end(toks, name) == len(toks) - 1
    assert context.blocks_in(toks, name) == {"cache"}
    ctx = context.context_at(NO_BRACE, NO_BRACE.index("}\n}") + 1)
    assert (ctx.kind, ctx.policy, ctx.policy_open) == ("block_name", "p", name)


# ------------------------------------------------------------------ a '{' on the next line
CORPUS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "corpus")
BALANCED = open(os.path.join(CORPUS, "balanced.moe"), encoding="utf-8").read()

NEXT_LINE = """policy p {
    prefetch
    {
        strategy = history
    }
    hierarchy {
        tier hot
        {
            location = gpu  capacity = 8
        }
        tier warm { location = cpu }
        on promote(warm -> hot)
        { trigger_threshold = 0.5 }
    }
}
"""


@pytest.mark.asyncio(loop_scope="module")
async def test_a_rule_with_its_brace_on_the_next_line_has_its_actions(client):
    """balanced.moe (a valid file) puts a rule's '{' on the line after its condition: the
    actions are the rule's, for hover, completion and semantic tokens, as the parser reads
    them."""
    uri = open_doc(client, "balanced.moe", BALANCED)
    assert await diagnostics(client, uri) == []
    assert "cache.eviction" in await hover(client, uri, BALANCED, "eviction = lru")
    labels, _ = await labels_at(client, uri, BALANCED, BALANCED.index("eviction = lru"))
    assert {"cache.capacity", "prefetch.budget"} <= labels      # the targets of an action
    assert "when" not in labels
    got = await _semantic_lines(client, uri, BALANCED)
    line = BALANCED[:BALANCED.index("eviction = lru")].count("\n")
    assert got[line] == [("eviction", "parameter"), ("=", "operator"), ("lru", "enumMember")]
    no_internal_errors(client)


@pytest.mark.asyncio(loop_scope="module")
async def test_blocks_and_nested_items_with_their_brace_on_the_next_line(client):
    """A block's, a tier's and a transition's '{' on the next line open them, as the parser
    reads them (no error): hover, completion and semantic tokens see their parameters."""
    uri = open_doc(client, "next_line.moe", NEXT_LINE)
    assert await diagnostics(client, uri) == []
    assert "prefetch.strategy" in await hover(client, uri, NEXT_LINE, "strategy")
    assert "location" in await hover(client, uri, NEXT_LINE, "location")
    assert "trigger_threshold" in await hover(client, uri, NEXT_LINE, "trigger_threshold")
    labels, _ = await labels_at(client, uri, NEXT_LINE, NEXT_LINE.index("location"))
    # a tier's parameters, less those written in it
    assert {"dtype", "residency"} <= labels and not labels & {"capacity", "tier"}
    got = await _semantic_lines(client, uri, NEXT_LINE)
    assert got[3] == [("strategy", "parameter"), ("=", "operator"), ("history", "enumMember")]
    assert got[8] == [("location", "parameter"), ("=", "operator"), ("gpu", "enumMember"),
                      ("capacity", "parameter"), ("=", "operator"), ("8", "number")]
    assert got[12][0] == ("trigger_threshold", "parameter")
    no_internal_errors(client)


def _brace_on_next_line(base: str):
    """``base`` with each '{' in turn put on the next line (also after a comment or a stray
    ';'), then with all of them there."""
    braces = [t.start for t in tokenize(base) if t.text == "{"]
    for at in braces:
        for sep in ("\n", "\n  # c\n  ", " ;\n"):
            yield base[:at] + sep + base[at:]
    every = base
    for at in reversed(braces):
        every = every[:at] + "\n" + every[at:]
    yield every


@pytest.mark.parametrize("base", [*SEMICOLON_BASES, *(
    open(os.path.join(CORPUS, f), encoding="utf-8").read() for f in sorted(os.listdir(CORPUS))
    if f.endswith(".moe"))])
def test_a_brace_on_the_next_line_gives_names_the_parsers_roles(base):
    """Every '{' the parser takes on the line after its header (a policy's, a block's, a
    rule's, a nested item's): every name the parser places keeps the role the server gives
    it, also from each checkpoint of the scan."""
    for text in _brace_on_next_line(base):
        toks = tokenize(text)
        whole = context.classify(toks)
        roles = {t.start: i.role for t, i in zip(toks, whole)}
        want = _parsed_roles(text)
        assert {o: roles.get(o) for o in want} == want, text
        for c in context.checkpoints(toks):
            assert context.Scanner(toks, c).run().infos == whole[c:], (c, text)


# ------------------------------------------------------------------ ';' in a header
RUN_IN_HEADER = """policy p {
    adapt {
        when hit_rate ;; < 0.4 { eviction = lfu }
    }
}
"""


@pytest.mark.asyncio(loop_scope="module")
async def test_a_run_of_semicolons_in_a_rule_header_is_read_as_not_there(client):
    """Each ';' of a run inside a condition is one located error with its fix, and the rule
    keeps its condition and its actions (the first ';' is no separator that cuts the
    condition)."""
    uri = open_doc(client, "run_in_header.moe", RUN_IN_HEADER)
    enc = client.encoding
    diags = await diagnostics(client, uri)
    assert [d.code for d in diags] == ["MPL002", "MPL002"]
    first = pos_of(RUN_IN_HEADER, ";;", enc)
    assert [(d.range.start.line, d.range.start.character) for d in diags] == [
        (first.line, first.character), (first.line, first.character + 1)]
    assert all("remove it" in d.message for d in diags)
    assert "cache.eviction" in await hover(client, uri, RUN_IN_HEADER, "eviction")
    got = await _semantic_lines(client, uri, RUN_IN_HEADER)
    assert got[2] == [("when", "keyword"), ("hit_rate", "variable"), ("<", "operator"), ("0.4", "number"),
                      ("eviction", "parameter"), ("=", "operator"), ("lfu", "enumMember")]
    no_internal_errors(client)


@pytest.mark.parametrize("text, readings", [
    ("policy p { adapt { when hit_rate ;; < 0.4 { x = 1 } } }", [STRAY, STRAY]),
    ("policy p ;;; { cache { capacity = 8 } }", [STRAY, STRAY, STRAY]),
    ("policy p { cache { capacity = 8 ;; eviction = lru } }", ["punct", "punct"]),
    ("policy p { cache { pin = [1 ;; 2] } }", [AS_COMMA, STRAY]),
])
def test_a_run_of_semicolons_is_read_by_what_follows_the_run(text, readings):
    assert [t.kind for t in tokenize(text) if t.text == ";"] == readings
    toks = tokenize(text)
    roles = {t.start: i.role for t, i in zip(toks, context.classify(toks))}
    want = _parsed_roles(text)
    assert {o: roles.get(o) for o in want} == want


# ------------------------------------------------------------------ a nested item's kind and a ';'
KIND_THEN_SEMI = """policy p {
    hierarchy {
        tier ; hot { location = gpu }
    }
}
"""


@pytest.mark.asyncio(loop_scope="module")
async def test_a_tier_whose_name_follows_a_semicolon_is_read_as_a_tier(client):
    """``tier ; hot {``: the parser reads a tier with no name (one error, at the ';') whose
    parameters are a tier's; hover, completion and semantic tokens read it so."""
    uri = open_doc(client, "kind_then_semi.moe", KIND_THEN_SEMI)
    diags = await diagnostics(client, uri)
    assert [(d.code, d.range.start) for d in diags] == [
        ("MPL002", pos_of(KIND_THEN_SEMI, ";", client.encoding))]
    assert "tier" in await hover(client, uri, KIND_THEN_SEMI, "location")
    labels, _ = await labels_at(client, uri, KIND_THEN_SEMI, KIND_THEN_SEMI.index("location"))
    assert {"capacity", "dtype"} <= labels and "granularity_split" not in labels
    got = await _semantic_lines(client, uri, KIND_THEN_SEMI)
    assert got[2] == [("tier", "keyword"), ("location", "parameter"), ("=", "operator"), ("gpu", "enumMember")]
    no_internal_errors(client)


@pytest.mark.parametrize("text", [
    KIND_THEN_SEMI,
    "policy p { hierarchy { tier ; ; hot { capacity = 4 } eviction = lru } }",
    "policy p { hierarchy { tier 5 { capacity = 4 } } }",
    "policy p { hierarchy { tier hot ; x { capacity = 4 } } }",
    "policy p { hierarchy { tier hot ;\n capacity = 4 } }",
    "policy p { hierarchy { tier ;\n { capacity = 4 } } }",
])
def test_a_nested_item_with_a_broken_head_gives_names_the_parsers_roles(text):
    toks = tokenize(text)
    roles = {t.start: i.role for t, i in zip(toks, context.classify(toks))}
    want = _parsed_roles(text)
    assert {o: roles.get(o) for o in want} == want


# ------------------------------------------------------------------ what is already written
SET_AFTER_SEMI = """policy p {
    cache ; {
        capacity ; = 8
        eviction # the policy
          = lru

    }

}
"""


@pytest.mark.asyncio(loop_scope="module")
async def test_completion_leaves_out_what_is_set_across_a_stray_semicolon(client):
    """``capacity ; = 8`` sets capacity and ``cache ; {`` is a block, as the parser reads
    them: completion offers neither again."""
    uri = open_doc(client, "set_after_semi.moe", SET_AFTER_SEMI)
    await diagnostics(client, uri)
    labels, _ = await labels_at(client, uri, SET_AFTER_SEMI, SET_AFTER_SEMI.index("\n\n    }") + 1)
    assert "ttl" in labels and not labels & {"capacity", "eviction"}
    labels, _ = await labels_at(client, uri, SET_AFTER_SEMI, SET_AFTER_SEMI.index("\n\n}") + 1)
    assert "prefetch" in labels and "cache" not in labels
    no_internal_errors(client)


# ------------------------------------------------------------------ a rule without its 'when'
NO_WHEN = """policy p {
    cache { capacity = 8 }
    adapt {
        hit_rate < 0.4 for 100 accesses
        { cache.capacity = 16 }
    }
}
"""


@pytest.mark.asyncio(loop_scope="module")
async def test_a_rule_without_its_when_is_read_as_a_rule(client):
    """``hit_rate < 0.4 ...`` then its '{' (here on the next line): the parser reports the
    missing 'when' once and reads a rule; hover, completion and semantic tokens read the
    condition and the actions as a rule's."""
    uri = open_doc(client, "no_when.moe", NO_WHEN)
    diags = await diagnostics(client, uri)
    assert [(d.code, d.range.start) for d in diags] == [
        ("MPL002", pos_of(NO_WHEN, "hit_rate", client.encoding))]
    assert "cache.capacity" in await hover(client, uri, NO_WHEN, "capacity = 16")
    labels, _ = await labels_at(client, uri, NO_WHEN, NO_WHEN.index("cache.capacity = 16"))
    assert {"cache.capacity", "prefetch.budget"} <= labels and "when" not in labels
    got = await _semantic_lines(client, uri, NO_WHEN)
    assert got[3] == [("hit_rate", "variable"), ("<", "operator"), ("0.4", "number"), ("for", "keyword"),
                      ("100", "number"), ("accesses", "type")]
    assert got[4] == [("cache", "namespace"), ("capacity", "parameter"), ("=", "operator"), ("16", "number")]
    no_internal_errors(client)


@pytest.mark.parametrize("text", [
    NO_WHEN,
    "policy p { adapt { hit_rate < 0.4 { cache.capacity = 4 } } }",
    "policy p { adapt { hit_rate < 0.4 # c\n { cache.capacity = 4 } } }",
    "policy p { hierarchy { tier hot { hit_rate < 0.4 { capacity = 4 } } } }",
    "policy p { cache { hit_rate < 0.4 capacity = 4 } }",      # no rule: a parameter
])
def test_a_rule_without_its_when_gives_names_the_parsers_roles(text):
    toks = tokenize(text)
    roles = {t.start: i.role for t, i in zip(toks, context.classify(toks))}
    want = _parsed_roles(text)
    assert {o: roles.get(o) for o in want} == want
