"""``mplc lsp``: start the language server (the same one as ``mpl-lsp``)."""

from __future__ import annotations


def add_arguments(parser) -> None:
    parser.add_argument("--stdio", action="store_true", help="talk LSP over stdin/stdout (the default)")
    parser.add_argument("--tcp", type=int, metavar="PORT", help="listen on a TCP port instead of stdio")
    parser.add_argument("--host", default="127.0.0.1", help="host for --tcp (default 127.0.0.1)")
    from mpl import __version__
    parser.add_argument("--version", action="version", version=f"mpl-lsp {__version__}")


def run(args) -> int:
    try:
        from lsp.server import serve
    except ImportError as e:  # pygls / lsprotocol are the optional 'lsp' extra
        import sys

        from mpl.extras import missing_message
        why = missing_message(e) or (f"{e}; install the language-server extra: "
                                     f"pip install 'mpl-policylang[lsp]'")
        print(f"mplc lsp: error: {why}", file=sys.stderr)
        return 1
    return serve(args)
