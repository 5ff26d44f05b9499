"""The language server on every found case (tests/found_cases.py), over stdio: it publishes
the checker's diagnostics (not an internal error), keeps answering requests on the broken
text, and recovers when the user finishes typing."""

from __future__ import annotations

import pytest
from lsprotocol import types

from mpl.checker import analyze

from found_cases import FOUND
from lsp_harness import change, client, diagnostics, no_internal_errors, open_doc  # noqa: F401

pytestmark = pytest.mark.asyncio(loop_scope="module")

FIXED = "policy demo {\n    cache { capacity = 8  eviction = lru }\n}\n"


@pytest.mark.parametrize("name,text", FOUND, ids=[n for n, _ in FOUND])
async def test_server_stays_up_on_a_found_case(client, name, text):
    uri = open_doc(client, f"found_{name}.moe", text)
    got = await diagnostics(client, uri, predicate=bool)
    want = analyze(text, str(client.root / f"found_{name}.moe")).diagnostics
    assert [d.code for d in got] == [d.code for d in want]
    assert any(d.severity == types.DiagnosticSeverity.Error for d in got)
    doc = types.TextDocumentIdentifier(uri=uri)
    h = await client.text_document_hover_async(types.HoverParams(text_document=doc,
                                                                 position=types.Position(1, 6)))
    assert h is None or h.contents
    syms = await client.text_document_document_symbol_async(types.DocumentSymbolParams(text_document=doc))
    assert syms is not None
    hints = await client.text_document_inlay_hint_async(types.InlayHintParams(
        text_document=doc, range=types.Range(types.Position(0, 0), types.Position(len(text.splitlines()), 0))))
    assert hints is None or all(h.position.line >= 0 for h in hints)
    change(client, uri, 2, FIXED)      # the user finishes typing: the server is still there
    assert await diagnostics(client, uri) == []
    no_internal_errors(client)
