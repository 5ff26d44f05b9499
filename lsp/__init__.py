"""The MoE-PolicyLang language server (``mpl-lsp``, ``mplc lsp``).

One small module per LSP feature, all on top of the front end of :mod:`mpl` (parser, checker,
schema, formatter) — never torch, the runtime or the simulator:

* :mod:`lsp.server` — the server object, document sync, settings, commands, command line
* :mod:`lsp.workspace` — open buffers, per-version caches, import graph, workspace files
* :mod:`lsp.analysis` — parse/analyze once per version (the same calls as ``mplc check``)
* :mod:`lsp.positions` — code-point offsets <-> LSP positions (UTF-16, UTF-8, UTF-32)
* :mod:`lsp.tokens`, :mod:`lsp.context` — a forgiving token stream and what the cursor expects
* :mod:`lsp.diagnostics`, :mod:`lsp.hover`, :mod:`lsp.completion`, :mod:`lsp.symbols`,
  :mod:`lsp.folding`, :mod:`lsp.semantic_tokens`, :mod:`lsp.formatting`,
  :mod:`lsp.code_actions`, :mod:`lsp.navigation`, :mod:`lsp.inlay_hints` — the features
* :mod:`lsp.settings`, :mod:`lsp.render`, :mod:`lsp.guard` — settings, markdown, error guard
* :mod:`lsp.hover_text` — hover markdown without the protocol (the browser playground uses it)

``import lsp`` itself imports nothing. pygls and lsprotocol are needed by the feature
modules above, not by :mod:`lsp.tokens`, :mod:`lsp.context`, :mod:`lsp.render` and
:mod:`lsp.hover_text`, which run in Pyodide with :mod:`mpl` and lark alone.
"""
