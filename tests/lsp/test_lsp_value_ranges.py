"""Values beyond the schema's ranges in an editor buffer: the language server publishes the
checker's out-of-range diagnostic (MPL203) with the value and the range, and offers the clamp
as a quick fix, for a parameter, an adapt action's value and a rule's duration."""

from __future__ import annotations

import pytest
from lsprotocol import types

from mpl import schema

from lsp_harness import client, diagnostics, no_internal_errors, open_doc  # noqa: F401

pytestmark = pytest.mark.asyncio(loop_scope="module")

TEXT = """policy p {
    cache { capacity = 8 }
    prefetch {
        strategy = history
        history_window = 4611686018427387904
    }
    monitor { metrics = [hit_rate] }
    adapt {
        when hit_rate < 0.5 for 18446744073709551616 steps { ttl = 1e300 }
    }
}
"""


async def test_out_of_range_values_are_diagnosed_with_a_clamp(client):
    uri = open_doc(client, "ranges.moe", TEXT)
    got = [d for d in await diagnostics(client, uri) if d.code == "MPL203"]
    by_line = {d.range.start.line: d for d in got}
    assert set(by_line) == {4, 8} and len(got) == 3, [(d.range.start.line, d.message) for d in got]
    window = by_line[4]
    top = schema.PARAMS["prefetch.history_window"].max
    assert "4611686018427387904" in window.message and f"[1, {int(top)}]" in window.message
    acts = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), range=window.range,
        context=types.CodeActionContext(diagnostics=[window])))
    clamp = [a for a in acts if a.title.startswith("Clamp")]
    assert clamp and clamp[0].edit.changes[uri][0].new_text == str(int(top))
    rule = [d for d in got if d.range.start.line == 8]
    assert any("duration" in d.message and str(schema.RULE_DURATION_MAX) in d.message for d in rule)
    assert any("'ttl'" in d.message and "1e300" in d.message for d in rule)
    no_internal_errors(client)
