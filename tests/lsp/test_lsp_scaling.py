"""The server's work per request grows linearly with the file, also on files that nest
deeply, stay unclosed or put everything on one long line (each request there took seconds on
a 12 KB file, and every other request queued behind it).

Measured by operation counts, not wall-clock time: the lines of the server's own code
(``lsp/``) that a request executes, for a file and the same file twice as large. A linear
algorithm does about twice the work; one quadratic in the nesting depth or the line length
does nearly four times as much. The checker is run before counting (its scaling is
tests/test_checker_scaling.py's). Over stdio, the answers to a file four times as large come
within a small multiple of the time for the small one, measured in the same run (a quadratic
request takes sixteen times as long)."""

from __future__ import annotations

import asyncio
import os
from types import SimpleNamespace

import pytest

pytest.importorskip("pygls")

from lsprotocol import types  # noqa: E402

import lsp.positions  # noqa: E402
from lsp import (analysis, completion, folding, hover, inlay_hints, navigation,  # noqa: E402
                 semantic_tokens, settings, symbols)
from lsp.workspace import Store  # noqa: E402

from lsp_harness import diagnostics, make_fixture, open_doc, tdi  # noqa: E402
from traced_lines import traced_lines  # noqa: E402

client = make_fixture()

LSP_DIR = os.path.dirname(os.path.abspath(navigation.__file__)) + os.sep

#: files that grow with n (n about the same number of tokens in each)
SHAPES = {
    "braces on one line": lambda n: "policy p " + "{" * n,
    "braces on lines": lambda n: "policy p\n" + "{\n" * n,
    "nested rules": lambda n: "policy p { adapt { " + "when hit_rate < 0.5 { " * (n // 6),
    "unclosed blocks on one line": lambda n: "policy p { " + "cache { " * (n // 2),
    "wide characters on one line": lambda n: "policy p { cache { " + 'x = "é😀" ' * (n // 3),
    "unclosed policies": lambda n: "".join(f"policy p{i} {{ cache {{ capacity = 1\n"
                                           for i in range(n // 8)),
    "policies extending one": lambda n: "policy p { cache { capacity = 8 } }\n" + "".join(
        f"policy q{i} extends p {{ cache {{ capacity = 4 }} }}\n" for i in range(n // 14)),
    # a run of ';' the parser reads as if it were not there
    "stray semicolons": lambda n: "policy p { cache { capacity = " + ";" * n,
    # ... between a parameter's name and its '=' (completion looks past them for what is set)
    "stray semicolons before '='": lambda n: "policy p { cache { capacity " + ";" * n + " = 8\n",
    "rules with their braces on lines": lambda n: "policy p { adapt { " + "when hit_rate < 0.5\n{ " * (n // 6),
}


def _server(text: str):
    """A store holding ``text`` as an open document (checked), and what the features take
    for the server."""
    store = Store()
    doc = store.open("file:///scaling/policy.moe", text, 1)
    analysis.analyze(store, doc)
    return SimpleNamespace(store=store, settings=settings.Settings(), encoding="utf-16"), doc


def _end(doc) -> types.Position:
    return doc.index("utf-16").position(len(doc.text))


def _references(ls, doc) -> None:
    """Definition, references and rename of the name at offset 8 (``p`` in every shape)."""
    f = navigation._from_doc(doc)
    tok = navigation.name_at(f, 8)
    navigation.definition_of(ls, f, tok.text)
    for g, t in navigation.references(ls, f, tok):
        navigation._loc(g, t, ls.encoding)


FEATURES = {
    "semantic tokens": lambda ls, doc: semantic_tokens.encode(doc, ls.encoding),
    "completion": lambda ls, doc: completion.complete(ls, doc, len(doc.text)),
    "hover": lambda ls, doc: hover.hover_markdown(ls, doc, len(doc.text)),
    "references": _references,
    "inlay hints": lambda ls, doc: inlay_hints.inlay_hints(
        ls, doc, types.Range(types.Position(0, 0), _end(doc))),
    "symbols": lambda ls, doc: symbols.document_symbols(ls.store, doc, ls.encoding),
    "folding": lambda ls, doc: folding.folding_ranges(ls.store, doc),
}


def _work(shape: str, feature: str, n: int) -> int:
    ls, doc = _server(SHAPES[shape](n))
    return traced_lines(FEATURES[feature], ls, doc, under=LSP_DIR)[1]


@pytest.mark.parametrize("feature", sorted(FEATURES))
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_work_per_request_is_linear(shape, feature):
    small, large = _work(shape, feature, 600), _work(shape, feature, 1200)
    # linear: ~2x the work for 2x the file (the quadratic scans made it 3.5x and more)
    assert large <= 2.4 * small + 200, (shape, feature, small, large)


def test_a_rename_builds_each_line_index_once(monkeypatch):
    """The locations of many references in one file convert their offsets with one line
    index of that file (one per location made renames of a policy that many extend
    quadratic)."""
    built = []
    real = lsp.positions.line_starts
    monkeypatch.setattr(lsp.positions, "line_starts", lambda text: built.append(1) or real(text))
    ls, doc = _server(SHAPES["policies extending one"](3000))
    doc.index(ls.encoding)
    built.clear()
    _references(ls, doc)
    assert built == []
    navigation._from_doc(doc).index("utf-8")
    assert built == [1]


#: (file of size n, n): the shapes the requests took seconds on, at that size
STDIO_SHAPES = [
    (lambda n: "policy p " + "{" * n, 3000),
    (lambda n: "policy p\n" + "{\n" * n, 3000),
    (lambda n: "policy p { adapt { " + "when hit_rate < 0.5 { " * n, 500),
    (lambda n: "policy p { " + "cache { " * n, 500),
]


def _requests(client, uri: str, end: types.Position):
    """The requests a user's editor sends on a file, as coroutine factories."""
    doc = tdi(uri)
    return {
        "semantic tokens": lambda: client.text_document_semantic_tokens_full_async(
            types.SemanticTokensParams(text_document=doc)),
        "definition": lambda: client.text_document_definition_async(
            types.DefinitionParams(text_document=doc, position=types.Position(0, 8))),
        "completion": lambda: client.text_document_completion_async(
            types.CompletionParams(text_document=doc, position=end)),
        "inlay hints": lambda: client.text_document_inlay_hint_async(types.InlayHintParams(
            text_document=doc, range=types.Range(types.Position(0, 0), end))),
    }


async def _fastest(request) -> float:
    """The fastest of three answers to ``request`` (the least disturbed by other work on
    the machine), in seconds."""
    loop = asyncio.get_running_loop()
    times = []
    for _ in range(3):
        t0 = loop.time()
        await request()
        times.append(loop.time() - t0)
    return min(times)


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize("k", range(len(STDIO_SHAPES)))
async def test_requests_on_nested_files_take_linear_time(client, k):
    make, n = STDIO_SHAPES[k]
    opened = {}
    for size in (n, 4 * n):
        text = make(size)
        uri = open_doc(client, f"nested_{k}_{size}.moe", text)
        await diagnostics(client, uri, timeout=60)      # the check is done: nothing competes
        end = types.Position(text.count("\n"), len(text) - text.rfind("\n") - 1)
        opened[size] = _requests(client, uri, end)
    for name in opened[n]:
        small = await _fastest(opened[n][name])
        large = await _fastest(opened[4 * n][name])
        # linear: about 4x for a file 4x as large (a quadratic request takes 16x)
        assert large <= 8 * small + 0.1, (k, name, small, large)
