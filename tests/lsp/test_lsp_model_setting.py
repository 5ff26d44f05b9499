"""The language server's model setting (``{"mpl": {"model": PATH}}``, from
initializationOptions or workspace/didChangeConfiguration) never stalls the server: a device,
a pipe, a binary or a huge file is refused at once with a message in the log, the model-aware
checks go off, and the server keeps answering. The server runs with its address space
limited to 1 GiB, so an unbounded read fails the test instead of taking the machine's memory."""

from __future__ import annotations

import asyncio
import json
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))     # lsp_harness

pytest.importorskip("pytest_lsp")
pytest.importorskip("pygls")

import pytest_lsp  # noqa: E402
from lsprotocol import types  # noqa: E402
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities  # noqa: E402

from lsp_harness import _client_factory, no_internal_errors, server_env  # noqa: E402

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.lsp,
              pytest.mark.skipif(not os.path.exists("/dev/zero") or not hasattr(os, "mkfifo"),
                                 reason="needs /dev/zero and named pipes")]

# The server, with its address space capped (an unbounded read of /dev/zero raises
# MemoryError or gets the process killed instead of filling the machine's memory).
LIMITED_SERVER = [sys.executable, "-c",
                  "import resource, runpy, sys; "
                  "resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30)); "
                  "sys.argv = ['mpl-lsp', '--stdio']; "
                  "runpy.run_module('lsp.server', run_name='__main__', alter_sys=True)"]


@pytest_lsp.fixture(config=ClientServerConfig(server_command=LIMITED_SERVER, server_env=server_env(),
                                              client_factory=_client_factory),
                    scope="module")
async def client(lsp_client: LanguageClient, tmp_path_factory):
    root = tmp_path_factory.mktemp("ws")
    lsp_client.root = root
    await lsp_client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"), root_uri=root.as_uri(),
        workspace_folders=[types.WorkspaceFolder(uri=root.as_uri(), name="ws")],
        initialization_options={"debounceMs": 0}))
    yield
    await lsp_client.shutdown_session()


async def _set_model(client, model):
    """Send the setting, then ask for the status (answered only once the setting is applied:
    the server handles messages in order); a stalled server fails the wait."""
    client.log_messages.clear()
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"mpl": {"model": model}}))
    status = await asyncio.wait_for(client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="mpl.status")), timeout=30)
    return status, "\n".join(m.message for m in client.log_messages)


VALID_CFG = {"model_type": "mixtral", "num_hidden_layers": 4, "num_local_experts": 6,
             "num_experts_per_tok": 2, "hidden_size": 64, "intermediate_size": 128}


async def test_model_setting_on_dev_zero_is_refused_at_once(client):
    status, log = await _set_model(client, "/dev/zero")
    assert status["model"] is None
    assert "/dev/zero is not a regular file" in log and "model-aware checks are off" in log
    no_internal_errors(client)


async def test_model_setting_on_links_pipes_and_folders_is_refused(client):
    root = client.root
    (root / "zero.json").symlink_to("/dev/zero")
    os.mkfifo(root / "pipe.json")                    # no writer: opening it would wait forever
    (root / "dev").mkdir()
    (root / "dev" / "config.json").symlink_to("/dev/zero")
    for name in ("zero.json", "pipe.json", "dev"):
        status, log = await _set_model(client, str(root / name))
        assert status["model"] is None, name
        assert "is not a regular file" in log, (name, log)
    no_internal_errors(client)


async def test_model_setting_on_binary_or_huge_files_is_refused(client):
    root = client.root
    (root / "bin.json").write_bytes(b'{"a": 1}' + bytes(1 << 20))          # NUL bytes
    (root / "big.json").write_text(json.dumps({**VALID_CFG, "pad": "x" * (5 << 20)}))
    (root / "bom.json").write_text(json.dumps(VALID_CFG), encoding="utf-8-sig")
    status, log = await _set_model(client, str(root / "bin.json"))
    assert status["model"] is None and "bin.json is a binary file" in log, log
    status, log = await _set_model(client, str(root / "big.json"))
    assert status["model"] is None and "big.json is larger than 4 MiB" in log, log
    # and a good config (with a byte-order mark) still works afterwards
    status, log = await _set_model(client, str(root / "bom.json"))
    assert status["model"] is not None, log
    assert (status["model"]["moeLayers"], status["model"]["experts"], status["model"]["topK"]) == (4, 6, 2)
    no_internal_errors(client)
