"""Hover, completion, symbols, folding, semantic tokens, code actions, navigation, inlay
hints and settings, end to end over stdio, on valid, invalid and half-typed documents."""

from __future__ import annotations

import pytest
from lsprotocol import types

from mpl import schema
from mpl.stdlib_path import stdlib_names

from lsp_harness import change, client, diagnostics, hover, no_internal_errors, open_doc, pos, pos_of, tdi, write  # noqa: F401

pytestmark = pytest.mark.asyncio(loop_scope="module")

VALID = """version 2
policy base {
  cache {
    capacity = 8
    eviction = lfu
  }
}

policy child extends base {
  cache {
    capacity = 12
  }
  prefetch {
    strategy = history
    budget = 2
  }
  monitor {
    metrics = [hit_rate, miss_rate]
  }
  adapt {
    when hit_rate < 0.4 for 100 accesses {
      prefetch_budget = 3
    }
  }
}
"""


async def complete(client, uri, text, offset):
    res = await client.text_document_completion_async(types.CompletionParams(
        text_document=tdi(uri), position=pos(text, offset, client.encoding)))
    items = res.items if hasattr(res, "items") else res
    return items


def labels(items):
    return {i.label for i in items}


# ------------------------------------------------------------------ hover
async def test_hover_block_param_enum_metric_unit(client):
    uri = open_doc(client, "hover.moe", VALID)
    await diagnostics(client, uri)
    md = await hover(client, uri, VALID, "cache {")
    assert schema.BLOCKS["cache"].doc in md
    md = await hover(client, uri, VALID, "capacity = 12")
    p = schema.PARAMS["cache.capacity"]
    assert p.doc in md and p.range_text() in md and p.default_text() in md
    assert "Effective value in `child`" in md and "`12`" in md
    # eviction not written in child: hover on the parent's line shows the parent's value
    md = await hover(client, uri, VALID, "eviction = lfu")
    assert "Effective value in `base`" in md and "`lfu`" in md and "set in this policy" in md
    md = await hover(client, uri, VALID, "lfu", 1)
    assert schema.PARAMS["cache.eviction"].enum_value("lfu").doc in md
    md = await hover(client, uri, VALID, "hit_rate <")
    assert schema.METRICS["hit_rate"].doc in md
    md = await hover(client, uri, VALID, "miss_rate]")
    assert schema.METRICS["miss_rate"].doc in md
    md = await hover(client, uri, VALID, "accesses {")
    assert schema.UNITS["accesses"].doc in md
    md = await hover(client, uri, VALID, "prefetch_budget")
    assert "alias of `prefetch.budget`" in md
    md = await hover(client, uri, VALID, "budget = 2")
    assert "Effective value in `child`" in md and "`2`" in md
    assert await hover(client, uri, VALID, "\n\npolicy child", 0) is None
    no_internal_errors(client)


async def test_hover_effective_value_after_extends(client):
    text = ("policy a { cache { capacity = 8\n eviction = lfu } }\n"
            "policy b extends a { cache { pin = [1] }\n adapt { when hit_rate < 0.5 { eviction = lru } } }\n")
    uri = open_doc(client, "hover2.moe", text)
    await diagnostics(client, uri)
    md = await hover(client, uri, text, "pin")
    assert "Effective value in `b`" in md and "[1]" in md and "set in this policy" in md
    # the adapt action's target in b: the value in force before the rule fires is a's
    md = await hover(client, uri, text, "eviction = lru")
    assert "Effective value in `b`" in md and "`lfu`" in md and "inherited from `a`" in md
    md = await hover(client, uri, text, "cache {", 1, nth=1)
    assert schema.BLOCKS["cache"].doc in md


async def test_hover_on_invalid_document(client):
    text = "policy p {\n  cache {\n    capacity = 8\n    eviction = lruu\n"
    uri = open_doc(client, "hover_bad.moe", text)
    await diagnostics(client, uri)
    md = await hover(client, uri, text, "eviction")
    assert schema.PARAMS["cache.eviction"].doc in md
    assert "not available while the value has errors" in md
    md = await hover(client, uri, text, "capacity")
    assert "`8`" in md and "the policy has errors elsewhere" in md


# ------------------------------------------------------------------ completion
async def test_completion_contexts(client):
    text = VALID
    uri = open_doc(client, "compl.moe", text)
    await diagnostics(client, uri)
    # block names at policy level: the ones not yet present
    off = text.index("  prefetch {")
    items = await complete(client, uri, text, off)
    got = labels(items)
    assert {"schedule", "per_layer"} <= got and "cache" not in got and "monitor" not in got
    assert all(i.documentation for i in items)
    # parameter names inside a block, not the ones already set
    off = text.index("    budget = 2") + len("    budget = 2\n")
    got = labels(await complete(client, uri, text, off))
    assert "lookahead" in got and "history_window" in got and "strategy" not in got and "budget" not in got
    # enum values after '='
    off = text.index("strategy = ") + len("strategy = ")
    items = await complete(client, uri, text, off)
    assert labels(items) == set(schema.PARAMS["prefetch.strategy"].enum_names())
    # metric names after when
    off = text.index("when ") + len("when ")
    assert labels(await complete(client, uri, text, off)) == set(schema.METRICS)
    # metric names inside the metrics list
    off = text.index("[hit_rate") + 1
    assert set(schema.METRICS) <= labels(await complete(client, uri, text, off))
    # units after a number in a rule duration
    off = text.index("100 ") + len("100 ")
    assert labels(await complete(client, uri, text, off)) == set(schema.RULE_DURATION_UNITS)
    # adapt action targets inside the rule
    off = text.index("      prefetch_budget")
    got = labels(await complete(client, uri, text, off))
    assert {"capacity", "eviction", "cache.capacity", "trigger", "rebalance"} <= got
    # the original's actions that cannot change at runtime (MPL408) are accepted, not offered
    no_effect = {n for n, k in schema.ADAPT_TARGETS.items() if schema.PARAMS[k].adapt_no_effect}
    assert no_effect and not (no_effect & got)
    # policy names after extends
    off = text.index("extends ") + len("extends ")
    assert "base" in labels(await complete(client, uri, text, off))


async def test_completion_half_typed(client):
    text = "version 2\npolicy p {\n  cache {\n    capacity = 12G"
    uri = open_doc(client, "half.moe", text)
    await diagnostics(client, uri)
    items = await complete(client, uri, text, len(text))
    assert labels(items) == set(schema.PARAMS["cache.capacity"].units)
    it = next(i for i in items if i.label == "GiB")
    assert it.text_edit.range.start == pos(text, len(text) - 1, client.encoding)   # replaces the "G"
    text2 = text + "\n    evic"
    change(client, uri, 2, text2)
    items = await complete(client, uri, text2, len(text2))
    got = labels(items)
    assert "eviction" in got and "capacity" not in got
    text3 = text2 + "tion = l"
    change(client, uri, 3, text3)
    got = labels(await complete(client, uri, text3, len(text3)))
    assert got == set(schema.PARAMS["cache.eviction"].enum_names())
    text4 = text3 + "ru | "
    change(client, uri, 4, text4)
    singles = {e.name for e in schema.PARAMS["cache.eviction"].enum if e.segment}
    # after '|' only the rules a segment can hold (arc | ... would be MPL208)
    assert labels(await complete(client, uri, text4, len(text4))) == singles
    text5 = text4 + "l"
    change(client, uri, 5, text5)
    assert labels(await complete(client, uri, text5, len(text5))) == singles
    text5 = text4 + "lfu\n  }\n  adapt {\n    when miss_rate > 0.5 {\n      trigger "
    change(client, uri, 5, text5)
    assert labels(await complete(client, uri, text5, len(text5))) == set(schema.TRIGGERS)
    text6 = text5 + "flush\n      rebalance "
    change(client, uri, 6, text6)
    assert labels(await complete(client, uri, text6, len(text6))) == set(schema.PARAMS[schema.REBALANCE].enum_names())
    text7 = text6 + "entropy\n    }\n    "
    change(client, uri, 7, text7)
    got = labels(await complete(client, uri, text7, len(text7)))
    assert "when" in got
    text8 = text7 + "when hit_rate "
    change(client, uri, 8, text8)
    items = await complete(client, uri, text8, len(text8))
    assert labels(items) == set(schema.COMPARISON_OPS) and all(i.documentation for i in items)
    text9 = "version 2\npolicy p { cache { capacity = 8 } }\n\n"
    change(client, uri, 9, text9)
    items = await complete(client, uri, text9, len(text9))
    assert {"policy", "import", "version"} <= labels(items)
    assert all(i.documentation for i in items)
    snippets = [i for i in items if i.insert_text_format == types.InsertTextFormat.Snippet]
    assert snippets and any("cache {" in i.text_edit.new_text for i in snippets)
    no_internal_errors(client)


async def test_completion_imports(client):
    write(client, "lib/shared.moe", "policy shared { cache { capacity = 4 } }\n")
    text = 'import "'
    uri = open_doc(client, "imp.moe", text)
    await diagnostics(client, uri)
    got = labels(await complete(client, uri, text, len(text)))
    assert {f"std/{n}" for n in stdlib_names()} <= got
    assert "lib/shared.moe" in got
    text2 = 'import "lib/shared.moe"\npolicy x extends '
    change(client, uri, 2, text2)
    await diagnostics(client, uri)
    assert "shared" in labels(await complete(client, uri, text2, len(text2)))


async def test_block_snippets(client):
    text = "policy p {\n  \n}\n"
    uri = open_doc(client, "snip.moe", text)
    await diagnostics(client, uri)
    items = await complete(client, uri, text, text.index("\n  \n") + 3)
    snip = [i for i in items if i.insert_text_format == types.InsertTextFormat.Snippet]
    names = {i.label for i in snip}
    assert set(schema.BLOCKS) <= names
    cache = next(i for i in snip if i.label == "cache")
    assert "capacity = " in cache.text_edit.new_text


# ------------------------------------------------------------------ outline, folding, tokens
async def test_symbols_and_folding(client):
    uri = open_doc(client, "sym.moe", VALID)
    await diagnostics(client, uri)
    syms = await client.text_document_document_symbol_async(types.DocumentSymbolParams(text_document=tdi(uri)))
    assert [s.name for s in syms] == ["base", "child"]
    child = syms[1]
    assert child.detail == "extends base"
    assert [b.name for b in child.children] == ["cache", "prefetch", "monitor", "adapt"]
    assert [p.name for p in child.children[1].children] == ["strategy", "budget"]
    rule = child.children[3].children[0]
    assert rule.name.startswith("when hit_rate < 0.4") and rule.children[0].name == "prefetch_budget"
    folds = await client.text_document_folding_range_async(types.FoldingRangeParams(text_document=tdi(uri)))
    starts = {f.start_line for f in folds}
    assert {1, 2, 8, 9, 12, 19, 20} <= starts
    # on a half-typed document: still an outline
    bad = "policy p {\n  cache {\n    capacity = \n  prefetch { strategy = history\n"
    uri2 = open_doc(client, "sym_bad.moe", bad)
    await diagnostics(client, uri2)
    syms = await client.text_document_document_symbol_async(types.DocumentSymbolParams(text_document=tdi(uri2)))
    assert syms and syms[0].name == "p"
    no_internal_errors(client)


async def test_semantic_tokens(client):
    text = 'policy p extends q { cache { capacity = 4GiB  # hi\n eviction = lru } adapt { when hit_rate < 0.5 { trigger flush } } }\n'
    uri = open_doc(client, "sem.moe", text)
    await diagnostics(client, uri)
    legend = client.init_result.capabilities.semantic_tokens_provider.legend
    res = await client.text_document_semantic_tokens_full_async(types.SemanticTokensParams(text_document=tdi(uri)))
    data = res.data
    assert len(data) % 5 == 0
    line = col = 0
    decoded = {}
    lines = text.split("\n")
    for i in range(0, len(data), 5):
        dl, dc, ln, tt, _ = data[i:i + 5]
        line += dl
        col = col + dc if dl == 0 else dc
        # map units back to text (all ASCII here)
        decoded[lines[line][col:col + ln]] = legend.token_types[tt]
    assert decoded["policy"] == "keyword" and decoded["p"] == "class" and decoded["q"] == "class"
    assert decoded["cache"] == "namespace" and decoded["capacity"] == "parameter"
    assert decoded["4"] == "number" and decoded["GiB"] == "type" and decoded["lru"] == "enumMember"
    assert decoded["hit_rate"] == "variable" and decoded["# hi"] == "comment" and decoded["flush"] == "event"


# ------------------------------------------------------------------ code actions
async def test_quick_fixes(client):
    text = "policy p {\n  cache {\n    capcity = 8\n    eviction = lruu\n  }\n}\n"
    uri = open_doc(client, "fix.moe", text)
    diags = await diagnostics(client, uri)
    d = next(d for d in diags if d.code == "MPL102")
    acts = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=tdi(uri), range=d.range, context=types.CodeActionContext(diagnostics=[d])))
    assert acts, "a did-you-mean fix"
    a = acts[0]
    assert a.kind == types.CodeActionKind.QuickFix and "capacity" in a.title
    edits = a.edit.changes[uri]
    assert edits[0].new_text == "capacity" and edits[0].range == d.range
    # a range request without diagnostics in the context still finds the fixes there
    d2 = next(d for d in diags if d.code == "MPL202")
    acts = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=tdi(uri), range=d2.range, context=types.CodeActionContext(diagnostics=[])))
    assert any("lru" in x.title for x in acts)


# ------------------------------------------------------------------ navigation
async def test_definition_references_rename_across_files(client):
    lib = "policy shared_base {\n  cache { capacity = 8 }\n}\n"
    user = 'import "nav_lib.moe"\npolicy mine extends shared_base {\n  cache { eviction = lfu }\n}\npolicy again extends mine { }\n'
    luri = open_doc(client, "nav_lib.moe", lib)
    uri = open_doc(client, "nav_user.moe", user)
    other = write(client, "nav_other.moe", 'import "nav_lib.moe"\npolicy o extends shared_base { }\n')
    client.workspace_did_change_watched_files(types.DidChangeWatchedFilesParams(
        changes=[types.FileEvent(uri=other.as_uri(), type=types.FileChangeType.Created)]))
    await diagnostics(client, uri)
    at = pos_of(user, "shared_base", client.encoding, 2)
    locs = await client.text_document_definition_async(types.DefinitionParams(text_document=tdi(uri), position=at))
    assert len(locs) == 1 and locs[0].uri == luri
    assert locs[0].range.start == pos_of(lib, "shared_base", client.encoding)
    refs = await client.text_document_references_async(types.ReferenceParams(
        text_document=tdi(uri), position=at, context=types.ReferenceContext(include_declaration=True)))
    where = sorted((r.uri.rsplit("/", 1)[1], r.range.start.line) for r in refs)
    assert where == [("nav_lib.moe", 0), ("nav_other.moe", 1), ("nav_user.moe", 1)]
    # same-file extends
    at2 = pos_of(user, "mine", client.encoding, 1, nth=1)
    locs = await client.text_document_definition_async(types.DefinitionParams(text_document=tdi(uri), position=at2))
    assert locs[0].uri == uri and locs[0].range.start == pos_of(user, "mine", client.encoding)
    # on the import string: the imported file
    at3 = pos_of(user, "nav_lib.moe", client.encoding, 2)
    locs = await client.text_document_definition_async(types.DefinitionParams(text_document=tdi(uri), position=at3))
    assert [x.uri for x in locs] == [luri]
    prep = await client.text_document_prepare_rename_async(types.PrepareRenameParams(text_document=tdi(uri), position=at))
    assert prep is not None
    edit = await client.text_document_rename_async(types.RenameParams(text_document=tdi(uri), position=at, new_name="common"))
    files = {u.rsplit("/", 1)[1]: e for u, e in edit.changes.items()}
    assert set(files) == {"nav_lib.moe", "nav_user.moe", "nav_other.moe"}
    assert all(e.new_text == "common" for es in files.values() for e in es)
    with pytest.raises(Exception):
        await client.text_document_rename_async(types.RenameParams(text_document=tdi(uri), position=at, new_name="9 bad"))
    # a keyword names a policy (after 'policy' and 'extends'), as the parser reads it
    edit = await client.text_document_rename_async(types.RenameParams(text_document=tdi(uri), position=at, new_name="when"))
    assert {e.new_text for es in edit.changes.values() for e in es} == {"when"}
    no_internal_errors(client)


# ------------------------------------------------------------------ inlay hints and settings
async def test_inlay_hints_defaults_and_per_layer(client):
    text = "policy p {\n  cache {\n    capacity = 8\n    eviction = lfu\n  }\n  per_layer {\n    allocation = uniform\n  }\n}\n"
    uri = open_doc(client, "hints.moe", text)
    await diagnostics(client, uri)
    rng = types.Range(types.Position(0, 0), pos(text, len(text), client.encoding))
    hints = await client.text_document_inlay_hint_async(types.InlayHintParams(text_document=tdi(uri), range=rng))

    def label(h):
        return h.label if isinstance(h.label, str) else "".join(p.value for p in h.label)

    def shown_and_hidden(h):
        """The label's text plus the entries its `+N` part's tooltip lists."""
        extra = [p.tooltip.value for p in h.label if not isinstance(h.label, str) and p.value.lstrip().startswith("+")]
        return label(h) + "\n".join(extra)
    labels_ = [label(h) for h in hints]
    assert all(lbl.startswith("defaults: ") and len(lbl) <= 40 for lbl in labels_), labels_
    cache_hint = next(shown_and_hidden(h) for h in hints if h.position.line == 1)
    assert "frequency_decay = 0.95" in cache_hint and "decay_interval = 100" in cache_hint
    assert "freq_threshold" not in cache_hint        # no effect with lfu: not shown
    assert not any("layers" in lbl for lbl in labels_)   # no model yet
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"mpl": {"model": "deepseek-v2-lite"}}))
    await diagnostics(client, uri)   # re-published after the model changed
    hints = await client.text_document_inlay_hint_async(types.InlayHintParams(text_document=tdi(uri), range=rng))
    layer = [h for h in hints if "layers" in label(h)]
    assert [label(h) for h in layer] == ["26 layers × 8 slots = 208"]
    assert "deepseek-v2-lite" in layer[0].tooltip.value
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"mpl": {"model": None, "inlayHints": {"defaults": False, "perLayer": False}}}))
    hints = await client.text_document_inlay_hint_async(types.InlayHintParams(text_document=tdi(uri), range=rng))
    assert not hints
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"mpl": {"inlayHints": {"defaults": True, "perLayer": True}}}))


async def test_model_aware_diagnostics_and_bad_settings(client):
    text = "policy p {\n  cache {\n    capacity = 8\n    pin = [70]\n  }\n}\n"
    uri = open_doc(client, "model.moe", text)
    assert "MPL501" not in [d.code for d in await diagnostics(client, uri)]
    client.diagnostics.pop(uri, None)
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"mpl": {"model": "olmoe"}}))
    got = await diagnostics(client, uri, predicate=lambda d: any(x.code == "MPL501" for x in d))
    assert "MPL501" in [d.code for d in got]
    # bad settings: warnings in the log, the server keeps working
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"mpl": {"model": "no-such-model", "debounceMs": "soon", "colour": 1}}))
    status = await client.workspace_execute_command_async(types.ExecuteCommandParams(command="mpl.status"))
    assert status["model"] is None and status["settings"]["debounceMs"] == 0
    msgs = "\n".join(m.message for m in client.log_messages)
    assert "unknown model 'no-such-model'" in msgs and "debounceMs" in msgs and "colour" in msgs
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"mpl": {"model": None}}))
    no_internal_errors(client)


# ------------------------------------------------------------------ formatting
def _apply_edits(text: str, edits, enc: str) -> str:
    from lsp.positions import LineIndex
    idx = LineIndex(text, enc)
    spans = sorted(((idx.offset(e.range.start), idx.offset(e.range.end), e.new_text) for e in edits), reverse=True)
    for s, e, new in spans:
        text = text[:s] + new + text[e:]
    return text


async def test_formatting(client):
    fmt = pytest.importorskip("mpl.fmt")
    messy = "# keep me ☕\npolicy   p{cache{capacity=8 ; eviction=lfu}   prefetch{strategy=history}}\n"
    uri = open_doc(client, "fmt.moe", messy)
    await diagnostics(client, uri)
    opts = types.FormattingOptions(tab_size=4, insert_spaces=True)
    edits = await client.text_document_formatting_async(types.DocumentFormattingParams(text_document=tdi(uri), options=opts))
    assert edits
    assert _apply_edits(messy, edits, client.encoding) == fmt.format_text(messy)
    # a formatted file gets no edit; a file with syntax errors gets none either
    change(client, uri, 2, fmt.format_text(messy))
    assert not await client.text_document_formatting_async(types.DocumentFormattingParams(text_document=tdi(uri), options=opts))
    change(client, uri, 3, "policy p { cache { capacity = = 8 }\n")
    assert not await client.text_document_formatting_async(types.DocumentFormattingParams(text_document=tdi(uri), options=opts))
    no_internal_errors(client)


async def test_mplc_lsp_is_the_same_server(client):
    """`mplc lsp` starts the same server: initialize it over raw stdio and ask for a hover."""
    import asyncio
    import json
    import sys

    from lsp_harness import REPO, server_env
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "mpl.cli.main", "lsp", "--stdio", cwd=REPO, env=server_env(),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)

    def send(obj):
        body = json.dumps(obj).encode()
        proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    async def read_message():
        headers = {}
        while True:
            line = (await proc.stdout.readline()).decode().strip()
            if not line:
                break
            k, v = line.split(":", 1)
            headers[k.lower()] = v.strip()
        return json.loads(await proc.stdout.readexactly(int(headers["content-length"])))

    async def response(id_):
        while True:
            m = await asyncio.wait_for(read_message(), 30)
            if m.get("id") == id_ and "method" not in m:
                return m

    send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"processId": None, "rootUri": None, "capabilities": {}}})
    init = await response(1)
    assert init["result"]["serverInfo"]["name"] == "mpl-lsp"
    send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
    send({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {
        "uri": "file:///tmp/mplc_lsp_probe.moe", "languageId": "moe", "version": 1,
        "text": "policy p { cache { capacity = 8 } }\n"}}})
    send({"jsonrpc": "2.0", "id": 2, "method": "textDocument/hover", "params": {
        "textDocument": {"uri": "file:///tmp/mplc_lsp_probe.moe"}, "position": {"line": 0, "character": 20}}})
    hov = await response(2)
    assert schema.PARAMS["cache.capacity"].doc in hov["result"]["contents"]["value"]
    send({"jsonrpc": "2.0", "id": 3, "method": "shutdown", "params": None})
    await response(3)
    send({"jsonrpc": "2.0", "method": "exit", "params": None})
    assert await asyncio.wait_for(proc.wait(), 30) == 0


async def test_configuration_pulled_when_settings_are_null(client):
    if not client.capabilities.workspace or not client.capabilities.workspace.configuration:
        pytest.skip(f"{client.client_name} does not announce workspace/configuration")
    client.set_configuration({"model": "qwen3-moe", "debounceMs": 0}, section="mpl")
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
    import asyncio
    for _ in range(200):
        status = await client.workspace_execute_command_async(types.ExecuteCommandParams(command="mpl.status"))
        if status["model"]:
            break
        await asyncio.sleep(0.05)
    assert status["model"]["name"] == "qwen3-30b-a3b" and status["model"]["experts"] == 128
    client.set_configuration({"model": None, "debounceMs": 0}, section="mpl")
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))


async def raw_request(client, method: str, params):
    """Send a request exactly as given (no client-side type checking); the future resolves
    with the response's result or raises with its error."""
    import asyncio
    import uuid
    msg_id = f"raw-{uuid.uuid4()}"
    fut = __import__("concurrent.futures").futures.Future()
    client.protocol._request_futures[msg_id] = fut
    client.protocol._result_types[msg_id] = None
    client.protocol._send_data({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
    return await asyncio.wait_for(asyncio.wrap_future(fut), 30)


async def test_bad_requests_get_answers(client):
    """Requests for unknown documents, past-the-end positions and malformed params: the
    server answers each (a result or an error response) and keeps working."""
    ghost = (client.root / "never_opened.moe").as_uri()
    far = types.Position(10_000, 10_000)
    assert await client.text_document_hover_async(types.HoverParams(text_document=tdi(ghost), position=far)) is None
    res = await client.text_document_completion_async(types.CompletionParams(text_document=tdi(ghost), position=far))
    assert not getattr(res, "items", res)
    assert await client.text_document_document_symbol_async(types.DocumentSymbolParams(text_document=tdi(ghost))) == []
    text = "policy p { cache { capacity = 8 } }\n"
    uri = open_doc(client, "bad_req.moe", text)
    await diagnostics(client, uri)
    assert await client.text_document_hover_async(types.HoverParams(text_document=tdi(uri), position=far)) is None
    await client.text_document_completion_async(types.CompletionParams(text_document=tdi(uri), position=far))
    with pytest.raises(Exception, match="(?i)invalid|error"):
        await raw_request(client, "textDocument/hover", {"textDocument": 3, "position": "x"})
    with pytest.raises(Exception, match="no.such.command"):
        await raw_request(client, "workspace/executeCommand", {"command": "no.such.command"})
    # a change to a document that was never opened is taken from the disk file
    write(client, "late.moe", "policy late { cache { capacity = 0 } }\n")
    late = (client.root / "late.moe").as_uri()
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=late, version=3),
        content_changes=[types.TextDocumentContentChangePartial(
            range=types.Range(types.Position(0, 0), types.Position(0, 0)), text="# hi\n")]))
    got = await diagnostics(client, late)
    assert [d.code for d in got] == ["MPL203"] and got[0].range.start.line == 1
    status = await client.workspace_execute_command_async(types.ExecuteCommandParams(command="mpl.status"))
    assert status["version"]
    no_internal_errors(client)


async def test_half_typed_navigation_tokens_hints(client):
    text = ("policy base { cache { capacity = 8 } }\n"
            "policy kid extends base {\n  cache {\n    eviction = lf\n  per_layer { allocation = \n")
    uri = open_doc(client, "half_nav.moe", text)
    got = await diagnostics(client, uri)
    assert got and all(d.source == "mpl" for d in got)
    at = pos_of(text, "base", client.encoding, 1, nth=1)
    locs = await client.text_document_definition_async(types.DefinitionParams(text_document=tdi(uri), position=at))
    assert [x.range.start for x in locs] == [pos_of(text, "base", client.encoding)]
    refs = await client.text_document_references_async(types.ReferenceParams(
        text_document=tdi(uri), position=at, context=types.ReferenceContext(include_declaration=True)))
    assert len(refs) == 2
    legend = client.init_result.capabilities.semantic_tokens_provider.legend
    data = (await client.text_document_semantic_tokens_full_async(
        types.SemanticTokensParams(text_document=tdi(uri)))).data
    kinds = [legend.token_types[data[i + 3]] for i in range(0, len(data), 5)]
    assert kinds.count("namespace") == 3 and "parameter" in kinds and "class" in kinds
    whole = types.Range(types.Position(0, 0), pos(text, len(text), client.encoding))
    hints = await client.text_document_inlay_hint_async(types.InlayHintParams(text_document=tdi(uri), range=whole))
    assert hints   # defaults still shown (from the schema) although `kid` has errors
    edits = await client.text_document_formatting_async(types.DocumentFormattingParams(
        text_document=tdi(uri), options=types.FormattingOptions(tab_size=4, insert_spaces=True)))
    assert not edits
    no_internal_errors(client)
