"""``mplc``: the command-line entry point. Thin: each subcommand lives in its own module
(``mpl/cli/cmd_NAME.py`` with ``add_arguments(parser)`` and ``run(args) -> int``) and is
imported only when it is the one asked for, so ``mplc check`` starts fast.

Exit codes: 0 success, 1 the input is wrong (errors in a policy, unreadable trace, ...) or
an optional dependency the command needs is missing (the line names the extra that installs
it), 2 usage errors (argparse's own convention), 3 an internal error (a bug in mplc: the
command prints one line asking to report it; ``MPL_DEBUG=1`` prints the traceback too), 130
after Ctrl-C (``mplc COMMAND: interrupted``, no traceback, worker processes included).
Every error line starts with ``mplc COMMAND: error:`` (:mod:`mpl.cli.errors`).

A closed standard output (``mplc check x.moe | head -1``) is not an error: once the reader
has gone, output is dropped quietly (the stream is pointed at the null device) and the
command runs to its end, so the exit status is still the command's own (1 for a file with
errors). The same holds for the standard error.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from mpl.cli.options import refuse_empty_values

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
    "run": ("mpl.cli.cmd_run", "run a policy on a model, live or in shadow mode, and generate"),
    "demo": ("mpl.cli.cmd_demo", "offline end-to-end demo on a built-in tiny model"),
    "lsp": ("mpl.cli.cmd_lsp", "start the language server (stdio)"),
    "doctor": ("mpl.cli.cmd_doctor", "show the versions and the runtime backend in use"),
}


#: the commands that read policies (and so resolve imports): they take --import-root
IMPORTING_COMMANDS = ("check", "compile", "replay", "sweep", "tune", "run")


def _folder(value: str) -> str:
    if not os.path.isdir(value):
        raise argparse.ArgumentTypeError(f"--import-root {value}: not a folder")
    return value


def _add_import_root(p: argparse.ArgumentParser) -> None:
    p.add_argument("--import-root", action="append", type=_folder, metavar="DIR",
                   help="refuse imports outside DIR (repeatable; std/ is always importable); "
                        "default: no limit")


def _load(name: str):
    module, _ = COMMANDS[name]
    return importlib.import_module(module)


class _Version(argparse.Action):
    """--version: the version and the runtime backend (imported only when asked)."""

    def __call__(self, parser, namespace, values, option_string=None):
        from mpl.cli.cmd_doctor import version_text
        print(version_text())
        parser.exit()


def build_parser(only: str | None = None) -> argparse.ArgumentParser:

    parser = argparse.ArgumentParser(
        prog="mplc", description="MoE-PolicyLang compiler and tools.",
        epilog="Run 'mplc COMMAND --help' for the options of a command.")
    parser.add_argument("--version", action=_Version, nargs=0,
                        help="show the version and the runtime backend, then exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (_, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(_leaf=p)       # the parser that reports an unknown option
        if name == only:
            _load(name).add_arguments(p)
            if name in IMPORTING_COMMANDS:
                _add_import_root(p)
            refuse_empty_values(p)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    only = argv[0] if argv and argv[0] in COMMANDS else None
    if only is not None:
        try:
            mod = _load(only)
        except ImportError as e:  # an optional dependency of this command is missing
            return _import_error(only, e)
    saved = sys.stdout, sys.stderr
    if only != "lsp":                    # the language server owns its streams
        sys.stdout, sys.stderr = _PipeGuard(sys.stdout), _PipeGuard(sys.stderr)
    try:
        return _run(only, mod if only is not None else None, argv)
    finally:
        for guard in (sys.stdout, sys.stderr):
            if isinstance(guard, _PipeGuard):
                guard.flush()
        sys.stdout, sys.stderr = saved


def _run(only: str | None, mod, argv: list[str]) -> int:
    parser = build_parser(only)
    args, unknown = parser.parse_known_args(argv)
    if unknown:       # the command's own usage and a suggestion, not the top-level usage
        leaf = getattr(args, "_leaf", parser)
        leaf.error(_unrecognized(leaf, unknown))
    if args.command is None:
        parser.print_help()
        return 2
    if getattr(args, "import_root", None):
        from mpl.checker import set_default_import_roots
        set_default_import_roots(args.import_root)
    try:
        return int(mod.run(args) or 0)
    except KeyboardInterrupt:
        print(f"mplc {only}: interrupted", file=sys.stderr)
        return INTERRUPTED
    except BrokenPipeError as e:
        # Output that went around the guards (a stream's raw buffer): the result is unknown.
        if e.filename is not None:
            print(f"mplc {only}: cannot write {e.filename}: {e.strerror or e}", file=sys.stderr)
        return 1
    except (MemoryError, OverflowError) as e:
        return _resource_error(only, e, args)
    except ImportError as e:
        return _import_error(only, e)
    except Exception as e:   # noqa: BLE001 — last resort: bad input is reported where it is read
        return _internal_error(only, e)


def _unrecognized(parser: argparse.ArgumentParser, unknown: list[str]) -> str:
    """``unrecognized arguments: ...``, with the closest option of the command when the first
    unknown one is a misspelt option."""
    import difflib

    msg = f"unrecognized arguments: {' '.join(unknown)}"
    first = next((u for u in unknown if u.startswith("--")), None)
    if first is not None:
        known = [o for a in parser._actions for o in a.option_strings
                 if o.startswith("--") and a.help is not argparse.SUPPRESS]
        close = difflib.get_close_matches(first.split("=", 1)[0], known, n=1, cutoff=0.6)
        if close:
            msg += f"; did you mean {close[0]}?"
    return msg


def _resource_error(command: str | None, e: BaseException, args) -> int:
    """The last resort for what the schema's ranges and the trace limits cannot bound
    statically (a trace's content, a value of the model's shape times the policy's): a
    MemoryError or an OverflowError is bad input too big for this machine, not a bug. One
    line naming the inputs (the trace's size and declared shape), exit 1."""
    what = "out of memory" if isinstance(e, MemoryError) else f"a number too large ({e})"
    parts = []
    trace = getattr(args, "trace", None)
    if isinstance(trace, str):
        parts.append(f"trace {trace}: {_describe_trace(trace)}")
    policy = getattr(args, "policy", None)
    for p in (policy if isinstance(policy, list) else [policy] if isinstance(policy, str) else []):
        parts.append(f"policy {p}")
    inputs = f" with {'; '.join(parts)}" if parts else ""
    print(f"mplc {command}: error: {what}{inputs}: the input is too large for this process; "
          f"replay a shorter trace or lower the policy's capacities and windows", file=sys.stderr)
    return 1


def _describe_trace(path: str) -> str:
    """The size of a trace file and the shape its header declares (what made the work
    large), as far as they can be read."""
    try:
        size = os.path.getsize(path)
    except OSError:
        return "unreadable"
    out = f"{size:,} bytes"
    try:
        from mpl import traceio
        if traceio.kind_of(path) == "native":
            with traceio.open_native(path) as f:
                h = traceio.read_native_header(f, path)
            out += (f", {h.num_moe_layers:,} MoE layers x {h.num_experts:,} experts, "
                    f"top-{h.top_k}")
    except Exception:  # noqa: BLE001 — a description only: the file's own error comes elsewhere
        pass
    return out


class _PipeGuard:
    """A text stream that turns "the reader has gone" (EPIPE) into quiet success: the first
    BrokenPipeError points the stream's file descriptor at the null device (so buffered text
    and Python's own flush at exit go nowhere, without a message) and every later write is
    dropped. Everything else is the wrapped stream's."""

    def __init__(self, stream) -> None:
        self._stream = stream
        self.broken = False

    def _gone(self) -> None:
        self.broken = True
        try:
            fd = self._stream.fileno()
            null = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(null, fd)
            finally:
                os.close(null)
        except (OSError, AttributeError, ValueError):   # no descriptor (a test's capture)
            pass

    def write(self, text: str) -> int:
        if not self.broken:
            try:
                return self._stream.write(text)
            except BrokenPipeError:
                self._gone()
        return len(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if self.broken:
            try:                          # the descriptor is the null device now
                self._stream.flush()
            except OSError:
                pass
            return
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._gone()
            try:
                self._stream.flush()
            except OSError:
                pass
        except (OSError, ValueError):     # a closed stream: nothing more to say
            pass

    def __getattr__(self, name):
        return getattr(self._stream, name)


INTERNAL_ERROR = 3
#: the exit status after Ctrl-C (128 + SIGINT, the shells' convention)
INTERRUPTED = 130


def _import_error(command: str | None, e: ImportError) -> int:
    """A missing optional dependency is the installation's problem, not a bug: one line
    naming it, what needs it and the extra that installs it (``mpl.extras``), exit 1."""
    from mpl.extras import missing_message

    msg = missing_message(e)
    if msg is None:
        return _internal_error(command, e)
    print(f"mplc {command}: error: {msg}", file=sys.stderr)
    return 1


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
