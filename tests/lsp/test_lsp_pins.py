"""Per-layer pins in the editor, end to end over stdio: diagnostics, hover, completion inside
the cache's `pin layers = ...` items, semantic tokens and formatting, on valid and half-typed
documents."""

from __future__ import annotations

import pytest
from lsprotocol import types

from mpl import schema
from mpl.checker import analyze

from lsp_harness import change, client, diagnostics, hover, labels_at, no_internal_errors, open_doc, pos, pos_of, tdi  # noqa: F401

pytestmark = pytest.mark.asyncio(loop_scope="module")

PINS = """policy profiled {
    cache {
        capacity = 64
        pin = [0]
        # hot experts of the first layers
        pin layers = 1..3 {
            experts = [3, 7]
        }
        pin layers = 4 {
            experts = [5]
        }
    }
}
"""


async def test_overlap_is_published_where_the_checker_puts_it(client):
    text = PINS.replace("layers = 4", "layers = 3..4")
    uri = open_doc(client, "pins_diag.moe", text)
    got = await diagnostics(client, uri, predicate=bool)
    want = analyze(text, str(client.root / "pins_diag.moe")).diagnostics
    assert [d.code for d in got] == [d.code for d in want] == ["MPL330"]
    assert got[0].range.start == pos_of(text, "layers = 3..4", client.encoding)
    assert "layer 3 in both" in got[0].message
    no_internal_errors(client)


async def test_hover_pins(client):
    uri = open_doc(client, "pins_hover.moe", PINS)
    await diagnostics(client, uri)
    md = await hover(client, uri, PINS, "pin layers = 1")
    assert schema.SECTIONS["pin"].doc in md
    md = await hover(client, uri, PINS, "experts = [3")
    assert schema.NESTED_PARAMS["pin.experts"].doc in md
    md = await hover(client, uri, PINS, "layers = 1")
    assert schema.NESTED_PARAMS["pin.layers"].doc in md
    md = await hover(client, uri, PINS, "pin = [0]")
    assert schema.PARAMS["cache.pin"].doc in md
    no_internal_errors(client)


async def test_completion_for_pins(client):
    text = "policy p {\n    cache {\n        capacity = 64\n        \n    }\n}\n"
    uri = open_doc(client, "pins_compl.moe", text)
    await diagnostics(client, uri)
    got, items = await labels_at(client, uri, text, text.index("        \n    }") + 8)
    assert {"pin", "eviction"} <= got
    snips = [i for i in items if i.label == "pin" and i.insert_text_format == types.InsertTextFormat.Snippet]
    assert any("layers = " in i.text_edit.new_text and "experts = " in i.text_edit.new_text for i in snips)
    t = text.replace("        \n", "        pin \n")
    change(client, uri, 2, t)
    got, _ = await labels_at(client, uri, t, t.index("pin ") + 4)
    assert "layers" in got
    t = text.replace("        \n", "        pin layers = 2 {\n            \n        }\n")
    change(client, uri, 3, t)
    got, _ = await labels_at(client, uri, t, t.index("            \n") + 12)
    assert got == {"experts"}
    no_internal_errors(client)


async def test_tokens_and_formatting(client):
    uri = open_doc(client, "pins_tok.moe", PINS)
    await diagnostics(client, uri)
    legend = client.init_result.capabilities.semantic_tokens_provider.legend
    res = await client.text_document_semantic_tokens_full_async(types.SemanticTokensParams(text_document=tdi(uri)))
    line = col = 0
    decoded = {}
    lines = PINS.split("\n")
    for i in range(0, len(res.data), 5):
        dl, dc, ln, tt, _ = res.data[i:i + 5]
        line += dl
        col = col + dc if dl == 0 else dc
        decoded.setdefault((line, lines[line][col:col + ln]), legend.token_types[tt])
    assert decoded[(3, "pin")] == "parameter"          # `pin = [0]`: the parameter
    assert decoded[(5, "pin")] == "keyword"            # `pin layers = ...`: an item
    assert decoded[(5, "layers")] == "parameter" and decoded[(5, "..")] == "operator"
    assert decoded[(6, "experts")] == "parameter"
    opts = types.FormattingOptions(tab_size=4, insert_spaces=True)
    messy = PINS.replace("        pin layers = 4 {\n            experts = [5]\n        }\n",
                         "        pin layers = 4 { experts = [5] }   # one more\n")
    messy = messy.replace("        capacity = 64\n", "") .replace("    }\n}", "        capacity = 64\n    }\n}")
    change(client, uri, 2, messy)
    edits = await client.text_document_formatting_async(
        types.DocumentFormattingParams(text_document=tdi(uri), options=opts))
    from mpl.fmt import format_text
    assert edits and format_text(messy) == PINS.replace(
        "            experts = [5]\n        }\n", "            experts = [5]\n        }  # one more\n")
    no_internal_errors(client)


async def test_half_typed_pin_item(client):
    text = "policy p {\n    cache {\n        capacity = 64\n        pin layers = 1.."
    uri = open_doc(client, "pins_half.moe", text)
    got = await diagnostics(client, uri, predicate=bool)
    assert got and all(d.code.startswith("MPL00") for d in got)
    for i, piece in enumerate(["3 {\n            experts = [", "3, 70000", "]\n        }\n    }\n}\n"]):
        text += piece
        change(client, uri, i + 2, text)
        syms = await client.text_document_document_symbol_async(types.DocumentSymbolParams(text_document=tdi(uri)))
        assert syms and syms[0].name == "p"
    got = await diagnostics(client, uri, predicate=lambda ds: any(d.code == "MPL203" for d in ds))
    assert [d.code for d in got] == ["MPL203"]
    no_internal_errors(client)
