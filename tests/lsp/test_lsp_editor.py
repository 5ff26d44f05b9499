"""What a user meets in a real editor window, over stdio: inlay hints that read as hints
(labelled, within VS Code's per-line length, never between '{' and a parameter of a one-line
block), a refused Format Document that says why, semantic token kinds the VS Code extension
maps to its grammar's scopes, and a quiet log (no warning for a cancel of an answered request)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
from lsprotocol import types

from lsp_harness import REPO, client, diagnostics, no_internal_errors, open_doc, pos, server_env, tdi  # noqa: F401

pytestmark = pytest.mark.asyncio(loop_scope="module")

#: VS Code's editor.inlayHints.maximumLength: the characters of hints it shows on one line
VSCODE_MAX_HINT_CHARS = 43


def label(h) -> str:
    return h.label if isinstance(h.label, str) else "".join(p.value for p in h.label)


async def all_hints(client, uri, text):
    rng = types.Range(types.Position(0, 0), pos(text, len(text), client.encoding))
    return await client.text_document_inlay_hint_async(types.InlayHintParams(text_document=tdi(uri), range=rng))


async def test_one_line_block_hints_follow_the_block_and_fit_the_line(client):
    text = ("policy p {\n"
            "  cache {\n    capacity = 8\n    eviction = lfu\n  }\n"
            "  schedule { mode = hybrid }\n"
            "  prefetch { strategy = history } monitor { window = 100 }\n"
            "}\n")
    uri = open_doc(client, "oneline.moe", text)
    await diagnostics(client, uri)
    hints = await all_hints(client, uri, text)
    lines = text.split("\n")
    per_line: dict[int, int] = {}
    for h in hints:
        lbl = label(h)
        assert lbl.startswith("defaults: "), lbl            # labelled as what it is
        assert h.padding_left
        per_line[h.position.line] = per_line.get(h.position.line, 0) + len(lbl)
        line = lines[h.position.line]
        before = line[:h.position.character]
        # a one-line block's hint comes after its '}', never between '{' and a parameter
        assert before.rstrip().endswith(("{", "}", "8", "lfu")), (line, h.position.character)
        if "{" in line and "}" in line:
            assert before.rstrip().endswith("}"), (line, lbl)
        # cut between entries only: every shown entry is whole ("name = value")
        for part in h.label[1:]:
            v = part.value.strip(", ")
            assert not v or v.startswith("+") or " = " in v, lbl
    # nothing on a line is longer than VS Code shows (it would cut a word)
    assert per_line and max(per_line.values()) <= VSCODE_MAX_HINT_CHARS, per_line
    assert 5 in per_line, "the one-line schedule block got no hint"
    sched = next(h for h in hints if h.position.line == 5)
    assert sched.position.character == lines[5].index("}") + 1
    no_internal_errors(client)


async def test_hints_left_out_are_listed_in_the_tooltip(client):
    text = "policy q {\n  cache { capacity = 8 }\n}\n"
    uri = open_doc(client, "tooltip.moe", text)
    await diagnostics(client, uri)
    (h,) = await all_hints(client, uri, text)
    parts = h.label
    more = [p for p in parts if p.value.lstrip().startswith("+")]
    shown = [p.value for p in parts[1:] if " = " in p.value]
    assert shown and more, label(h)
    n = int(more[0].value.strip().lstrip("+"))
    listed = [ln for ln in more[0].tooltip.value.split("\n") if ln.startswith("- `")]
    assert len(listed) == n
    assert not set(listed) & {f"- `{s}`" for s in shown}


async def test_format_with_syntax_errors_says_why_once(client):
    text = "policy p {\n  cache {\n    capacity = = 8\n  }\n}\n"
    uri = open_doc(client, "broken_fmt.moe", text)
    await diagnostics(client, uri)
    client.messages.clear()
    opts = types.FormattingOptions(tab_size=4, insert_spaces=True)
    params = types.DocumentFormattingParams(text_document=tdi(uri), options=opts)
    assert not await client.text_document_formatting_async(params)
    for _ in range(200):
        if client.messages:
            break
        await asyncio.sleep(0.01)
    (msg,) = client.messages
    assert msg.type == types.MessageType.Warning
    assert "broken_fmt.moe was not formatted" in msg.message and "line 3" in msg.message, msg.message
    # format-on-save asks again on every save: the same error is not repeated
    assert not await client.text_document_formatting_async(params)
    await asyncio.sleep(0.2)
    assert len(client.messages) == 1
    no_internal_errors(client)


async def test_semantic_token_kinds_are_the_extensions_mapped_ones(client):
    """Every (type, modifiers) the server sends has a semanticTokenScopes entry in the VS Code
    extension (else VS Code falls back to its own scopes and the colour changes)."""
    text = ('version 2\nimport "std/lru_basic"\npolicy p extends lru_basic {\n'
            '  cache { capacity = 8GiB ; eviction = lfu }\n  schedule { overlap = true }\n'
            '  monitor { metrics = [hit_rate] }\n  bogus { x = 1 }\n'
            '  adapt { when hit_rate < 0.5 for 10 accesses { cache.capacity = 9 ; trigger flush } }\n}\n# end\n')
    uri = open_doc(client, "kinds.moe", text)
    await diagnostics(client, uri)
    legend = client.init_result.capabilities.semantic_tokens_provider.legend
    res = await client.text_document_semantic_tokens_full_async(types.SemanticTokensParams(text_document=tdi(uri)))
    pkg = json.loads((Path(REPO) / "vscode-extension" / "package.json").read_text())
    scopes = {k for e in pkg["contributes"]["semanticTokenScopes"] if e["language"] == "moe" for k in e["scopes"]}
    sent = set()
    for i in range(0, len(res.data), 5):
        tt, mods = res.data[i + 3], res.data[i + 4]
        names = [m for j, m in enumerate(legend.token_modifiers) if mods >> j & 1 and m != "deprecated"]
        sent.add(".".join([legend.token_types[tt], *names]))
    assert sent <= scopes, sent - scopes
    assert {"parameter", "keyword.declaration", "modifier", "keyword.readonly", "namespace"} <= sent


async def test_cancel_of_an_answered_request_is_not_a_warning():
    """VS Code cancels requests that were already answered; pygls logs each as a warning on
    stderr ("Cancel notification for unknown message id"), which VS Code shows in its log."""
    def frame(obj) -> bytes:
        body = json.dumps(obj).encode()
        return b"Content-Length: %d\r\n\r\n" % len(body) + body
    msgs = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"processId": None, "rootUri": None, "capabilities": {}}},
        {"jsonrpc": "2.0", "method": "initialized", "params": {}},
        {"jsonrpc": "2.0", "id": 2, "method": "workspace/executeCommand",
         "params": {"command": "mpl.status", "arguments": []}},
        {"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 2}},
        {"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 12345}},
        {"jsonrpc": "2.0", "id": 3, "method": "shutdown", "params": None},
        {"jsonrpc": "2.0", "method": "exit", "params": None},
    ]
    proc = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "lsp.server", "--stdio"], input=b"".join(map(frame, msgs)),
        capture_output=True, env=server_env(), cwd=REPO, timeout=120)
    err = proc.stderr.decode(errors="replace")
    assert b'"id": 3' in proc.stdout or b'"id":3' in proc.stdout, proc.stdout[-500:]
    assert "unknown message id" not in err, err
    assert proc.returncode == 0, err
