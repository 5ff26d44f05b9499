"""Completion offers each item where it can be typed, once: the file-level snippets
(`policy`, `extends`, `import`, `version`) at the top of a file only — never inside a block,
after `eviction =` or in an adapt rule —, `extends` after a policy's name, and each block
name once at the policy level (a snippet with its required parameters; the name alone where
`NAME {` is already written), and the adapt rule (`when`) once inside `adapt`. The VS Code
extension ships no snippets of its own, so these are all a VS Code user sees."""

from __future__ import annotations

from collections import Counter

import pytest
from lsprotocol import types

from lsp_harness import client, diagnostics, no_internal_errors, open_doc, pos  # noqa: F401
from mpl import schema

pytestmark = pytest.mark.asyncio(loop_scope="module")

FILE_LEVEL = {"policy", "extends", "import", "version"}


async def items_at(client, name: str, text: str, offset: int):
    uri = open_doc(client, name, text)
    await diagnostics(client, uri)
    res = await client.text_document_completion_async(types.CompletionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=pos(text, offset, client.encoding)))
    return res.items if hasattr(res, "items") else res


def counts(items) -> Counter:
    return Counter(i.label for i in items)


async def test_file_level_items_at_the_top_once_each(client):
    text = 'import "std/lru_basic"\npolicy base { cache { capacity = 8 } }\n\n'
    items = await items_at(client, "top.moe", text, len(text))
    c = counts(items)
    assert set(c) == FILE_LEVEL and set(c.values()) == {1}, c
    by = {i.label: i for i in items}
    assert all(i.documentation for i in items)
    assert by["policy"].insert_text_format == types.InsertTextFormat.Snippet
    assert "cache {" in by["policy"].text_edit.new_text
    ext = by["extends"].text_edit.new_text
    assert ext.startswith("policy ${1:name} extends ") and "base" in ext and "lru_basic" in ext
    assert by["import"].text_edit.new_text.startswith('import "')
    assert by["version"].text_edit.new_text.startswith("version ")
    # a prefix being typed at the top: the same list (the client filters)
    text2 = text + "pol"
    assert set(counts(await items_at(client, "top2.moe", text2, len(text2)))) == FILE_LEVEL
    no_internal_errors(client)


@pytest.mark.parametrize("text, cursor", [
    ("policy p {\n    cache {\n        \n    }\n}\n", "        \n"),                   # a parameter
    ("policy p {\n    cache {\n        eviction = \n    }\n}\n", "eviction = "),     # a value
    ("policy p {\n    cache { capacity = 8 }\n    adapt {\n        when hit_rate < 0.5 {\n            \n        }\n    }\n}\n",
     "            \n"),                                                                 # an action
    ("policy p {\n    cache { capacity = 8 }\n    \n}\n", "    \n}"),                   # a block
    ("policy p { cache { capacity = 8 } }\npolicy q extends ", None),                  # a parent
])
async def test_no_file_level_snippet_inside_a_policy(client, text, cursor):
    offset = len(text) if cursor is None else text.index(cursor) + len(cursor.split("\n")[0])
    items = await items_at(client, "inner.moe", text, offset)
    assert items, "no completion at all"
    snippets = {i.label for i in items if i.kind == types.CompletionItemKind.Snippet}
    assert not (snippets & FILE_LEVEL), snippets
    assert not ({i.label for i in items} & {"import", "version", "extends"})


async def test_block_names_once_at_policy_level(client):
    text = "policy p {\n    cache { capacity = 8 }\n    \n}\n"
    items = await items_at(client, "blocks.moe", text, text.index("    \n}") + 4)
    c = counts(items)
    assert set(c) == set(schema.BLOCKS) - {"cache"}, c
    assert set(c.values()) == {1}, c
    snip = {i.label: i for i in items}
    assert snip["prefetch"].insert_text_format == types.InsertTextFormat.Snippet
    assert snip["prefetch"].text_edit.new_text.startswith("prefetch {")


async def test_block_name_before_an_existing_brace_is_the_name_alone(client):
    text = "policy p {\n    cache { capacity = 8 }\n    pref {\n        strategy = history\n    }\n}\n"
    items = await items_at(client, "rename_block.moe", text, text.index("pref {") + 4)
    pre = [i for i in items if i.label == "prefetch"]
    assert len(pre) == 1 and pre[0].text_edit.new_text == "prefetch", pre


async def test_adapt_rule_offered_once(client):
    # inside `adapt { }`, an empty line and a half-typed `wh`: `when` is listed once (the
    # whole rule as a snippet: both clients take snippets), like every other item
    text = "policy p {\n    cache { capacity = 8 }\n    adapt {\n        \n    }\n}\n"
    for name, typed in (("adapt.moe", ""), ("adapt_wh.moe", "wh")):
        t = text.replace("adapt {\n        ", "adapt {\n        " + typed)
        offset = t.index("adapt {\n") + len("adapt {\n        ") + len(typed)
        items = await items_at(client, name, t, offset)
        c = counts(items)
        assert c["when"] == 1 and set(c.values()) == {1}, c
        (when,) = [i for i in items if i.label == "when"]
        assert when.kind == types.CompletionItemKind.Snippet
        assert when.insert_text_format == types.InsertTextFormat.Snippet
        assert when.text_edit.new_text.startswith("when ${1|") and when.documentation
    no_internal_errors(client)


async def test_extends_after_the_policy_name(client):
    text = "policy base { cache { capacity = 8 } }\npolicy child "
    items = await items_at(client, "ext.moe", text, len(text))
    assert [i.label for i in items] == ["extends"]
    assert items[0].text_edit.new_text == "extends "
