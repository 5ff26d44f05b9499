"""Diagnostics end to end: the checker's diagnostics, not reworded, with UTF-16/UTF-8
correct ranges, links, related information; incremental edits; parents re-diagnose children."""

from __future__ import annotations

import pytest
from lsprotocol import types

from mpl.checker import analyze, check
from mpl.diagnostics import docs_url

from lsp_harness import change, client, diagnostics, no_internal_errors, open_doc, pos, pos_of, write  # noqa: F401

pytestmark = pytest.mark.asyncio(loop_scope="module")

TYPO = """version 2
# café ☕ and a 🚀 before the typo on the same line
policy p { cache { capacity = 8 }   prefetch { strategy = histry } }  # 🚀 x
"""


async def test_capabilities(client):
    caps = client.init_result.capabilities
    sync = caps.text_document_sync
    assert getattr(sync, "change", sync) == types.TextDocumentSyncKind.Incremental
    assert caps.hover_provider and caps.document_symbol_provider and caps.folding_range_provider
    assert caps.completion_provider and caps.code_action_provider and caps.definition_provider
    assert caps.references_provider and caps.rename_provider and caps.document_formatting_provider
    assert caps.inlay_hint_provider and caps.semantic_tokens_provider.legend.token_types
    assert client.init_result.server_info.name == "mpl-lsp"


async def test_diagnostics_match_checker_with_unicode(client):
    uri = open_doc(client, "typo.moe", TYPO)
    got = await diagnostics(client, uri)
    want = analyze(TYPO, str(client.root / "typo.moe")).diagnostics
    assert [d.message for d in got] == [d.message for d in want]      # never reworded
    assert [d.code for d in got] == [d.code for d in want]
    d = next(d for d in got if d.code == "MPL202")
    assert d.source == "mpl" and d.severity == types.DiagnosticSeverity.Error
    assert d.code_description.href == docs_url("MPL202")
    line = TYPO.splitlines()[2]
    start = TYPO.index("histry")
    assert d.range.start == pos(TYPO, start, client.encoding)
    assert d.range.end == pos(TYPO, start + len("histry"), client.encoding)
    # the 🚀 earlier on another line must not shift anything: same line, ascii prefix
    assert d.range.start.character == line.index("histry")
    no_internal_errors(client)


async def test_unicode_prefix_on_same_line(client):
    # the error after the emoji on the same line: its column differs in UTF-8/16/32
    text = 'import "é😀.moe" policy p { cache { capcity = 4 } }\n'
    uri = open_doc(client, "uni.moe", text)
    got = await diagnostics(client, uri)
    codes = {d.code: d for d in got}
    assert {"MPL108", "MPL102"} <= set(codes)
    d = codes["MPL102"]
    i = text.index("capcity")
    assert d.range.start == pos(text, i, client.encoding)
    assert d.range.end == pos(text, i + len("capcity"), client.encoding)
    expected_char = {"utf-8": i + 1 + 3, "utf-16": i + 1, "utf-32": i}[client.encoding]
    assert d.range.start.character == expected_char   # é: 2 bytes; 😀: 4 bytes / 2 units


async def test_related_information(client):
    text = "policy p {\n  cache {\n    capacity = 8\n    capacity = 9\n  }\n}\n"
    uri = open_doc(client, "dup.moe", text)
    got = await diagnostics(client, uri)
    d = next(d for d in got if d.code == "MPL104")
    assert d.related_information, "duplicate parameter should point at the first definition"
    r = d.related_information[0]
    assert r.location.uri == uri
    assert r.location.range.start == pos_of(text, "capacity", client.encoding)


async def test_incremental_edits(client):
    text = "policy p {\n  cache {\n    capacity = 8\n  }\n}\n"
    uri = open_doc(client, "inc.moe", text)
    assert await diagnostics(client, uri) == []
    # replace "capacity" with "capcity" through a ranged edit
    start = pos_of(text, "capacity", client.encoding)
    end = types.Position(start.line, start.character + len("capacity"))
    change(client, uri, 2, "capcity", types.Range(start, end))
    got = await diagnostics(client, uri)
    assert [d.code for d in got] == ["MPL102"] or "MPL102" in [d.code for d in got]
    assert "did you mean 'capacity'" in next(d for d in got if d.code == "MPL102").message
    # insert a unicode comment before the typo on the same line, then fix the typo
    change(client, uri, 3, "# ü😀 ", types.Range(types.Position(2, 4), types.Position(2, 4)))
    got = await diagnostics(client, uri)
    new_text = "policy p {\n  cache {\n    # ü😀 capcity = 8\n  }\n}\n"
    assert got  # now a commented-out parameter: the cache misses its capacity
    change(client, uri, 4, "", types.Range(types.Position(2, 4), pos(new_text, new_text.index("capcity"), client.encoding)))
    got = await diagnostics(client, uri)
    assert "MPL102" in [d.code for d in got]
    s = pos_of(new_text.replace("# ü😀 ", ""), "capcity", client.encoding)
    change(client, uri, 5, "capacity", types.Range(s, types.Position(s.line, s.character + len("capcity"))))
    assert await diagnostics(client, uri) == []
    no_internal_errors(client)


async def test_full_sync_change_and_save(client):
    uri = open_doc(client, "save.moe", "policy p { cache { capacity = 8 } }\n")
    assert await diagnostics(client, uri) == []
    change(client, uri, 2, "policy p { cache { capacity = 0 } }\n")
    got = await diagnostics(client, uri)
    assert [d.code for d in got] == ["MPL203"]
    client.diagnostics.pop(uri, None)
    client.text_document_did_save(types.DidSaveTextDocumentParams(
        text_document=types.TextDocumentIdentifier(uri=uri), text="policy p { cache { capacity = 2 } }\n"))
    assert await diagnostics(client, uri) == []


async def test_a_save_of_an_unopened_document_does_not_open_it(client):
    """A save that reaches the server for a document it does not hold (closed just before)
    leaves it closed: the file on disk is what the server reads, for that file and for the
    files that import it."""
    disk = write(client, "saved_closed.moe", "policy saved_base { cache { capacity = 8 } }\n")
    uri = disk.as_uri()
    client.text_document_did_save(types.DidSaveTextDocumentParams(
        text_document=types.TextDocumentIdentifier(uri=uri), text="policy elsewhere { }\n"))
    status = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="mpl.status", arguments=[uri]))
    assert uri not in status["documents"] and status["document"] is None
    kid = open_doc(client, "saved_kid.moe", 'import "saved_closed.moe"\npolicy kid extends saved_base { }\n')
    assert await diagnostics(client, kid) == []
    assert uri not in client.diagnostics


async def test_a_binary_buffer_gets_the_diagnostic_of_mplc_check(client):
    """A NUL character makes a file binary for ``mplc check`` (one MPL100 at its start, and
    no other diagnostic); the server says the same of a buffer holding one."""
    text = "policy p {\n  cache { capacity = 8 }\x00\n}\n"
    uri = open_doc(client, "binary.moe", text)
    got = await diagnostics(client, uri)
    want = check(str(client.root / "binary.moe"))
    assert [(d.code, d.message) for d in got] == [(d.code, d.message) for d in want]
    assert want[0].code == "MPL100" and "binary file" in want[0].message
    assert got[0].range == types.Range(types.Position(0, 0), types.Position(0, 0))
    change(client, uri, 2, text.replace("\x00", ""))     # the character removed: a policy again
    assert await diagnostics(client, uri) == []
    no_internal_errors(client)


async def test_parent_edit_rediagnoses_child(client):
    parent = "policy base {\n  cache { capacity = 8 }\n}\n"
    child = 'import "parent.moe"\npolicy kid extends base {\n  cache { eviction = lfu }\n}\n'
    write(client, "parent.moe", parent)
    curi = open_doc(client, "child.moe", child)
    assert await diagnostics(client, curi) == []
    puri = open_doc(client, "parent.moe", parent)
    await diagnostics(client, puri)
    # rename the parent policy in the unsaved buffer: the child must now miss its parent
    client.diagnostics.pop(curi, None)
    change(client, puri, 2, parent.replace("base", "basis"))
    got = await diagnostics(client, curi, predicate=lambda d: len(d) > 0)
    assert "MPL107" in [d.code for d in got]
    # and back
    client.diagnostics.pop(curi, None)
    change(client, puri, 3, parent)
    assert await diagnostics(client, curi, predicate=lambda d: len(d) == 0) == []
    no_internal_errors(client)


async def test_server_is_front_end_only(client):
    status = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="mpl.status", arguments=[]))
    assert status["heavyModules"] == [], status["heavyModules"]
    assert status["positionEncoding"] == client.encoding


async def test_debounce_coalesces_changes(client):
    import asyncio
    text = "policy p { cache { capacity = 8 } }\n"
    uri = open_doc(client, "debounce.moe", text)
    await diagnostics(client, uri)
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"debounceMs": 1000}))
    before = len([p for p in client.published if p.uri == uri])
    for v in range(2, 7):      # five quick edits: one publish, for the last version
        change(client, uri, v, f"policy p {{ cache {{ capacity = {6 - v} }} }}\n")
    got = await diagnostics(client, uri)
    assert [d.code for d in got] == ["MPL203"]      # the last version: capacity = 0
    await asyncio.sleep(1.2)      # nothing more may come
    after = [p for p in client.published if p.uri == uri][before:]
    assert len(after) == 1 and after[0].version == 6
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"debounceMs": 0}))


async def test_crlf_document(client):
    """The checker normalizes CRLF; the ranges must still land on the client's text."""
    text = "policy p {\r\n  cache {\r\n    capcity = 8\r\n  }\r\n}\r\n"
    uri = open_doc(client, "crlf.moe", text)
    got = await diagnostics(client, uri)
    d = next(d for d in got if d.code == "MPL102")
    assert (d.range.start.line, d.range.start.character, d.range.end.character) == (2, 4, 11)
    # an incremental edit after the error keeps the ranges right
    change(client, uri, 2, "# é\r\n", types.Range(types.Position(0, 0), types.Position(0, 0)))
    got = await diagnostics(client, uri)
    d = next(d for d in got if d.code == "MPL102")
    assert (d.range.start.line, d.range.start.character) == (3, 4)
    syms = await client.text_document_document_symbol_async(
        types.DocumentSymbolParams(text_document=types.TextDocumentIdentifier(uri=uri)))
    assert syms[0].selection_range.start == types.Position(1, 7)


async def test_lone_cr_document(client):
    """A lone '\r' ends a line (the LSP specification's line ends): a comment stops there,
    and ranges land on the line the client counts."""
    text = "# note\rpolicy p {\r  cache {\r    capcity = 8\r  }\r}\r"
    uri = open_doc(client, "mac.moe", text)
    got = await diagnostics(client, uri)
    d = next(d for d in got if d.code == "MPL102")
    assert (d.range.start.line, d.range.start.character, d.range.end.character) == (3, 4, 11)
    assert not [d for d in got if d.code == "MPL112"]            # the policy is seen


async def test_untitled_buffer(client):
    uri = "untitled:Untitled-1"
    client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
        uri=uri, language_id="moe", version=1, text="policy p { cache { capacity = 8 eviction = lruu } }\n")))
    got = await diagnostics(client, uri)
    assert [d.code for d in got] == ["MPL202"]
    h = await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(0, 13)))
    assert h is not None and "cache" in h.contents.value
    no_internal_errors(client)


async def test_related_information_in_another_file(client):
    lib = "# the library\npolicy shared { cache { capacity = 8 } }\n"
    write(client, "rel_lib.moe", lib)
    text = 'import "rel_lib.moe"\npolicy shared { cache { capacity = 4 } }\n'
    uri = open_doc(client, "rel_main.moe", text)
    got = await diagnostics(client, uri)
    d = next(d for d in got if d.code == "MPL106")
    r = d.related_information[0]
    assert r.location.uri == (client.root / "rel_lib.moe").as_uri()
    assert r.location.range.start == pos_of(lib, "shared", client.encoding)
    assert r.location.range.end == pos_of(lib, "shared", client.encoding, len("shared"))


async def test_imports_outside_the_workspace_are_refused_until_a_root_allows_them(client):
    # the server checks imports against its workspace folders (and std/) by
    # default; the importRoots setting names other folders
    outside = client.root.parent / f"outside_{client.root.name}"
    outside.mkdir(exist_ok=True)
    (outside / "lib.policy").write_text("policy base { cache { capacity = 8 } }\n")
    text = f'import "std/lru_basic"\nimport "../{outside.name}/lib"\npolicy p extends base {{ }}\n'
    uri = open_doc(client, "roots_main.moe", text)
    got = await diagnostics(client, uri)
    assert [d.code for d in got] == ["MPL100"], [(d.code, d.message) for d in got]
    assert "outside the import roots" in got[0].message and got[0].range.start.line == 1
    client.diagnostics.pop(uri, None)
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"mpl": {"importRoots": [str(client.root), str(outside)]}}))
    assert await diagnostics(client, uri, predicate=lambda d: len(d) == 0) == []
    status = await client.workspace_execute_command_async(types.ExecuteCommandParams(command="mpl.status"))
    assert status["settings"]["importRoots"] == [str(client.root), str(outside)]
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"mpl": {"importRoots": None}}))
    await diagnostics(client, uri, predicate=lambda d: [x.code for x in d] == ["MPL100"])
    no_internal_errors(client)


async def test_a_message_quoting_a_huge_token_is_cut(client):
    # the checker quotes the unknown value; the server must not send it whole (it was 200 kB)
    from mpl.diagnostics import ELLIPSIS, MESSAGE_LIMIT
    big = "x" * 200_000
    text = f"policy p {{ cache {{ capacity = 8 eviction = {big} }} }}\n"
    uri = open_doc(client, "huge_token.moe", text)
    got = await diagnostics(client, uri)
    d = next(d for d in got if d.code == "MPL202")
    assert len(d.message) <= MESSAGE_LIMIT and ELLIPSIS in d.message
    assert d.range.end.character - d.range.start.character == len(big)    # the span stays whole
    no_internal_errors(client)
