"""``mplc``: the command-line entry point. Thin: each subcommand lives in its own module
(``mpl/cli/cmd_NAME.py`` with ``add_arguments(parser)`` and ``run(args) -> int``) and is
imported only when it is the one asked for, so ``mplc check`` starts fast.

Exit codes: 0 success, 1 the input is wrong (errors in a policy, unreadable trace, ...),
2 usage errors (argparse's own convention), 3 an internal error (a bug in mplc: the command
prints one line asking to report it; ``MPL_DEBUG=1`` prints the traceback too).
"""

from __future__ import annotations

import argparse
import importlib
import sys

# name -> (module, one-line help). Order is the order of `mplc --help`.
COMMANDS: dict[str, tuple[str, str]] = {
    "check": ("mpl.cli.cmd_check", "check policy files and print diagnostics"),
    "fmt": ("mpl.cli.cmd_fmt", "format policy files in canonical layout (keeps comments)"),
    "explain": ("mpl.cli.cmd_explain", "explain a diagnostic code, e.g. mplc explain MPL102"),
    "compile": ("mpl.cli.cmd_compile", "compile a policy to a Python module"),
    "replay": ("mpl.cli.cmd_replay", "replay a trace through a policy: stats, Belady optimum, simulated tok/s"),
    "sweep": ("mpl.cli.cmd_sweep", "sweep capacities and parameters over a trace; table and plots"),
    "tune": ("mpl.cli.cmd_tune", "search for the best policy for a trace and a budget"),
    "trace": ("mpl.cli.cmd_trace", "synthesize, record or convert routing traces"),
    "run": ("mpl.cli.cmd_run", "attach a policy to a model and generate"),
    "demo": ("mpl.cli.cmd_demo", "offline end-to-end demo on a built-in tiny model"),
    "lsp": ("mpl.cli.cmd_lsp", "start the language server (stdio)"),
}


def _load(name: str):
    module, _ = COMMANDS[name]
    return importlib.import_module(module)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    from mpl import __version__

    parser = argparse.ArgumentParser(
        prog="mplc", description="MoE-PolicyLang compiler and tools.",
        epilog="Run 'mplc COMMAND --help' for the options of a command.")
    parser.add_argument("--version", action="version", version=f"mplc {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (_, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if name == only:
            _load(name).add_arguments(p)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    only = argv[0] if argv and argv[0] in COMMANDS else None
    if only is not None:
        try:
            mod = _load(only)
        except ImportError as e:  # an optional dependency of this command is missing
            print(f"mplc {only}: {e}", file=sys.stderr)
            return 2
    parser = build_parser(only)
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        return int(mod.run(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as e:   # noqa: BLE001 — last resort: bad input is reported where it is read
        return _internal_error(only, e)


INTERNAL_ERROR = 3


def _internal_error(command: str | None, e: BaseException) -> int:
    """A bug, not bad input (every reader reports bad input itself): one line, and the
    traceback only when MPL_DEBUG=1."""
    import os

    print(f"mplc {command}: internal error: {type(e).__name__}: {e}", file=sys.stderr)
    if os.environ.get("MPL_DEBUG") == "1":
        import traceback
        traceback.print_exception(e, file=sys.stderr)
    else:
        print("this is a bug in mplc; please report it with the command line "
              "(rerun with MPL_DEBUG=1 for the traceback)", file=sys.stderr)
    return INTERNAL_ERROR


if __name__ == "__main__":  # python -m mpl.cli.main
    sys.exit(main())
