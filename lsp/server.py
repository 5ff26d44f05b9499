"""The MoE-PolicyLang language server (pygls 2.x).

Start it with ``mpl-lsp`` or ``mplc lsp`` (stdio by default; ``--stdio`` is accepted because
clients append it; ``--tcp PORT`` for debugging). Only the front end of ``mpl`` is used: the
server never imports torch, the runtime or the simulator.

Each LSP feature lives in its own module with a ``register(server)`` function; this module
holds the server object, document synchronisation, settings and the command line.
"""

from __future__ import annotations

import argparse
import sys

from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.language_server import lsp_method

from mpl import __version__

from . import settings as settings_mod
from .diagnostics import Publisher
from .guard import Refusal, guarded, log, quiet_refusals
from .positions import normalize_encoding
from .workspace import Store, uri_to_path

NAME = "mpl-lsp"


class _Answered(JsonRpcInvalidParams):
    """A malformed request that has already been answered with an error response."""


class MplProtocol(LanguageServerProtocol):
    """pygls's protocol, except that document changes are applied by the server's
    :class:`~lsp.workspace.Store` alone (code-point offsets, ``\\n`` line ends as the checker
    sees them). pygls's own copy splits lines on every Unicode line break, disagrees with
    the client on such text, and can fail on it; it is not used."""

    def structure_message(self, data):
        """pygls drops a request whose params do not match the protocol's types, and the
        client waits forever; answer it with an InvalidParams error instead."""
        try:
            return super().structure_message(data)
        except JsonRpcException as exc:
            if isinstance(data, dict) and "id" in data and "method" in data:
                cause = exc.__cause__
                detail = f": {cause}" if cause is not None else ""
                self._send_response(data["id"], error=types.ResponseError(
                    code=JsonRpcInvalidParams.CODE, message=f"invalid params for {data['method']}{detail}"))
                raise _Answered(f"answered {data['method']} (id {data['id']}) with InvalidParams") from exc
            raise

    def _handle_cancel_notification(self, msg_id):
        """A cancel for a request that has already been answered is the usual case (VS Code
        cancels hover and inlay-hint requests the moment the cursor moves, often after the
        answer left): nothing to do, and no "unknown message id" warning in the log."""
        if msg_id in self._request_futures:
            super()._handle_cancel_notification(msg_id)

    @lsp_method(types.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: types.DidChangeTextDocumentParams):
        if (user_handler := self.fm.features.get(types.TEXT_DOCUMENT_DID_CHANGE)) is not None:
            yield user_handler, (params,), None


class MplLanguageServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(NAME, __version__, text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
                         protocol_cls=MplProtocol)
        self.store = Store()
        self.settings = settings_mod.Settings()
        self.publisher = Publisher(self)
        #: uri -> the syntax error last reported for a refused Format Document (lsp.formatting)
        self.format_notices: dict[str, str] = {}

    @property
    def encoding(self) -> str:
        try:
            return normalize_encoding(self.workspace.position_encoding)
        except RuntimeError:   # not initialized yet
            return "utf-16"

    def report_server_error(self, error, source):
        # out-of-band errors (bad JSON, a failing notification) and deliberate error
        # responses (a refused rename): log them, never crash
        if isinstance(error, Refusal):
            log(self, f"mpl-lsp: request refused: {error}", types.MessageType.Info)
            return
        kind = types.MessageType.Info if isinstance(error, JsonRpcException) else types.MessageType.Error
        log(self, f"mpl-lsp: {type(error).__name__}: {error}", kind)

    def can_pull_configuration(self) -> bool:
        try:
            return bool(self.client_capabilities.workspace.configuration)
        except AttributeError:
            return False

    def refresh_inlay_hints(self) -> None:
        """Ask the client to re-request inlay hints, when it supports that request."""
        try:
            ok = self.client_capabilities.workspace.inlay_hint.refresh_support
        except AttributeError:
            ok = False
        if ok:
            self.workspace_inlay_hint_refresh(None)

    def apply_settings(self, options) -> None:
        loaded = settings_mod.update(self.settings, options)
        model_changed = (loaded.settings.model != self.settings.model
                         or (loaded.shape is None) != (self.store.model is None))
        roots_changed = loaded.settings.import_roots != self.settings.import_roots
        model_changed = model_changed or roots_changed
        self.settings = loaded.settings
        self.store.settings = loaded.settings
        self.store.model = loaded.shape
        for m in loaded.messages:
            log(self, f"mpl-lsp settings: {m}", types.MessageType.Warning)
        if loaded.shape is not None:
            log(self, f"mpl-lsp: model shape {loaded.shape.name}: {loaded.shape.num_moe_layers} MoE layers, "
                      f"{loaded.shape.num_experts} experts, top-{loaded.shape.top_k}", types.MessageType.Info)
        if model_changed:
            self.store.invalidate_all()
            for uri in list(self.store.docs):
                self.publisher.schedule(uri, 0, cascade=False)


def _register_sync(server: MplLanguageServer) -> None:
    @server.feature(types.INITIALIZE)
    @guarded()
    def initialize(ls: MplLanguageServer, params: types.InitializeParams):
        roots = []
        for f in params.workspace_folders or []:
            p = uri_to_path(f.uri)
            if p:
                roots.append(p)
        if not roots and params.root_uri:
            p = uri_to_path(params.root_uri)
            if p:
                roots.append(p)
        elif not roots and params.root_path:
            roots.append(params.root_path)
        ls.store.roots = roots
        ls.apply_settings(params.initialization_options)

    @server.feature(types.INITIALIZED)
    @guarded()
    def initialized(ls: MplLanguageServer, params):
        log(ls, f"{NAME} {__version__} ready (position encoding {ls.encoding})", types.MessageType.Info)

    @server.feature(types.SHUTDOWN)
    @guarded()
    def shutdown(ls: MplLanguageServer, params):
        # pending and running checks are dropped: the client stops the process next
        ls.publisher.close()

    @server.feature(types.EXIT)
    @guarded()
    def exit_(ls: MplLanguageServer, params):
        ls.publisher.close()        # an exit without shutdown (the client gave up waiting)

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    @guarded()
    async def did_change_configuration(ls: MplLanguageServer, params: types.DidChangeConfigurationParams):
        settings = params.settings
        if not settings and ls.can_pull_configuration():
            # clients that only signal "something changed" (settings null): pull our section
            got = await ls.workspace_configuration_async(
                types.ConfigurationParams(items=[types.ConfigurationItem(section="mpl")]))
            settings = got[0] if got else None
        ls.apply_settings(settings)
        ls.refresh_inlay_hints()

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    @guarded()
    def did_open(ls: MplLanguageServer, params: types.DidOpenTextDocumentParams):
        td = params.text_document
        ls.store.open(td.uri, td.text, td.version)
        ls.publisher.schedule(td.uri, 0)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    @guarded()
    def did_change(ls: MplLanguageServer, params: types.DidChangeTextDocumentParams):
        td = params.text_document
        if ls.store.get(td.uri) is None:   # a change without didOpen: start from the disk file
            path = uri_to_path(td.uri)
            ls.store.open(td.uri, (ls.store.read_file(path) if path else None) or "", td.version)
        ls.store.change(td.uri, params.content_changes, td.version, ls.encoding)
        ls.publisher.schedule(td.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE, types.SaveOptions(include_text=True))
    @guarded()
    def did_save(ls: MplLanguageServer, params: types.DidSaveTextDocumentParams):
        uri = params.text_document.uri
        if params.text is not None:     # an open document's text; a save never opens one
            ls.store.set_text(uri, params.text)
        ls.store.forget_workspace_files()
        ls.publisher.schedule(uri, 0)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    @guarded()
    def did_close(ls: MplLanguageServer, params: types.DidCloseTextDocumentParams):
        uri = params.text_document.uri
        dependents = ls.store.dependents(uri)
        ls.store.close(uri)
        ls.format_notices.pop(uri, None)
        ls.publisher.clear(uri)
        for dep in dependents:       # they now read the file from disk again
            doc = ls.store.get(dep)
            if doc is not None:
                doc.invalidate(text=False)
                ls.publisher.schedule(dep, 0, cascade=False)

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    @guarded()
    def did_change_watched(ls: MplLanguageServer, params: types.DidChangeWatchedFilesParams):
        ls.store.forget_workspace_files()
        if ls.settings.model and any(c.uri.endswith(".json") for c in params.changes):
            msgs: list[str] = []    # the model's config.json may have changed: read it again
            ls.store.model = settings_mod.resolve_shape(ls.settings.model, msgs)
            for m in msgs:
                log(ls, f"mpl-lsp settings: {m}", types.MessageType.Warning)
        ls.store.invalidate_all()
        for uri in list(ls.store.docs):
            ls.publisher.schedule(uri, 0, cascade=False)


STATUS_COMMAND = "mpl.status"
_HEAVY = ("torch", "transformers", "accelerate", "matplotlib", "mpl.runtime", "mpl.sim", "mpl.offload")


def _register_commands(server: MplLanguageServer) -> None:
    @server.command(STATUS_COMMAND)
    def status(ls: MplLanguageServer, *args):
        """What the server knows: version, encoding, settings, model shape, open documents,
        which heavy modules are loaded (none should be: the server is front end only), and
        with a document URI argument the server's copy of that buffer (to debug sync)."""
        st = ls.settings
        shape = ls.store.model
        uri = args[0] if args and isinstance(args[0], str) else None
        doc = ls.store.get(uri) if uri else None
        return {
            "document": None if doc is None else {"uri": doc.uri, "version": doc.version, "text": doc.text},
            "version": __version__,
            "positionEncoding": ls.encoding,
            "settings": {"model": st.model, "debounceMs": st.debounce_ms,
                         "inlayHints": {"defaults": st.hint_defaults, "perLayer": st.hint_per_layer},
                         "importRoots": None if st.import_roots is None else list(st.import_roots)},
            "model": None if shape is None else {"name": shape.name, "moeLayers": shape.num_moe_layers,
                                                 "experts": shape.num_experts, "topK": shape.top_k},
            "documents": sorted(ls.store.docs),
            "roots": ls.store.roots,
            # the standard library's folder: the VS Code extension opens its files read-only
            "stdlib": _stdlib_dir(),
            "heavyModules": sorted(m for m in sys.modules if m.split(".")[0] in _HEAVY or m.startswith(_HEAVY)),
        }


def _stdlib_dir() -> str | None:
    from mpl.stdlib_path import stdlib_dir
    try:
        return stdlib_dir()
    except Exception:       # an installation without its stdlib folder
        return None


def create_server() -> MplLanguageServer:
    from . import (code_actions, completion, folding, formatting, hover, inlay_hints,
                   navigation, semantic_tokens, symbols)
    quiet_refusals()
    server = MplLanguageServer()
    _register_sync(server)
    _register_commands(server)
    for mod in (hover, completion, symbols, folding, semantic_tokens, formatting,
                code_actions, navigation, inlay_hints):
        mod.register(server)
    return server


def build_arg_parser(prog: str = NAME) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description="MoE-PolicyLang language server (LSP over stdio by default).")
    p.add_argument("--stdio", action="store_true", help="talk LSP over stdin/stdout (the default)")
    p.add_argument("--tcp", type=int, metavar="PORT", help="listen on a TCP port instead of stdio")
    p.add_argument("--host", default="127.0.0.1", help="host for --tcp (default 127.0.0.1)")
    p.add_argument("--version", action="version", version=f"{NAME} {__version__}")
    return p


def serve(args) -> int:
    # the checker runs on a worker thread: hand the GIL back to the event loop often, so a
    # request arriving during a check is answered within a few milliseconds
    sys.setswitchinterval(0.001)
    server = create_server()
    if getattr(args, "tcp", None) is not None:
        if not (0 < args.tcp < 65536):
            print(f"{NAME}: --tcp needs a port in 1..65535, got {args.tcp}", file=sys.stderr)
            return 2
        server.start_tcp(args.host, args.tcp)
    else:
        server.start_io()
    server.publisher.close()        # the client went away without shutdown: drop pending checks
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_arg_parser().parse_args(argv)
    return serve(args)


if __name__ == "__main__":  # python -m lsp.server
    sys.exit(main())
