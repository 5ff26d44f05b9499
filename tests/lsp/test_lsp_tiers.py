"""Memory tiers in the editor, end to end over stdio: diagnostics, hover, completion inside
`tier`, `band` and `on` items, the outline, folding, semantic tokens, quick fixes and
formatting, on valid and half-typed documents."""

from __future__ import annotations

import pytest
from lsprotocol import types

from mpl import schema
from mpl.checker import analyze

from lsp_harness import change, client, diagnostics, hover, labels_at, no_internal_errors, open_doc, pos, pos_of, tdi  # noqa: F401

pytestmark = pytest.mark.asyncio(loop_scope="module")

TIERS = """policy big {
    hierarchy {
        tier hot  { location = gpu   dtype = fp16  capacity = 16 }
        tier ram  { location = cpu   capacity = 24GiB }
        tier ssd  { location = disk  path = "/models/x" }
        on promote(ram -> hot) { trigger_threshold = 0.05 }
        eviction = weighted_sum(lru = 0.5, lfu = 0.5)
    }
    per_layer_hierarchy {
        band layers = 0..7 {
            tier hot { location = gpu  capacity = 4 }
            eviction = lru
        }
    }
}
"""


async def test_diagnostics_are_the_checkers(client):
    text = TIERS.replace("promote(ram -> hot)", "promote(rma -> hot)")
    uri = open_doc(client, "tiers_diag.moe", text)
    got = await diagnostics(client, uri, predicate=bool)
    want = analyze(text, str(client.root / "tiers_diag.moe")).diagnostics
    assert [d.code for d in got] == [d.code for d in want] == ["MPL119"]
    d = got[0]
    assert d.range.start == pos_of(text, "rma", client.encoding)
    acts = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=tdi(uri), range=d.range, context=types.CodeActionContext(diagnostics=[d])))
    assert acts and acts[0].edit.changes[uri][0].new_text == "ram"
    no_internal_errors(client)


async def test_hover_tiers(client):
    uri = open_doc(client, "tiers_hover.moe", TIERS)
    await diagnostics(client, uri)
    md = await hover(client, uri, TIERS, "tier hot")
    assert schema.SECTIONS["tier"].doc in md and "`location`" in md
    md = await hover(client, uri, TIERS, "location = gpu ")
    assert schema.NESTED_PARAMS["tier.location"].doc in md and "gpu:N" in md
    md = await hover(client, uri, TIERS, "hot  {", 1)          # the tier's name: as it takes effect
    assert "tier 1 of 3 in the hierarchy" in md and "16 slots" in md and "fp16" in md
    md = await hover(client, uri, TIERS, "hot {", 1)           # inside band 0..7: the band's tier
    assert "band 0..7" in md and "4 slots" in md
    md = await hover(client, uri, TIERS, "ram -> hot", 1)       # a tier named by a transition
    assert "tier ram" in md and "24GiB" in md
    md = await hover(client, uri, TIERS, "promote")
    assert schema.SECTIONS["on"].event("promote").doc in md
    md = await hover(client, uri, TIERS, "weighted_sum")
    assert schema.WEIGHTED_SUM_DOC in md
    md = await hover(client, uri, TIERS, "layers")
    assert schema.NESTED_PARAMS["band.layers"].doc in md
    md = await hover(client, uri, TIERS, "hierarchy {")
    assert schema.BLOCKS["hierarchy"].doc in md and "tier NAME" in md
    md = await hover(client, uri, TIERS, "big")                 # the policy: its tiers and bands
    assert "tiers: `hot`, `ram`, `ssd`" in md and "bands: `0..7`" in md
    no_internal_errors(client)


async def test_completion_inside_tiers(client):
    text = ("policy p {\n    hierarchy {\n        tier hot {\n            location = gpu  capacity = 8\n"
            "            \n        }\n        tier ram { location = cpu }\n        \n    }\n}\n")
    uri = open_doc(client, "tiers_compl.moe", text)
    await diagnostics(client, uri)
    # in a hierarchy: its items and its parameters
    got, items = await labels_at(client, uri, text, text.index("        \n    }") + 8)
    assert {"tier", "on", "eviction", "granularity_split"} <= got
    snip = next(i for i in items if i.label == "tier" and i.insert_text_format == types.InsertTextFormat.Snippet)
    assert "location = " in snip.text_edit.new_text and "capacity = " in snip.text_edit.new_text
    # in a tier: its parameters, not the ones set
    off = text.index("            \n") + 12
    got, _ = await labels_at(client, uri, text, off)
    assert {"dtype", "residency", "path", "dtype_ladder"} <= got and not {"location", "capacity"} & got
    # values of location, dtype, mechanism, eviction (with weighted_sum)
    steps = [("on ", set(e.name for e in schema.SECTIONS["on"].events)),
             ("on promote(", {"hot", "ram"}),
             ("on promote(ram -> ", {"hot", "ram"})]
    base = text.replace("        \n    }", "        {}\n    }")
    for typed, want in steps:
        t = base.replace("        {}\n", "        " + typed + "\n")
        change(client, uri, 2, t)
        got, _ = await labels_at(client, uri, t, t.index("        " + typed) + 8 + len(typed))
        assert want <= got, (typed, got)
    for typed, key in (("tier x { location = ", "tier.location"), ("tier x { dtype = ", "tier.dtype"),
                       ("on demote(hot -> ram) { mechanism = ", "on.mechanism")):
        t = base.replace("        {}\n", "        " + typed + "\n")
        change(client, uri, 3, t)
        got, _ = await labels_at(client, uri, t, t.index("        " + typed) + 8 + len(typed))
        assert set(schema.NESTED_PARAMS[key].enum_names()) <= got, (typed, got)
    t = base.replace("        {}\n", "        eviction = \n")
    change(client, uri, 4, t)
    got, _ = await labels_at(client, uri, t, t.index("eviction = ") + len("eviction = "))
    assert schema.WEIGHTED_SUM in got and "lfu" in got and "belady" not in got
    t = base.replace("        {}\n", "        eviction = weighted_sum(\n")
    change(client, uri, 5, t)
    got, _ = await labels_at(client, uri, t, t.index("sum(") + 4)
    assert got == {e.name for e in schema.NESTED_PARAMS["hierarchy.eviction"].enum if e.segment}
    t = "policy p {\n    per_layer_hierarchy {\n        band \n    }\n}\n"
    change(client, uri, 6, t)
    got, _ = await labels_at(client, uri, t, t.index("band ") + 5)
    assert got == {"layers"}
    no_internal_errors(client)


async def test_outline_folding_and_tokens(client):
    uri = open_doc(client, "tiers_sym.moe", TIERS)
    await diagnostics(client, uri)
    syms = await client.text_document_document_symbol_async(types.DocumentSymbolParams(text_document=tdi(uri)))
    [big] = syms
    hier, bands = big.children
    assert [c.name for c in hier.children] == ["tier hot", "tier ram", "tier ssd", "on promote(ram -> hot)",
                                               "eviction"]
    assert [c.name for c in hier.children[0].children] == ["location", "dtype", "capacity"]
    band = bands.children[0]
    assert band.name == "band layers = 0..7" and [c.name for c in band.children] == ["tier hot", "eviction"]
    folds = await client.text_document_folding_range_async(types.FoldingRangeParams(text_document=tdi(uri)))
    starts = {f.start_line for f in folds}
    assert {0, 1, 8, 9} <= starts         # the policy, both blocks, the band
    legend = client.init_result.capabilities.semantic_tokens_provider.legend
    res = await client.text_document_semantic_tokens_full_async(types.SemanticTokensParams(text_document=tdi(uri)))
    line = col = 0
    decoded = {}
    lines = TIERS.split("\n")
    for i in range(0, len(res.data), 5):
        dl, dc, ln, tt, _ = res.data[i:i + 5]
        line += dl
        col = col + dc if dl == 0 else dc
        decoded.setdefault(lines[line][col:col + ln], legend.token_types[tt])
    assert decoded["hierarchy"] == "namespace" and decoded["tier"] == "keyword" and decoded["on"] == "keyword"
    assert decoded["hot"] == "variable" and decoded["promote"] == "enumMember"
    assert decoded["location"] == "parameter" and decoded["gpu"] == "enumMember"
    assert decoded["weighted_sum"] == "enumMember" and decoded[".."] == "operator" and decoded["->"] == "operator"
    assert decoded["layers"] == "parameter" and decoded["band"] == "keyword"


async def test_formatting_tiers(client):
    uri = open_doc(client, "tiers_fmt.moe", TIERS)
    await diagnostics(client, uri)
    opts = types.FormattingOptions(tab_size=4, insert_spaces=True)
    edits = await client.text_document_formatting_async(
        types.DocumentFormattingParams(text_document=tdi(uri), options=opts))
    assert edits
    from mpl.fmt import format_text
    assert edits[0].new_text == format_text(TIERS) or any("tier hot {\n" in e.new_text for e in edits)


async def test_half_typed_tiers_keep_the_server_answering(client):
    text = "policy p {\n    hierarchy {\n        tier hot {\n            location = "
    uri = open_doc(client, "tiers_half.moe", text)
    got = await diagnostics(client, uri, predicate=bool)
    assert any(d.code == "MPL003" for d in got)
    labels, _ = await labels_at(client, uri, text, len(text))
    assert {"gpu", "cpu", "disk"} <= labels
    for i, piece in enumerate(["gpu\n            capacity = 8\n        }\n        on demote(",
                               "hot -> ", "x) {", "\n        }\n    }\n}\n"]):
        text += piece
        change(client, uri, i + 2, text)
        syms = await client.text_document_document_symbol_async(types.DocumentSymbolParams(text_document=tdi(uri)))
        assert syms and syms[0].name == "p"
    got = await diagnostics(client, uri, predicate=lambda ds: any(d.code == "MPL119" for d in ds))
    assert [d.code for d in got] == ["MPL119"]
    no_internal_errors(client)
