"""Robustness: thousands of random edits (insertions, deletions, garbage pastes, unicode,
positions past the end of a line) against one document, with requests in between. The
server must answer every request, never log an exception, and its buffer must stay in sync."""

from __future__ import annotations

import asyncio
import random

import pytest
from lsprotocol import types

from mpl.checker import analyze

from lsp_harness import diagnostics, make_fixture, no_internal_errors, open_doc, pos, units
from parser_helpers import line_starts

pytestmark = pytest.mark.asyncio(loop_scope="module")

client = make_fixture({"debounceMs": 30, "model": "mixtral"})

SEED_TEXT = """version 2
import "std/balanced"
# a policy with every kind of construct
policy p extends balanced {
  cache { capacity = 12GiB ; eviction = lfu | lru ; pin = [0, 1] }
  prefetch { strategy = affinity : history when hit_rate < 0.5 }
  per_layer { allocation = entropy }
  adapt {
    when miss_rate > 0.6 for 50 accesses { capacity = 16 ; trigger flush ; rebalance frequency }
  }
}
"""

GARBAGE = ["{", "}", "[", "]", "=", "|", ":", ";", ",", ".", "\"", "#", "when ", "policy ", "cache {",
           "capacity = ", "12GiB", "-3.5e2", "é", "😀", "ß∂ƒ", "\u200b", "\t", "\n", "\r\n", "  ",
           "extends ", "import \"", "lfu", "hit_rate < ", "@@@", "\\", "0x1F", "per_layer { }",
           "adapt { when", "}}}}", "{{{{", "\ud7ff", "𝔘𝔫𝔦"]


def _line_end(text: str, line: int) -> int:
    """Code-point offset where the content of ``line`` ends (before its line end)."""
    starts = line_starts(text)
    if line + 1 >= len(starts):
        return len(text)
    end = starts[line + 1] - 1
    return end - 1 if text[end] == "\n" and end > starts[line] and text[end - 1] == "\r" else end


def _outside_crlf(text: str, off: int) -> int:
    """``off``, or the offset before the '\r' where ``off`` lies inside a CRLF (no client
    position can)."""
    return off - 1 if 0 < off < len(text) and text[off - 1] == "\r" and text[off] == "\n" else off


def _position_past_end(text: str, rnd: random.Random, enc: str) -> types.Position:
    starts = line_starts(text)
    line = rnd.randrange(len(starts))
    content = text[starts[line]:_line_end(text, line)]
    return types.Position(line=line, character=units(content, enc) + rnd.randint(1, 5))


def _apply(text: str, start: int, end: int, new: str) -> str:
    return text[:start] + new + text[end:]


async def test_random_edits(client):
    rnd = random.Random(20261129)
    enc = client.encoding
    text = SEED_TEXT
    uri = open_doc(client, "fuzz.moe", text)
    await diagnostics(client, uri)
    version = 1
    requests = 0
    n_edits = 2000
    for step in range(n_edits):
        r = rnd.random()
        n = len(text)
        if r < 0.45:                       # insert
            at = rnd.randint(0, n)
            new = rnd.choice(GARBAGE) if rnd.random() < 0.7 else "".join(rnd.choice(GARBAGE) for _ in range(rnd.randint(2, 6)))
            start = end = at
        elif r < 0.8 and n:                # delete
            start = rnd.randint(0, n)
            end = min(n, start + rnd.randint(1, 12))
            new = ""
        elif r < 0.95 and n:               # replace
            start = rnd.randint(0, n)
            end = min(n, start + rnd.randint(0, 8))
            new = rnd.choice(GARBAGE)
        else:                              # an edit at a position past the end of a line
            p = _position_past_end(text, rnd, enc)
            new = rnd.choice(GARBAGE)
            start = end = _line_end(text, p.line)
            rng = types.Range(p, p)
            text = _apply(text, start, end, new)
            version += 1
            client.text_document_did_change(types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                content_changes=[types.TextDocumentContentChangePartial(range=rng, text=new)]))
            continue
        # never split a surrogate pair / CRLF in a way the client could not produce: the
        # mirror works in code points, as the server does, and no position lies inside a CRLF
        start, end = _outside_crlf(text, start), _outside_crlf(text, end)
        rng = types.Range(pos(text, start, enc), pos(text, end, enc))
        text = _apply(text, start, end, new)
        version += 1
        client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[types.TextDocumentContentChangePartial(range=rng, text=new)]))
        if step % 25 == 0:
            off = rnd.randint(0, len(text))
            p = pos(text, off, enc)
            td = types.TextDocumentIdentifier(uri=uri)
            whole = types.Range(types.Position(0, 0), pos(text, len(text), enc))
            results = await asyncio.gather(
                client.text_document_completion_async(types.CompletionParams(text_document=td, position=p)),
                client.text_document_hover_async(types.HoverParams(text_document=td, position=p)),
                client.text_document_document_symbol_async(types.DocumentSymbolParams(text_document=td)),
                client.text_document_semantic_tokens_full_async(types.SemanticTokensParams(text_document=td)),
                client.text_document_folding_range_async(types.FoldingRangeParams(text_document=td)),
                client.text_document_inlay_hint_async(types.InlayHintParams(text_document=td, range=whole)),
                client.text_document_code_action_async(types.CodeActionParams(
                    text_document=td, range=types.Range(p, p), context=types.CodeActionContext(diagnostics=[]))),
                client.text_document_definition_async(types.DefinitionParams(text_document=td, position=p)),
                client.text_document_formatting_async(types.DocumentFormattingParams(
                    text_document=td, options=types.FormattingOptions(tab_size=4, insert_spaces=True))),
            )
            assert results[0] is not None and results[3] is not None
            requests += len(results)
    assert requests >= 500
    # the server's buffer is exactly the client's
    status = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="mpl.status", arguments=[uri]))
    assert status["document"]["text"] == text
    assert status["document"]["version"] == version
    # and its last diagnostics (published for the last version) are the checker's for that text
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 60
    while not any(p.uri == uri and p.version == version for p in client.published):
        assert loop.time() < deadline, "no diagnostics for the last version"
        await asyncio.sleep(0.02)
    final = next(p for p in reversed(client.published) if p.uri == uri and p.version == version).diagnostics
    from mpl.shapes import preset
    want = [d for d in analyze(text.replace("\r\n", "\n"), str(client.root / "fuzz.moe"), model=preset("mixtral")).diagnostics
            if d.file is None or d.file.endswith("fuzz.moe")]
    assert sorted((d.code, d.message) for d in final) == sorted((d.code, d.message) for d in want)
    no_internal_errors(client)
