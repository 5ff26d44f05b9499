"""pytest-lsp harness: the server runs as a subprocess speaking LSP over stdio; each test
module gets one server per client (VS Code's and Neovim's captured capabilities).

Not a conftest.py and tests/lsp is not a package on purpose: a package named ``lsp`` under
tests/ would shadow the real ``lsp`` package. Test modules import what they need from here."""

from __future__ import annotations

import asyncio
import os
import sys

import pytest

pytest.importorskip("pytest_lsp")
pytest.importorskip("pygls")

import pytest_lsp  # noqa: E402
from lsprotocol import types  # noqa: E402
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities  # noqa: E402

from parser_helpers import line_starts  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SERVER_CMD = [sys.executable, "-m", "lsp.server", "--stdio"]
CLIENTS = ["visual-studio-code", "neovim"]


def server_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _client_factory() -> LanguageClient:
    """pytest-lsp's test client, also recording every publishDiagnostics (to count them).
    ``client.diagnostics`` keeps a document's newest diagnostics only: a publish for a version
    older than the last one :func:`open_doc` or :func:`change` sent (computed before the
    change reached the server, delivered after it) is recorded but does not replace them, as
    an editor drops it."""
    from pygls.protocol import default_converter
    from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features

    c = LanguageClient(converter_factory=default_converter)
    c.published = []
    c.sent_versions = {}

    def publish(ls, params: types.PublishDiagnosticsParams):
        ls.published.append(params)
        sent = ls.sent_versions.get(params.uri)
        if params.version is not None and sent is not None and params.version < sent:
            return
        ls.diagnostics[params.uri] = params.diagnostics

    register_lsp_features(c, {**DEFAULT_CLIENT_FEATURES, types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS: publish})
    return c


def make_fixture(init_options=None, scope="module"):
    """A client fixture (one server per client kind) rooted at a fresh workspace folder;
    the test gets ``client`` with ``client.root`` (a pathlib.Path) and ``client.encoding``."""

    @pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER_CMD, server_env=server_env(),
                                                  client_factory=_client_factory),
                        params=CLIENTS, scope=scope)
    async def client(request, lsp_client: LanguageClient, tmp_path_factory):
        root = tmp_path_factory.mktemp("ws")
        lsp_client.inlay_refreshes = 0

        @lsp_client.feature(types.WORKSPACE_INLAY_HINT_REFRESH)
        def _refresh(ls, params):   # a real client re-requests hints here; count it
            lsp_client.inlay_refreshes += 1
            return None
        lsp_client.root = root
        lsp_client.client_name = request.param
        opts = {"debounceMs": 0} if init_options is None else init_options
        result = await lsp_client.initialize_session(types.InitializeParams(
            capabilities=client_capabilities(request.param),
            root_uri=root.as_uri(),
            workspace_folders=[types.WorkspaceFolder(uri=root.as_uri(), name="ws")],
            initialization_options=opts))
        lsp_client.init_result = result
        enc = result.capabilities.position_encoding
        lsp_client.encoding = str(getattr(enc, "value", enc) or "utf-16")
        yield
        await lsp_client.shutdown_session()

    return client


client = make_fixture()


# ------------------------------------------------------------------ helpers used by the tests
def units(s: str, encoding: str) -> int:
    if encoding == "utf-8":
        return len(s.encode("utf-8"))
    if encoding == "utf-16":
        return len(s.encode("utf-16-le")) // 2
    return len(s)


def pos(text: str, offset: int, encoding: str) -> types.Position:
    """LSP position of code-point ``offset`` (an independent implementation for the tests)."""
    done = [s for s in line_starts(text) if s <= offset]
    return types.Position(line=len(done) - 1, character=units(text[done[-1]:offset], encoding))


def pos_of(text: str, needle: str, encoding: str, delta: int = 0, nth: int = 0) -> types.Position:
    i = -1
    for _ in range(nth + 1):
        i = text.index(needle, i + 1)
    return pos(text, i + delta, encoding)


def write(client, name: str, text: str):
    p = client.root / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")
    return p


def open_doc(client, name: str, text: str, *, on_disk: bool = True) -> str:
    p = write(client, name, text) if on_disk else client.root / name
    uri = p.as_uri()
    client.diagnostics.pop(uri, None)
    client.sent_versions[uri] = 1
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        text_document=types.TextDocumentItem(uri=uri, language_id="moe", version=1, text=text)))
    return uri


async def diagnostics(client, uri: str, timeout: float = 15.0, predicate=None):
    """Wait until diagnostics for ``uri`` arrive (and satisfy ``predicate``)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while True:
        d = client.diagnostics.get(uri)
        if d is not None and (predicate is None or predicate(d)):
            return list(d)
        if loop.time() > end:
            raise AssertionError(f"no (matching) diagnostics for {uri}: last {d!r}")
        await asyncio.sleep(0.01)


def change(client, uri: str, version: int, text: str, rng: types.Range | None = None) -> None:
    client.diagnostics.pop(uri, None)
    client.sent_versions[uri] = version
    ch = (types.TextDocumentContentChangePartial(range=rng, text=text) if rng is not None
          else types.TextDocumentContentChangeWholeDocument(text=text))
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
        content_changes=[ch]))


def no_internal_errors(client) -> None:
    """The server logged no exception (guarded handlers log "internal error"; anything
    pygls reports out of band is logged at Error level)."""
    bad = [m.message for m in client.log_messages
           if "internal error" in m.message or m.type == types.MessageType.Error]
    assert not bad, "server logged exceptions:\n" + "\n".join(bad)


def tdi(uri: str) -> types.TextDocumentIdentifier:
    return types.TextDocumentIdentifier(uri=uri)


async def hover(client, uri: str, text: str, needle: str, delta: int = 1, nth: int = 0):
    """The hover's markdown at ``needle`` (+ ``delta`` characters; its ``nth`` occurrence),
    None when the server has none there."""
    h = await client.text_document_hover_async(types.HoverParams(
        text_document=tdi(uri), position=pos_of(text, needle, client.encoding, delta, nth)))
    return None if h is None else h.contents.value


async def labels_at(client, uri: str, text: str, offset: int):
    """(the completion labels, the items) at ``offset`` of ``text``."""
    res = await client.text_document_completion_async(types.CompletionParams(
        text_document=tdi(uri), position=pos(text, offset, client.encoding)))
    items = res.items if hasattr(res, "items") else res
    return {i.label for i in items}, items
