"""The server tells its client where the standard library is (``mpl.status`` → ``stdlib``),
and Go to Definition on a standard-library policy or ``import "std/NAME"`` lands in that
folder: the VS Code extension redirects such locations to a read-only virtual document
(vscode-extension/src/stdlib.ts)."""

from __future__ import annotations

import os

import pytest
from lsprotocol import types

from lsp_harness import client, diagnostics, open_doc, pos_of  # noqa: F401
from mpl.stdlib_path import stdlib_dir

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def test_status_names_the_stdlib_folder_and_definitions_land_in_it(client):
    status = await client.workspace_execute_command_async(types.ExecuteCommandParams(command="mpl.status"))
    assert status["stdlib"] == stdlib_dir() and os.path.isdir(status["stdlib"])
    text = 'import "std/lru_basic"\npolicy mine extends lru_basic { cache { capacity = 8 } }\n'
    uri = open_doc(client, "std_def.moe", text)
    await diagnostics(client, uri)
    td = types.TextDocumentIdentifier(uri=uri)
    for needle in ("lru_basic {", 'std/lru_basic"'):
        got = await client.text_document_definition_async(types.DefinitionParams(
            text_document=td, position=pos_of(text, needle, client.encoding, 2)))
        assert got, needle
        from pygls import uris
        path = uris.to_fs_path(got[0].uri)
        assert os.path.dirname(os.path.realpath(path)) == os.path.realpath(status["stdlib"]), path
        assert os.path.basename(path) == "lru_basic.moe"
